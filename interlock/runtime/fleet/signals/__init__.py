"""Load signals from OpenAI-compatible servers (llama.cpp, vLLM, SGLang): one module per server kind,
one row each in ``SERVERS``; fetched outside the request path (``fetch``), read by worker choice
(``choice``) with one dictionary lookup."""

from __future__ import annotations

from collections.abc import Mapping

from interlock.runtime.fleet.signals import llamacpp, sglang, vllm
from interlock.runtime.fleet.signals.base import ServerKind

SERVERS: Mapping[str, ServerKind] = {kind.name: kind for kind in (llamacpp.KIND, sglang.KIND, vllm.KIND)}
