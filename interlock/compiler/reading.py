"""Reading source files within bounds: regular files only, a size cap, inside the allowed folders.

This is the compiler's border with the file system. `interlock lint` runs in pull-request CI on YAML
written by whoever opens the pull request, so nothing a configuration names is trusted: an include or a
profile path may name a FIFO (opening it would block), a device (`/dev/zero` never ends), a file outside
the repository (`/etc/shadow`), a symlink loop or a file the kernel refuses to read. Every such case
becomes a ``SourceUnreadable`` here, which the loader reports as a diagnostic; no ``OSError`` passes.

Exception tree::

    SourceUnreadable      a path that exists but is not a readable regular file within the size cap
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

MAX_FILE_BYTES = 16 * 1024 * 1024
"""The default cap on one source file; a configuration of 10,000 aliases is about 1 MiB."""


class SourceUnreadable(Exception):
    """A source that exists but cannot be compiled as a file: ``problem`` completes "`path` ..."."""

    def __init__(self, problem: str, hint: str, *, missing: bool = False) -> None:
        super().__init__(problem)
        self.problem, self.hint, self.missing = problem, hint, missing


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str | None:
    """What a non-regular file is ("a directory", "a FIFO (named pipe)"...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def source_problem(path: str) -> SourceUnreadable | None:
    """Why ``path`` cannot be read as a source file (without opening it), or None when it can.

    A missing file is a problem too here: this is for paths a person typed (the main configuration).
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return _os_problem(exc)
    except ValueError:
        return SourceUnreadable("is not a valid path", "a path may not contain NUL characters")
    kind = file_kind(mode)
    return None if kind is None else _not_regular(kind)


@dataclass(frozen=True)
class FileReader:
    """The working tree as a ``Reader``: a file's text, None when it does not exist.

    Raises ``SourceUnreadable`` for anything else: not a regular file, larger than ``max_bytes``, or
    refused by the system. The file is checked with ``stat`` before it is opened and opened without
    blocking, so a FIFO is never waited on; bytes that are not UTF-8 become lone surrogates
    (``surrogateescape``), which the loader reports with their line and column.
    """

    max_bytes: int = MAX_FILE_BYTES

    def __call__(self, path: str) -> str | None:
        try:
            mode = os.stat(path).st_mode
            kind = file_kind(mode)
            if kind is not None:
                raise _not_regular(kind)
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            try:
                kind = file_kind(os.fstat(fd).st_mode)  # replaced between stat and open
                if kind is not None:
                    raise _not_regular(kind)
                data = _read_capped(fd, self.max_bytes)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _os_problem(exc) from exc
        except ValueError as exc:  # a NUL byte in the path
            raise SourceUnreadable("is not a valid path", "a path may not contain NUL characters") from exc
        if data is None:
            raise SourceUnreadable(
                f"is larger than {self.max_bytes:,} bytes",
                "a configuration file is far smaller; to allow larger ones, pass `--max-file-bytes`",
            )
        return data.decode("utf-8", errors="surrogateescape")


read_file = FileReader()
"""The default reader (16 MiB a file)."""


def _read_capped(fd: int, limit: int) -> bytes | None:
    """Up to ``limit`` bytes, or None when there are more (a file that grows, or lies about its size)."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return None if left <= 0 else b"".join(chunks)


def _not_regular(kind: str) -> SourceUnreadable:
    return SourceUnreadable(
        f"is {kind}, not a regular file", "configuration files and profiles must be regular files"
    )


def _os_problem(exc: OSError) -> SourceUnreadable:
    if exc.errno == errno.ENOENT:
        return SourceUnreadable("does not exist", "check the path", missing=True)
    if exc.errno == errno.ELOOP:
        return SourceUnreadable("is a symbolic link loop", "a symbolic link must end at a regular file")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return SourceUnreadable("cannot be read: permission denied", "check the file's permissions")
    reason = exc.strerror or type(exc).__name__
    return SourceUnreadable(f"cannot be read: {reason}", "configuration files must be regular files")


def within(path: str, roots: tuple[str, ...]) -> bool:
    """Whether ``path`` (symlinks resolved) lies inside one of ``roots`` (already resolved)."""
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)
