"""`telemetry-sidecar`: serve this host's GPU and memory readings for a gateway elsewhere."""

from __future__ import annotations

from typing import Any

from interlock.runtime.telemetry import sidecar


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "telemetry-sidecar",
        help="serve this host's nvidia-smi and memory readings as JSON (a worker's `telemetry.url`)",
    )
    sidecar.add_arguments(p)
    p.set_defaults(handler=sidecar.run)
