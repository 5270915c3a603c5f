"""Fake upstreams for the transport tests: the adapter tests' own (``tests/runtime/upstream/conftest.py``),
each in its own thread and event loop for the module, every test starting with its faults and recorded
requests cleared."""

from __future__ import annotations

from tests.runtime.upstream.conftest import _ollama_server, _openai_server, ollama_fake, openai_fake

__all__ = ["_ollama_server", "_openai_server", "ollama_fake", "openai_fake"]
