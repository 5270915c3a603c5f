"""What `connect` knows of an alias (``AliasFacts``), and how a renderer says it cannot serve a client."""

from __future__ import annotations

from dataclasses import dataclass

from interlock.connect.grammar import Expansion

NO_KEY = "interlock-no-key"  # what a client that insists on a key sends to a gateway with auth off


class Refused(Exception):
    """The alias cannot hold the client (its window is too small for the client's own prompt);
    ``str()`` names the numbers, ready to print."""


@dataclass(frozen=True, slots=True)
class AliasFacts:
    url: str  # the gateway's base URL, without a trailing slash
    alias: str
    context_tokens: int | None  # the alias's guaranteed window (the smallest of its chain); None: unknown
    key_env: str | None  # the variable holding the caller key; None: the gateway needs none
    output_tokens: int | None = None  # the alias's output ceiling (the smallest declared); None: unknown

    def output_ceiling(self, client_default: int) -> int:
        """The client's own default capped at a quarter of the window (a prompt of three quarters of
        the window still fits) and at the alias's output ceiling."""
        ceiling = self.capped(client_default)
        if self.context_tokens is None:
            return ceiling
        return max(1, min(ceiling, self.context_tokens // 4))

    def capped(self, tokens: int) -> int:
        """``tokens`` at most the alias's output ceiling, where one is declared."""
        return tokens if self.output_tokens is None else min(tokens, self.output_tokens)

    @property
    def key(self) -> str | Expansion:
        """The key as a value to export: the caller key's variable, or the placeholder."""
        return Expansion(self.key_env) if self.key_env else NO_KEY

    @property
    def window(self) -> str:
        return f"{self.context_tokens:,} tokens" if self.context_tokens is not None else "unknown"
