"""Worker telemetry: GPU and memory readings, taken in the background, never on the request path.

A worker's plan entry says where its readings come from (``telemetry``; null means none are taken, and
nothing is run or fetched for it):

- ``nvidia_smi``: ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits --id=<gpu>`` on the
  gateway's own host (``nvidia_smi.py``);
- ``host_memory``: the gateway host's memory, ``/proc/meminfo`` on Linux, ``sysctl hw.memsize`` and
  ``vm_stat`` on macOS (``memory.py``);
- ``url``: a sidecar on the worker's host serving the JSON document of ``document.py``; its values
  override the local ones field by field.

On a unified-memory box (Apple silicon: the plan's ``hardware.unified_memory``, or the sidecar's
``host.unified_memory``) the GPU's memory is the system memory, so VRAM is reported from it.

A source that cannot be read raises one of these; the collector records its ``error_class`` and drops
that source's values (a stale reading would mislead more than no reading):

    TelemetryError              a reading could not be taken
    ├── SourceMissing           `missing`: no such executable or file on this host
    ├── SourceTimeout           `timeout`: no answer in time (a hung process is killed)
    ├── SourceFailed            `failed`: a non-zero exit status, an HTTP error, a refused connection
    └── SourceMalformed         `malformed`: output that cannot be read
"""
