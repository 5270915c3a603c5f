"""Writing the files the commands produce (plans, schemas, generated code), and reading them back for
`--check`.

An output path comes from a command line that may run in CI with a checkout someone else wrote, so the
target is checked before anything is written: only a regular file (or nothing) is replaced, a symbolic
link is refused rather than followed or replaced (writing through it would let a committed link aim the
plan at any file the job can write), and a missing folder is an error, never created unasked.

Exception tree::

    OutputError           the target cannot be written (or checked); ``str(error)`` says why, ready to print
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import sys

from interlock.compiler.reading import file_kind, source_problem


class OutputError(Exception):
    """An output path that is refused or cannot be written."""


def write_atomically(path: str, text: str, *, make_folders: bool = False) -> None:
    """Replace the regular file at ``path`` (or create it) atomically: readers (a runtime reloading the
    plan) never see half a file. Raises ``OutputError``; a failed write leaves no temporary file.

    ``make_folders``: create missing folders first (codegen writes into a consumer's source tree).
    """
    if make_folders and os.path.dirname(path):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create the folder of `{path}`: {exc.strerror or exc}") from exc
    _check_target(path)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    try:
        # O_EXCL: never through a link or onto a file someone placed there; 0o666 less the umask
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise OutputError(f"cannot write `{path}`: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"cannot write `{path}`: {exc.strerror or exc}") from exc
    except BaseException:
        _remove(tmp)
        raise


def written(path: str, text: str, prog: str = "interlock", *, make_folders: bool = False) -> bool:
    """``write_atomically`` for a command's ``-o``: False when refused, the reason printed on stderr as
    ``prog: reason`` (the command chooses its exit code)."""
    try:
        write_atomically(path, text, make_folders=make_folders)
    except OutputError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return False
    return True


def read_committed(path: str) -> str | None:
    """The text of a file a `--check` compares against (a committed plan, generated code, a schema);
    None when it does not exist. Raises ``OutputError`` for anything but a regular file (a FIFO would
    block the read) or text that cannot be read."""
    problem = source_problem(path)
    if problem is not None:
        if problem.missing:
            return None
        raise OutputError(f"cannot check `{path}`: it {problem.problem}")
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise OutputError(f"cannot check `{path}`: {getattr(exc, 'strerror', None) or exc}") from exc


def _check_target(path: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        folder = os.path.dirname(path)
        if folder and not os.path.isdir(folder):
            raise OutputError(f"cannot write `{path}`: the folder `{folder}` does not exist") from None
        return
    except OSError as exc:
        raise OutputError(f"cannot write `{path}`: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(mode):
        raise OutputError(
            f"refusing to write `{path}`: it is a symbolic link; name the file it points to instead"
        )
    kind = file_kind(mode)
    if kind is not None:
        raise OutputError(f"refusing to write `{path}`: it is {kind}, not a regular file")


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
