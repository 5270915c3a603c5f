"""The example CI workflow is valid YAML and every `interlock` command in it parses with today's CLI."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ruamel.yaml import YAML

from interlock.cli import build_parser

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "github-workflow.yml"


def _commands() -> list[list[str]]:
    data = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    scripts = [step["run"] for job in data["jobs"].values() for step in job["steps"] if "run" in step]
    commands = []
    for script in scripts:
        joined = re.sub(r"\\\n\s*", " ", script)
        for line in joined.splitlines():
            line = re.sub(r"\$\{\{[^}]*\}\}", "main", line.strip())
            if line.startswith("interlock "):
                argv = shlex.split(line, comments=True)
                commands.append(argv[1 : argv.index(">")] if ">" in argv else argv[1:])
    return commands


def test_every_interlock_command_parses() -> None:
    commands = _commands()
    assert [argv[0] for argv in commands] == ["compile", "lint", "codegen", "codegen", "diff"]
    parser = build_parser()
    for argv in commands:
        parser.parse_args(argv)  # exits (and fails the test) on an unknown option


def test_the_diff_posts_markdown_against_the_target_branch() -> None:
    diff = next(argv for argv in _commands() if argv[0] == "diff")
    args = build_parser().parse_args(diff)
    assert (args.base_ref, args.format, args.fail_on) == ("origin/main", "markdown", "breaking")
    assert "<!-- interlock-diff -->" in WORKFLOW.read_text(encoding="utf-8")
