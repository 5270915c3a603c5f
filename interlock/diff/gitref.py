"""Read files as they were at a git revision, so a configuration compiles exactly as it was committed.

This is the boundary to git: it runs the ``git`` executable and turns its failures into ``GitRefError``
(an unknown ref, a path outside any repository) or into ``None`` (the file did not exist at that ref),
which is what the loader's ``Reader`` contract expects.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import PurePath

from interlock.compiler.reading import MAX_FILE_BYTES, SourceUnreadable


class GitRefError(Exception):
    """A git ref that cannot be read: not a repository, an unknown ref, or git is missing."""


@dataclass(frozen=True)
class GitReader:
    """A ``Reader`` over one commit: ``reader(path)`` is the file's text at that commit, or None."""

    root: str  # the repository's top-level folder, symlinks resolved
    commit: str  # the full commit id the ref named when the reader was made
    ref: str  # the ref as the user wrote it, for labels
    max_bytes: int = MAX_FILE_BYTES  # as `reading.FileReader`: a committed file may be huge too

    def __call__(self, path: str) -> str | None:
        relative = os.path.relpath(os.path.realpath(path), self.root)
        if relative == ".." or relative.startswith(".." + os.sep):
            return None  # outside the repository: it has no version at any ref
        spec = f"{self.commit}:{PurePath(relative).as_posix()}"
        size = _git(self.root, "cat-file", "-s", spec)
        if size.returncode != 0:
            return None
        if int(size.stdout) > self.max_bytes:
            raise SourceUnreadable(
                f"is larger than {self.max_bytes:,} bytes at {self.ref}",
                "a configuration file is far smaller; to allow larger ones, pass `--max-file-bytes`",
            )
        # `cat-file blob` is `git show REF:path` for files, but refuses folders and runs no textconv.
        done = _git(self.root, "cat-file", "blob", spec)
        if done.returncode != 0:
            return None
        # As `reading.FileReader`: bytes that are not UTF-8 become lone surrogates, which the loader reports.
        return done.stdout.decode("utf-8", errors="surrogateescape")


def git_reader(ref: str, near: str) -> GitReader:
    """A reader for ``ref`` in the repository that holds the path ``near``."""
    folder = os.path.dirname(os.path.realpath(near)) or "."
    while not os.path.isdir(folder):  # the file may exist only at the ref; start from a folder that exists
        folder = os.path.dirname(folder)
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise GitRefError(f"`{near}` is not inside a git repository, so `{ref}` cannot be read")
    root = os.path.realpath(top.stdout.decode("utf-8").strip())
    commit = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if commit.returncode != 0:
        raise GitRefError(
            f"`{ref}` is not a commit in {root}; in CI, fetch the base branch first "
            "(`actions/checkout` with `fetch-depth: 0`)"
        )
    return GitReader(root, commit.stdout.decode("ascii").strip(), ref)


def _git(cwd: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise GitRefError("the `git` executable was not found on PATH") from exc
