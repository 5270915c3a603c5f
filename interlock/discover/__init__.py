"""`interlock init --discover`: what answers at each URL, one probe module per kind of server.

The probes run in ``PROBES``'s order and the first that recognises the server wins: Ollama and
llama-server also answer ``/v1/models`` (and llama-server ``/v1/messages``), so the servers with
their own richer routes are asked first. Nothing is sent anywhere but the URLs given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from interlock.discover import anthropic, llamacpp, ollama, openai
from interlock.discover.base import Found, FoundModel, Http, Probe, said

MAX_URL_CHARS = 2048
"""A URL given is shown (escaped) up to this length."""

__all__ = ["PROBES", "Found", "FoundModel", "discover", "root_of"]

PROBES: tuple[Probe, ...] = (ollama.probe, llamacpp.probe, openai.probe, anthropic.probe)


def root_of(url: str) -> str:
    """``http://h:8080/v1/`` -> ``http://h:8080``: the probes add their own paths."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


def discover(urls: Sequence[str], timeout_s: float = 5.0) -> list[Found | str]:
    """For each URL, what answers there, or a sentence saying that nothing recognisable did."""
    out: list[Found | str] = []
    for given in urls:
        root = root_of(given)
        with Http(root, timeout_s) as http:
            found = next((f for probe in PROBES if (f := probe(http, root)) is not None), None)
            if found is None:
                reached = http.get("/") is not None
                why = (
                    "answers, but as none of Ollama, llama-server, OpenAI- or Anthropic-compatible"
                    if reached
                    else "does not answer"
                )
                out.append(f"{said(given, MAX_URL_CHARS)}: {why}" + "".join(f"; {r}" for r in http.refused))
            else:
                out.append(replace(found, notes=(*found.notes, *http.refused)))
    return out
