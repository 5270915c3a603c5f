"""What a deployment target is given (``DeployOptions``) and what it is (``Target``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from interlock.schema.plan import RoutingPlan


@dataclass(frozen=True, slots=True)
class DeployOptions:
    name: str = "interlock"
    namespace: str | None = None
    image: str = "interlock:0.1.0"
    replicas: int = 2
    workers: int = 1
    port: int = 8080
    state_url: str | None = None
    state_url_in_secret: bool = False  # INTERLOCK_STATE_URL from the credentials Secret
    credentials_secret: str | None = None  # default: "<name>-credentials"


Write = Callable[[RoutingPlan, DeployOptions], Mapping[str, str]]
"""A plan and the options -> file name -> text."""


@dataclass(frozen=True, slots=True)
class Target:
    write: Write
    one_file: bool  # `-o` names the one file written, not a directory of them
