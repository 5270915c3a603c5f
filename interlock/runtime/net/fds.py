"""File descriptors: the process's open-file limit, raised at start, and the connection cap it allows.

Every client connection is a descriptor, and so is the upstream connection a streamed answer holds; the
rest (the listening socket, logs, the usage database, the state store, the upstream pool's idle
connections) is a small, bounded number. A fixed default cap (1,024 per process) refused the 1,025th
stream on a machine allowing 20,000 descriptors, and a cap above the limit fails with ``EMFILE`` before
it applies. So, as Go's runtime and nginx's ``worker_rlimit_nofile`` do, ``interlock serve`` raises its
soft ``RLIMIT_NOFILE`` to the hard one at start, and an unset ``server.max_connections`` is derived from
the limit then in force: half of it, less ``RESERVED``, so each client connection can have its upstream
one beside it.
"""

from __future__ import annotations

import logging

log = logging.getLogger("interlock.fds")

RESERVED = 256
"""Descriptors kept out of the cap: listeners, logs, stores, the upstream pool's idle connections."""

FALLBACK_CAP = 1024
"""The cap where the limit cannot be read (no ``resource`` module)."""

UNLIMITED_CAP = 65_536
"""The cap when the soft limit is unlimited."""


def open_file_limit() -> int | None:
    """The soft ``RLIMIT_NOFILE`` (None: unknown on this platform, or unlimited)."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def raise_open_file_limit() -> None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one (child processes inherit it); never fails."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or (soft == resource.RLIM_INFINITY):
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # a hard limit the platform will not grant (macOS: OPEN_MAX)
        log.debug("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)


def default_max_connections(limit: int | None) -> int:
    """The connection cap an open-file ``limit`` allows (None: unlimited): ``(limit - RESERVED) // 2``,
    at least 64."""
    if limit is None:
        return UNLIMITED_CAP
    return max(64, (limit - RESERVED) // 2)


def max_connections(configured: int | None) -> int:
    """``configured``, or the cap this process's open-file limit allows (read now: after the raise)."""
    if configured is not None:
        return configured
    try:
        import resource  # noqa: F401
    except ImportError:
        return FALLBACK_CAP
    return default_max_connections(open_file_limit())
