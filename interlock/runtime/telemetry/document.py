"""The telemetry document a sidecar serves (``GET <telemetry.url>``) and how the gateway reads it.

    {
      "format": "interlock-telemetry/1",
      "at": "2026-11-30T22:04:58.120Z",
      "gpus": [{"index": 0, "name": "NVIDIA H200",
                "vram_total_bytes": 150754820096, "vram_used_bytes": 32269926400,
                "utilization_percent": 100.0, "temperature_celsius": 55.0,
                "power_watts": 692.16, "power_limit_watts": 700.0}],
      "host": {"memory_total_bytes": 270582939648, "memory_used_bytes": 12884901888,
               "unified_memory": false},
      "errors": {"nvidia_smi": "missing"}
    }

Every reading may be null or left out (not reported); ``gpus`` and ``host`` may be left out. Unknown
keys are ignored, so a newer sidecar can add fields. A value of the wrong type, or another ``format``,
makes the whole document malformed: the gateway drops it rather than guess. ``errors`` names the
sources the sidecar could not read and why (an error class).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from interlock.runtime.telemetry.readings import GpuReading, HostMemory
from interlock.runtime.telemetry.source_errors import SourceMalformed

FORMAT = "interlock-telemetry/1"
MAX_BYTES = 256 * 1024

_GPU_NUMBERS = {
    "vram_total_bytes": int,
    "vram_used_bytes": int,
    "utilization_percent": float,
    "temperature_celsius": float,
    "power_watts": float,
    "power_limit_watts": float,
}


def build(
    gpus: Sequence[GpuReading], host: HostMemory | None, errors: Mapping[str, str], at: str
) -> dict[str, Any]:
    """The document for these readings."""
    doc: dict[str, Any] = {
        "format": FORMAT,
        "at": at,
        "gpus": [
            {"index": g.index, "name": g.name, **{key: getattr(g, key) for key in _GPU_NUMBERS}} for g in gpus
        ],
        "errors": dict(errors),
    }
    if host is not None:
        doc["host"] = {
            "memory_total_bytes": host.total_bytes,
            "memory_used_bytes": host.used_bytes,
            "unified_memory": host.unified,
        }
    return doc


def read(doc: Any, gpu: int) -> tuple[GpuReading | None, HostMemory | None]:
    """GPU ``gpu`` and the host of a document; ``SourceMalformed`` names the first thing wrong."""
    if not isinstance(doc, dict):
        raise SourceMalformed(f"the document is a JSON {type(doc).__name__}, not an object")
    if doc.get("format") != FORMAT:
        raise SourceMalformed(f"`format` is {str(doc.get('format'))[:40]!r}, expected {FORMAT!r}")
    gpus = doc.get("gpus") or []
    if not isinstance(gpus, list):
        raise SourceMalformed("`gpus` is not a list")
    readings = [_gpu(item, n) for n, item in enumerate(gpus)]
    mine = next((r for r in readings if r.index == gpu), None)
    if mine is None and readings:
        shown = ", ".join(str(r.index) for r in readings)
        raise SourceMalformed(f"the document reports GPU(s) {shown}, not GPU {gpu}")
    host = doc.get("host")
    return mine, None if host is None else _host(host)


def read_errors(doc: dict[str, Any]) -> dict[str, str]:
    """The sources the sidecar could not read, and why (``{"nvidia_smi": "missing"}``)."""
    errors = doc.get("errors") or {}
    if not isinstance(errors, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in errors.items()
    ):
        raise SourceMalformed("`errors` is not an object of strings")
    return {k[:40]: v[:40] for k, v in sorted(errors.items())[:8]}


def _gpu(item: Any, n: int) -> GpuReading:
    where = f"gpus[{n}]"
    if not isinstance(item, dict):
        raise SourceMalformed(f"`{where}` is not an object")
    index = item.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise SourceMalformed(f"`{where}.index` is not a GPU index")
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise SourceMalformed(f"`{where}.name` is not a string")
    values = {key: _number(item.get(key), f"{where}.{key}", kind) for key, kind in _GPU_NUMBERS.items()}
    return GpuReading(index=index, name=name, **values)


def _host(host: Any) -> HostMemory:
    if not isinstance(host, dict):
        raise SourceMalformed("`host` is not an object")
    unified = host.get("unified_memory", False)
    if not isinstance(unified, bool):
        raise SourceMalformed("`host.unified_memory` is not a boolean")
    return HostMemory(
        total_bytes=_number(host.get("memory_total_bytes"), "host.memory_total_bytes", int),
        used_bytes=_number(host.get("memory_used_bytes"), "host.memory_used_bytes", int),
        unified=unified,
    )


def _number(value: Any, where: str, kind: type[int] | type[float]) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise SourceMalformed(f"`{where}` is not a non-negative number")
    return kind(value)
