"""Fixtures of the telemetry tests: real H200 captures, and tiny fake `nvidia-smi` executables on PATH."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "telemetry"


def captures() -> dict[str, str]:
    """The blocks of the H200 capture file, by their `## ` title."""
    blocks: dict[str, list[str]] = {}
    title = ""
    for line in (FIXTURES / "nvidia-smi-h200-captures.txt").read_text().splitlines():
        if line.startswith("## "):
            title = line[3:]
            blocks[title] = []
        elif title:
            blocks[title].append(line)
    return {name: "\n".join(lines) + "\n" for name, lines in blocks.items()}


def capture(prefix: str) -> str:
    """The one block whose title starts with ``prefix``."""
    found = [text for title, text in captures().items() if title.startswith(prefix)]
    assert len(found) == 1, (prefix, list(captures()))
    return found[0]


H200_LOAD_LINE = capture("--query-gpu (under load").strip()
"""All 23 fields of the capture command, under load: `0, GPU-..., NVIDIA H200, ..., [N/A], P0, Default, 0`."""


def load_as_runtime_query() -> str:
    """The load capture cut down to the columns the runtime asks for, in its order (as nvidia-smi
    would print them for that query)."""
    names = capture("nvidia-smi --query-gpu=").split("\n")[0]  # the header line of the csv block
    header = [h.split(" [")[0].strip() for h in names.split(",")]
    values = [v.strip() for v in H200_LOAD_LINE.split(",")]
    row = dict(zip(header, values, strict=True))
    from interlock.runtime.telemetry.nvidia_smi import FIELDS

    return ", ".join(row[f] for f in FIELDS) + "\n"


FakeSmi = Callable[..., Path]


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSmi:
    """``fake_smi(body)`` writes an executable `nvidia-smi` shell script into a fresh directory put first
    on PATH; it logs each call's arguments to ``<dir>/calls``. Returns the directory."""

    def make(body: str, *, name: str = "bin") -> Path:
        directory = tmp_path / name
        directory.mkdir()
        script = directory / "nvidia-smi"
        script.write_text(f'#!/bin/sh\necho "$@" >> "{directory}/calls"\n{body}\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
        return directory

    return make


def printing(text: str) -> str:
    """A script body that prints ``text`` and exits 0."""
    return f"cat <<'EOF'\n{text.rstrip()}\nEOF"
