"""The usage ledger's storage seam: one small async ``Store``, one module per backend, one table of them.

What is counted: per (day, tenant, key id, model) the requests, prompt and completion tokens, money (in
millionths of the plan's currency, an integer so that sums never drift) and how many of those requests
had their tokens estimated because the upstream reported none. The request path never touches a store:
``ledger.Ledger`` debits an in-memory balance and one writer task hands batches of debits to the store.

The store is chosen once, at start, from a usage URL (``--usage-url``, else ``$INTERLOCK_USAGE_URL``,
else ``sqlite:`` under ``--state-dir``, else ``memory:``):

- ``memory:``: nothing persisted (balances are per process and start at zero) (``memory.py``);
- ``sqlite:PATH`` (``sqlite:///abs/path`` too): one file in WAL mode, the default (``sqlite.py``);
- ``postgresql://...`` (``postgres://`` too): one table shared by every replica (``postgres.py``).

Why the boundary: the ledger (batching, balances, the crash window) must not care whether a commit is a
local fsync or a round trip, and a store must not know about plans or budgets.

Exceptions: ``UsageStoreError`` is the only one a store lets out (raised ``from`` the driver's error);
the ledger logs it and keeps the batch for the next flush.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from interlock.runtime.usage.base import Store


def open_store(url: str) -> Store:
    """The store for a usage URL, by the table below; ``ValueError`` names what is known."""
    scheme, _, rest = url.partition(":")
    factory = STORES.get(scheme)
    if factory is None:
        known = ", ".join(f"{s}:" for s in STORES)
        raise ValueError(f"unknown usage store {scheme + ':'!r} (known: {known})")
    return factory(url, rest)


def store_url(usage_url: str | None, state_dir: str | None) -> str:
    """The usage URL a gateway uses: the one given, else SQLite under the state directory, else memory."""
    if usage_url:
        return usage_url
    if state_dir:
        return f"sqlite:{state_dir.rstrip('/') or '/'}/usage.db"
    return "memory:"


def _memory(url: str, rest: str) -> Store:
    from interlock.runtime.usage.memory import MemoryStore

    return MemoryStore()


def _sqlite(url: str, rest: str) -> Store:
    from interlock.runtime.usage.sqlite import SqliteStore

    path = rest[2:] if rest.startswith("//") else rest  # sqlite:///abs/path or sqlite:PATH
    if not path:
        raise ValueError("sqlite: needs a file path (sqlite:PATH or sqlite:///absolute/path)")
    return SqliteStore(path)


def _postgres(url: str, rest: str) -> Store:
    try:
        from interlock.runtime.usage.postgres import PostgresStore
    except ImportError:
        raise ValueError(
            "a postgresql: usage store needs psycopg 3: pip install 'interlock[postgres]'"
        ) from None
    return PostgresStore(url)


STORES: Mapping[str, Callable[[str, str], Store]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
}
