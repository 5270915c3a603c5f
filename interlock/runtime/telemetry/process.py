"""Run a short local command with a deadline; a process that hangs is killed with its whole group.

Blocking: the collector calls it through ``asyncio.to_thread``, the sidecar from its request thread.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence

from interlock.runtime.telemetry.source_errors import SourceFailed, SourceMissing, SourceTimeout

MAX_DETAIL = 200


def run_command(argv: Sequence[str], timeout_s: float) -> str:
    """The command's standard output; ``SourceMissing`` / ``SourceTimeout`` / ``SourceFailed`` otherwise."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills what it started too
        )
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise SourceMissing(f"{argv[0]}: not found") from exc
    except PermissionError as exc:
        raise SourceMissing(f"{argv[0]}: not executable") from exc
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        _kill(proc)
        raise SourceTimeout(f"{argv[0]}: no answer within {timeout_s:g}s; killed") from exc
    if proc.returncode != 0:
        detail = (out or err).decode("utf-8", "replace").strip().splitlines()
        first = detail[0][:MAX_DETAIL] if detail else ""
        raise SourceFailed(f"{argv[0]}: exit status {proc.returncode}" + (f": {first}" if first else ""))
    return out.decode("utf-8", "replace")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=2.0)  # reap it; a child that escaped the group may hold the pipes
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait(timeout=2.0)
