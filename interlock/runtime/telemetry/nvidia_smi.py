"""``nvidia-smi --query-gpu`` -> ``GpuReading``: the command, and a parser that survives real output.

Real output differs from the documentation in ways a parser must take: ``[N/A]`` for what a GPU does
not have (a datacenter GPU's fan speed), ``[Not Supported]``, ``[Unknown Error]``, units in the values
unless ``nounits`` (``30775 MiB``, ``692.16 W``), a header line with ``--format=csv``. Any bracketed
value is "not reported"; a line whose column count is wrong is skipped, never guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from interlock.runtime.telemetry.process import run_command
from interlock.runtime.telemetry.readings import MIB, GpuReading
from interlock.runtime.telemetry.source_errors import SourceMalformed

COMMAND = "nvidia-smi"
FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
)
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)")

Row = Mapping[str, str | None]


def query_argv(gpu: int | None, command: str = COMMAND) -> list[str]:
    """The command line: the fields above, no header, no units; one GPU, or all when ``gpu`` is None."""
    argv = [command, f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits"]
    return argv if gpu is None else [*argv, f"--id={gpu}"]


def query_gpus(gpu: int | None, timeout_s: float, *, command: str = COMMAND) -> list[GpuReading]:
    """Run nvidia-smi (blocking) and read every GPU it reports, or only ``gpu``."""
    readings = parse_readings(run_command(query_argv(gpu, command), timeout_s))
    if gpu is not None:
        readings = [r for r in readings if r.index == gpu]
        if not readings:
            raise SourceMalformed(f"nvidia-smi reported no usable line for GPU {gpu}")
    return readings


def parse_readings(text: str, fields: Sequence[str] = FIELDS) -> list[GpuReading]:
    """The GPUs of a ``--query-gpu`` answer asked for ``fields`` (which must include ``index``)."""
    readings = [reading(row) for row in parse_rows(text, fields)]
    return [r for r in readings if r is not None]


def parse_rows(text: str, fields: Sequence[str]) -> list[dict[str, str | None]]:
    """Each line with exactly one value per field; bracketed and empty values become None."""
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(fields) or not line.strip():
            continue
        rows.append(
            {
                f: None if not c or c.startswith("[") or c == "N/A" else c
                for f, c in zip(fields, cells, strict=True)
            }
        )
    return rows


def reading(row: Row) -> GpuReading | None:
    """One row as a reading; None when it has no numeric ``index`` (a header line, garbage)."""
    index = number(row.get("index"))
    if index is None or index != int(index) or index < 0:
        return None
    total, used = number(row.get("memory.total")), number(row.get("memory.used"))
    return GpuReading(
        index=int(index),
        name=row.get("name"),
        vram_total_bytes=None if total is None else int(total * MIB),
        vram_used_bytes=None if used is None else int(used * MIB),
        utilization_percent=number(row.get("utilization.gpu")),
        temperature_celsius=number(row.get("temperature.gpu")),
        power_watts=number(row.get("power.draw")),
        power_limit_watts=number(row.get("power.limit")),
    )


def number(value: str | None) -> float | None:
    """The number a value starts with (``30775``, ``30775 MiB``, ``692.16 W``); None if it has none."""
    if value is None:
        return None
    match = _NUMBER.match(value)
    return float(match.group(0)) if match else None
