"""What a telemetry source reads: one GPU, or one host's memory. ``None`` means "not reported"."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one moment."""

    index: int
    name: str | None = None
    vram_total_bytes: int | None = None
    vram_used_bytes: int | None = None
    utilization_percent: float | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None


@dataclass(frozen=True, slots=True)
class HostMemory:
    """One host's memory; ``unified`` when the GPU uses it too (Apple silicon)."""

    total_bytes: int | None = None
    used_bytes: int | None = None
    unified: bool = False


_R = TypeVar("_R", GpuReading, HostMemory)


def overlay(base: _R | None, top: _R | None) -> _R | None:
    """``top``'s reported values over ``base``'s (a remote reading overrides a local one field by field)."""
    if base is None or top is None:
        return top if base is None else base
    values: dict[str, Any] = {
        f.name: getattr(top, f.name) for f in fields(top) if getattr(top, f.name) is not None
    }
    if isinstance(top, HostMemory):
        values["unified"] = top.unified or base.unified
    return replace(base, **values)
