"""The compiler's commands through ``interlock.cli.main``: exit codes 0/1/2, files, formats, output."""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from interlock.cli import COMMAND_MODULES, COMMANDS, build_parser, main
from interlock.commands.build import schemas
from tests.conftest import FIXTURES, ROOT

EXAMPLE = "config.rtx4090.yaml"
BROKEN = "tests/fixtures/providers/IL101-unknown-provider-kind.yaml"
WARNS = "tests/fixtures/usage/IL502-single-candidate.yaml"

pytestmark = pytest.mark.usefixtures("at_root")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compile_writes_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "compile", EXAMPLE, "-o", str(plan))
    assert code == 0
    assert out == ""
    data = json.loads(plan.read_text())
    assert err == f"wrote {plan} ({data['content_hash']})\n"
    code, out, _ = run(capsys, "compile", EXAMPLE)
    assert code == 0
    assert out == plan.read_text()


def test_compile_with_errors_exits_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "compile", BROKEN, "-o", str(plan))
    assert code == 1
    assert out == ""
    assert not plan.exists()
    assert "error IL101 unknown-provider-kind" in err
    assert err.endswith(f"{BROKEN}: no plan written (2 errors, 0 warnings)\n")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["compile"],
        ["lint", EXAMPLE, "--format", "xml"],
        ["frobnicate"],
        ["compile", EXAMPLE, "-o", "a", "--check", "b"],
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    capsys.readouterr()
    assert run(capsys, "compile", "missing.yaml") == (
        2,
        "",
        "interlock: configuration file `missing.yaml` does not exist\n",
    )
    assert run(capsys, "lint", "missing.yaml")[0] == 2
    assert run(capsys, "explain", "missing.yaml", "mana/fast")[0] == 2


def test_compile_does_not_create_a_missing_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "deploy" / "plans" / "plan.json"
    code, out, err = run(capsys, "compile", EXAMPLE, "-o", str(plan))
    assert (code, out) == (2, "")
    assert err == f"interlock: cannot write `{plan}`: the folder `{plan.parent}` does not exist\n"
    assert list(tmp_path.iterdir()) == []
    plan.parent.mkdir(parents=True)
    assert run(capsys, "compile", EXAMPLE, "-o", str(plan))[0] == 0
    assert json.loads(plan.read_text())["format_version"] == 1
    assert sorted(p.name for p in plan.parent.iterdir()) == ["plan.json"]


def test_explain_in_a_configuration_with_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "version: 1\nproviders:\n  g: {kind: openai, base_url: 'https://g.internal/v1', api_key_env: G}\n"
        "aliases:\n  a: {chain: [g/x, g/y], retry: 2}\n  b: {chain: g/z}\n"
    )
    code, out, err = run(capsys, "explain", str(config), "a")
    assert code == 0
    assert out.splitlines()[:3] == ["a", f"  defined at {config}:5:3", "  requires: nothing"]
    assert err == "note: the configuration has 2 errors, 0 warnings; see `interlock lint`\n"
    assert run(capsys, "explain", str(config), "b") == (
        1,
        "",
        f"alias `b` has errors: run `interlock lint {config}`\n",
    )


def test_check_fresh_stale_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    assert run(capsys, "compile", EXAMPLE, "-o", str(plan))[0] == 0
    code, _, err = run(capsys, "compile", EXAMPLE, "--check", str(plan))
    assert code == 0
    assert err.startswith(f"{plan} is up to date (sha256:")

    plan.write_text(plan.read_text().replace('"probe": false', '"probe": true'))
    code, _, err = run(capsys, "compile", EXAMPLE, "--check", str(plan))
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == f"{plan} is stale: run `interlock compile {EXAMPLE} -o {plan}`"
    assert f"--- {plan} (committed)" in lines
    assert f"+++ {plan} (compiled)" in lines
    assert '-      "probe": true,' in lines
    assert '+      "probe": false,' in lines

    missing = tmp_path / "none.json"
    code, _, err = run(capsys, "compile", EXAMPLE, "--check", str(missing))
    assert (code, err) == (1, f"{missing} does not exist: run `interlock compile {EXAMPLE} -o {missing}`\n")


def test_lint_ok_and_strict(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "lint", EXAMPLE) == (0, f"{EXAMPLE}: ok (0 errors, 0 warnings)\n", "")
    assert run(capsys, "lint", EXAMPLE, "--strict")[0] == 0
    code, out, _ = run(capsys, "lint", WARNS, "--include-root", "tests/fixtures")
    assert code == 0
    assert "warning IL502 single-candidate" in out
    assert out.endswith("0 errors, 1 warning\n")
    code, out, _ = run(capsys, "lint", WARNS, "--strict", "--include-root", "tests/fixtures")
    assert code == 1
    assert out.endswith("0 errors, 1 warning\n--strict: warnings fail the check\n")
    assert run(capsys, "lint", BROKEN)[0] == 1


def test_lint_require_env(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("GROQ_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert run(capsys, "lint", EXAMPLE)[0] == 0  # unset variables are a deploy-time matter
    code, out, _ = run(capsys, "lint", EXAMPLE, "--require-env")
    assert code == 1
    assert [line.split(": error ")[1][:18] for line in out.splitlines() if ": error " in line] == [
        "IL105 env-unset: c"
    ] * 3
    assert "credential variable `GROQ_API_KEY` of provider `groq` is not set (or empty)" in out
    monkeypatch.setenv("GROQ_API_KEY", "set")
    monkeypatch.setenv("OPENROUTER_API_KEY", "set")
    monkeypatch.setenv("GEMINI_API_KEY", "")
    code, out, _ = run(capsys, "lint", EXAMPLE, "--require-env")
    assert code == 1
    assert out.count("IL105") == 1
    assert "GEMINI_API_KEY" in out
    monkeypatch.setenv("GEMINI_API_KEY", "set")
    assert run(capsys, "lint", EXAMPLE, "--require-env", "--strict")[0] == 0
    assert run(capsys, "compile", EXAMPLE, "--require-env", "--check", "/nonexistent/plan.json")[0] == 1


def test_formats(capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion) -> None:
    code, text, _ = run(capsys, "lint", BROKEN)
    assert code == 1
    assert text.splitlines()[:4] == [
        f"{BROKEN}:4:11: error IL101 unknown-provider-kind: "
        "`providers.groq.kind` is `openia`; a provider is `anthropic`, `ollama` or `openai`",
        "  4 |     kind: openia",
        "    |           ^^^^^^ providers.groq.kind",
        "  hint: did you mean `openai`?",
    ]
    code, out, _ = run(capsys, "lint", BROKEN, "--format", "json")
    rows = json.loads(out)
    assert code == 1
    assert [row["code"] for row in rows] == ["IL101", "IL003"]
    assert rows[0] == {
        "code": "IL101",
        "name": "unknown-provider-kind",
        "severity": "error",
        "file": BROKEN,
        "line": 4,
        "col": 11,
        "end_line": 4,
        "end_col": 17,
        "path": "providers.groq.kind",
        "message": "`providers.groq.kind` is `openia`; a provider is `anthropic`, `ollama` or `openai`",
        "value": "openia",
        "hint": "did you mean `openai`?",
    }
    code, out, _ = run(capsys, "lint", BROKEN, "--format", "github")
    assert code == 1
    assert out == snapshot
    assert out.splitlines()[0].startswith(
        f"::error file={BROKEN},line=4,col=11,endColumn=17,title=IL101 unknown-provider-kind::"
    )
    assert run(capsys, "lint", EXAMPLE, "--format", "json") == (0, "[]\n", "")
    assert run(capsys, "lint", EXAMPLE, "--format", "github") == (0, "", "")


def test_explain(capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion) -> None:
    code, out, err = run(capsys, "explain", EXAMPLE, "mana/vision")
    assert (code, err) == (0, "")
    assert out == snapshot
    code, out, err = run(capsys, "explain", "tests/fixtures/determinism/main.yaml", "mana/tools")
    assert (code, err) == (0, "")
    assert out == snapshot
    assert run(capsys, "explain", EXAMPLE, "mana/visoin") == (
        2,
        "",
        f"alias `mana/visoin` is not declared in {EXAMPLE}; did you mean `mana/vision`?\n",
    )


def test_committed_schemas_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    for filename, text in schemas().items():
        assert (ROOT / "schema" / filename).read_text() == text, "run `interlock schema -o schema/`"
    assert run(capsys, "schema", "--check") == (0, "", "")


def test_schema_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "schema"
    assert run(capsys, "schema", "--check", "-o", str(folder))[0] == 1
    code, _, _err = run(capsys, "schema", "-o", str(folder))
    assert code == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.schema.json",
        "plan.schema.json",
    ]
    assert run(capsys, "schema", "--check", "-o", str(folder)) == (0, "", "")
    (folder / "plan.schema.json").write_text("{}\n")
    assert run(capsys, "schema", "--check", "-o", str(folder)) == (
        1,
        "",
        f"{folder / 'plan.schema.json'} is stale: run `interlock schema -o {folder}`\n",
    )


def test_config_schema_accepts_the_example() -> None:
    import jsonschema

    from interlock.compiler.diagnostics import DiagnosticSink
    from interlock.compiler.loader import parse_document

    schema = json.loads((ROOT / "schema" / "config.schema.json").read_text())
    for path in (ROOT / EXAMPLE, ROOT / "aliases" / "mana.yaml", *FIXTURES.glob("determinism/*.yaml")):
        data = parse_document(str(path), path.read_text(), DiagnosticSink()).data
        jsonschema.validate(data, schema)


def test_relative_includes_and_profiles_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(FIXTURES / "determinism", tmp_path / "cfg")
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "lint", "cfg/main.yaml")[0] == 0
    monkeypatch.chdir(ROOT / "tests")
    assert run(capsys, "lint", str(tmp_path / "cfg" / "main.yaml"))[0] == 0


def test_explain_and_capabilities_name_every_nesting_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "version: 1\nproviders:\n  g: {kind: openai, base_url: 'https://g.internal/v1', api_key_env: G}\n"
        "aliases:\n"
        "  inner: {chain: [g/x, g/y]}\n"
        "  middle: {chain: [g/z, inner]}\n"
        "  outer:\n    requires: [tools]\n    chain: [g/w, middle]\n"
    )
    code, out, _ = run(capsys, "lint", str(config), "--format", "json")
    assert code == 0
    assert [(d["path"], d["message"]) for d in json.loads(out) if d["code"] == "IL309"] == [
        (
            f"aliases.outer.chain[{i}]",
            f"`{candidate}`{via} in `outer` has no known capabilities; `outer` requires tools",
        )
        for i, candidate, via in (
            (0, "g/w", ""),
            (1, "g/x", " (via `middle` -> `inner`)"),
            (1, "g/y", " (via `middle` -> `inner`)"),
            (1, "g/z", " (via `middle`)"),
        )
    ]
    code, out, _ = run(capsys, "explain", str(config), "outer")
    assert code == 0
    via_inner = f"written at {config}:5 in inner, reached via middle ({config}:6) <- outer ({config}:9)"
    assert [line.strip() for line in out.splitlines() if "written at" in line] == [
        f"written at {config}:9 in outer",
        f"written at {config}:6 in middle, reached via outer ({config}:9)",
        via_inner,
        via_inner,
    ]


def test_every_subcommand_is_in_the_command_table() -> None:
    """``COMMANDS`` names, for each subcommand, the module that registers it (and no other)."""
    registered: dict[str, str] = {}
    assert COMMAND_MODULES  # an empty table would let the loop below prove nothing
    for module in COMMAND_MODULES:
        parser = argparse.ArgumentParser()
        subparsers = parser.add_subparsers()
        importlib.import_module(module).register(subparsers)
        registered.update(dict.fromkeys(subparsers.choices, module))
    assert registered == dict(COMMANDS)
    assert list(build_parser()._subparsers._group_actions[0].choices) == list(COMMANDS)  # type: ignore[union-attr]


def test_one_command_parses_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """A known first argument builds only its module's parser; anything else gets them all."""
    args = build_parser("serve").parse_args(["serve", "plan.json", "--port", "0"])
    assert (args.command, args.plan, args.port) == ("serve", "plan.json", 0)
    with pytest.raises(SystemExit) as exited:
        main(["serv", "plan.json"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'serv'" in err
    assert all(command in err for command in COMMANDS)  # the whole table was built to say so
