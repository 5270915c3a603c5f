"""`--format json`: every stream a command writes is machine-readable, and no text line is mixed in.

``compile`` writes the diagnostics array on stderr (its stdout may be the plan); ``lint`` on stdout;
``diff`` its change list on stdout, and the errors of inputs it cannot read as one array on stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.cli import main
from tests.commands.test_cli import BROKEN, EXAMPLE, WARNS

pytestmark = pytest.mark.usefixtures("at_root")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_compile_with_errors_prints_only_the_diagnostics(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compile", BROKEN)
    assert (code, out) == (1, "")
    assert [row["code"] for row in json.loads(err)] == ["IL101", "IL003"]  # no "no plan written" line


def test_compile_to_stdout_keeps_both_streams_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "compile", WARNS, "--include-root", "tests/fixtures")
    assert code == 0
    assert json.loads(out)["format_version"] == 1
    assert [row["code"] for row in json.loads(err)] == ["IL502"]


def test_compile_to_a_file_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    assert run(capsys, "compile", EXAMPLE, "-o", str(plan)) == (0, "", "[]\n")  # no "wrote ..." line
    assert run(capsys, "compile", EXAMPLE, "--check", str(plan)) == (0, "", "[]\n")
    plan.write_text("{}\n")
    assert run(capsys, "compile", EXAMPLE, "--check", str(plan)) == (1, "", "[]\n")  # stale: no diff text


def test_lint_prints_the_array_on_stdout_and_nothing_else(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "lint", WARNS, "--strict", "--include-root", "tests/fixtures")
    assert (code, err) == (1, "")
    assert [row["severity"] for row in json.loads(out)] == ["warning"]  # no "--strict: ..." line


def test_a_real_process_keeps_the_streams_apart() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "interlock", "compile", BROKEN, "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert json.loads(done.stderr)[0]["code"] == "IL101"


def test_diff_reports_input_errors_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "diff", "nowhere.yaml", BROKEN)
    assert (code, out) == (1, "")
    errors = json.loads(err)
    assert errors[0] == {"input": "nowhere.yaml", "error": "nowhere.yaml: file does not exist"}
    assert errors[1]["input"] == BROKEN
    assert errors[1]["error"].startswith(f"{BROKEN} does not compile:\n")
