"""What the server reads of the plan (timeouts, body and connection caps, the names it answers to): a
frozen row of the loaded plan, kept on the ground floor because the connections read it too."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerSettings:
    default_alias: str | None
    alias_namespace: str | None
    direct_models: bool
    resolved_header: str
    max_body_bytes: int
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int
    max_upstream_body_bytes: int
    max_stream_line_bytes: int
    # a stream whose first content is not there this long after the walk began is started anyway
    stream_keepalive_s: float = 10.0
