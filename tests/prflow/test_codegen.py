"""`interlock codegen`: consumer constants in TypeScript and Python, and `--check` for staleness."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from interlock.cli import main
from interlock.codegen import CodegenError, constant_name, generate, key_for, type_name
from interlock.diff.inputs import load_plan

from .tree import ConfigTree

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ConfigTree:
    monkeypatch.chdir(tmp_path)
    return ConfigTree.copy(tmp_path / "gw").save()


@pytest.mark.parametrize("lang", ["ts", "python"])
def test_the_shipped_example(lang: str, monkeypatch: pytest.MonkeyPatch, snapshot) -> None:
    monkeypatch.chdir(ROOT)
    assert generate(load_plan("config.rtx4090.yaml").plan, lang) == snapshot


def test_typescript_names_every_alias_with_its_description(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = generate(load_plan("config.rtx4090.yaml").plan, "ts")
    assert "export const MANA_LLM = {\n" in text
    assert "\t/** Short answers, classification, single-shot Q&A */\n\tFAST_TEXT: 'mana/fast-text',\n" in text
    assert "} as const;\n" in text
    assert "export type ManaLlmAlias = (typeof MANA_LLM)[keyof typeof MANA_LLM];\n" in text


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_module_imports_and_holds_the_aliases(tree: ConfigTree, tmp_path: Path) -> None:
    tree.aliases["acme/chat"]["description"] = 'Says """quoted""" with a \\ backslash, ends "quoted"'
    tree.save()
    out = tmp_path / "acme_llm.py"
    out.write_text(generate(load_plan(tree.path).plan, "python"), encoding="utf-8")
    module = _import(out, "acme_llm_generated")
    constants = {key: value for key, value in vars(module.ACME_LLM).items() if key.isupper()}
    assert constants == {
        "AGENT": "acme/agent",
        "BATCH": "acme/batch",
        "CHAT": "acme/chat",
        "VISION": "acme/vision",
    }
    assert module.__all__ == ["ACME_LLM", "AcmeLlmAlias"]
    assert module.AcmeLlmAlias.__args__ == ("acme/agent", "acme/batch", "acme/chat", "acme/vision")
    assert module.ACME_LLM.CHAT == "acme/chat"
    assert (
        '    """Says \\"\\"\\"quoted\\"\\"\\" with a \\\\ backslash, ends "quoted\\""""\n' in out.read_text()
    )


def test_generated_python_passes_mypy_strict(tree: ConfigTree, tmp_path: Path) -> None:
    from mypy import api

    out = tmp_path / "acme_llm.py"
    out.write_text(generate(load_plan(tree.path).plan, "python"), encoding="utf-8")
    use = tmp_path / "use.py"
    use.write_text(
        "from typing import assert_type, Literal\n"
        "from acme_llm import ACME_LLM, AcmeLlmAlias\n"
        "model: AcmeLlmAlias = ACME_LLM.CHAT\n"
        'assert_type(ACME_LLM.VISION, Literal["acme/vision"])\n',
        encoding="utf-8",
    )
    stdout, stderr, status = api.run(
        ["--strict", "--cache-dir", str(tmp_path / "cache"), "--python-version", "3.11", str(out), str(use)]
    )
    assert (status, stdout.splitlines()[-1:], stderr) == (
        0,
        ["Success: no issues found in 2 source files"],
        "",
    )


def test_typescript_escapes_comments_and_quotes(tree: ConfigTree) -> None:
    tree.aliases["acme/chat"]["description"] = "Ends a comment */ early"
    tree.aliases["acme/o'brien"] = {"chain": ["groq/llama-3.1-8b-instant", "openrouter/openai/gpt-4o"]}
    tree.save()
    text = generate(load_plan(tree.path).plan, "ts")
    assert "\t/** Ends a comment *\\/ early */\n\tCHAT: 'acme/chat',\n" in text
    assert "\tO_BRIEN: 'acme/o\\'brien',\n" in text


def test_long_descriptions_are_wrapped(tree: ConfigTree) -> None:
    tree.aliases["acme/chat"]["description"] = " ".join(["word"] * 40)
    tree.save()
    text = generate(load_plan(tree.path).plan, "python")
    assert max(len(line) for line in text.splitlines()) <= 88
    assert '    """word word' in text


def test_guaranteed_capabilities_are_documented(tree: ConfigTree) -> None:
    text = generate(load_plan(tree.path).plan, "ts")
    assert (
        "\t/**\n\t * Images and text\n\t *\n\t * Guarantees: vision.\n\t */\n\tVISION: 'acme/vision',\n"
        in text
    )


def test_a_config_and_its_plan_generate_the_same_bytes(tree: ConfigTree) -> None:
    assert main(["compile", tree.path, "-o", "plan.json"]) == 0
    for lang in ("ts", "python"):
        assert generate(load_plan("plan.json").plan, lang) == generate(load_plan(tree.path).plan, lang)


@pytest.mark.parametrize(
    ("namespace", "alias", "constant", "key"),
    [
        ("mana/", "mana/fast-text", "MANA_LLM", "FAST_TEXT"),
        ("acme-ai/", "acme-ai/long.form", "ACME_AI_LLM", "LONG_FORM"),
        (None, "mana/fast-text", "LLM", "MANA_FAST_TEXT"),
        ("x/", "x/3d-vision", "X_LLM", "_3D_VISION"),
    ],
)
def test_names(namespace: str | None, alias: str, constant: str, key: str) -> None:
    assert (constant_name(namespace), key_for(alias, namespace)) == (constant, key)


def test_type_name() -> None:
    assert type_name("MANA_LLM") == "ManaLlmAlias"


def test_without_a_namespace_and_with_a_name_override(tree: ConfigTree) -> None:
    tree.config["server"]["alias_namespace"] = None
    tree.save()
    plan = load_plan(tree.path).plan
    assert "export const LLM = {\n" in generate(plan, "ts")
    assert "\tACME_CHAT: 'acme/chat',\n" in generate(plan, "ts")
    assert "class MODELS:\n" in generate(plan, "python", "MODELS")


def test_two_aliases_with_the_same_key_are_refused(tree: ConfigTree) -> None:
    tree.aliases["acme/chat_"] = {"chain": ["groq/llama-3.1-8b-instant", "openrouter/openai/gpt-4o"]}
    tree.save()
    with pytest.raises(
        CodegenError, match=r"^aliases `acme/chat` and `acme/chat_` both become `ACME_LLM.CHAT`; rename one$"
    ):
        generate(load_plan(tree.path).plan, "ts")


def test_check_passes_when_current_and_fails_when_stale(tree: ConfigTree, capsys) -> None:
    assert main(["codegen", tree.path, "--lang", "ts", "-o", "llm.ts"]) == 0
    assert capsys.readouterr().err == "wrote llm.ts (4 aliases)\n"
    assert main(["codegen", tree.path, "--lang", "ts", "--check", "llm.ts"]) == 0
    assert capsys.readouterr().err == "llm.ts is up to date\n"
    tree.aliases["acme/vision"]["description"] = "Pictures"
    tree.save()
    assert main(["codegen", tree.path, "--lang", "ts", "--check", "llm.ts"]) == 1
    assert (
        capsys.readouterr().err
        == f"llm.ts is stale: run `interlock codegen {tree.path} --lang ts -o llm.ts`\n"
    )
    assert main(["codegen", tree.path, "--lang", "python", "--name", "LLM", "--check", "missing.py"]) == 1
    fix = f"interlock codegen {tree.path} --lang python --name LLM -o missing.py"
    assert capsys.readouterr().err == f"missing.py does not exist: run `{fix}`\n"


def test_output_creates_its_folder(tree: ConfigTree, capsys) -> None:
    assert main(["codegen", tree.path, "--lang", "ts", "-o", "web/src/lib/llm.ts"]) == 0
    assert capsys.readouterr().err == "wrote web/src/lib/llm.ts (4 aliases)\n"
    assert Path("web/src/lib/llm.ts").read_text(encoding="utf-8") == generate(load_plan(tree.path).plan, "ts")


def test_routing_changes_do_not_make_the_constants_stale(tree: ConfigTree, capsys) -> None:
    assert main(["codegen", tree.path, "--lang", "python", "-o", "llm.py"]) == 0
    chain = tree.aliases["acme/chat"]["chain"]
    chain[0], chain[1] = chain[1], chain[0]
    tree.save()
    assert main(["codegen", tree.path, "--lang", "python", "--check", "llm.py"]) == 0


def test_stdout_and_errors(tree: ConfigTree, capsys) -> None:
    assert main(["codegen", tree.path, "--lang", "python"]) == 0
    assert capsys.readouterr().out.startswith('"""LLM model aliases served by the interlock gateway.\n')
    assert main(["codegen", "nope.yaml", "--lang", "ts"]) == 1
    assert capsys.readouterr().err == "error: nope.yaml: file does not exist\n"
    with pytest.raises(SystemExit) as exc:
        main(["codegen", tree.path, "--lang", "ts", "--name", "not-valid"])
    assert exc.value.code == 2
    assert "--name: `not-valid` is not an identifier (letters, digits, `_`)" in capsys.readouterr().err


def test_the_generated_python_is_clean_for_ruff(tree: ConfigTree, tmp_path: Path) -> None:
    import subprocess

    out = tmp_path / "acme_llm.py"
    out.write_text(generate(load_plan(tree.path).plan, "python"), encoding="utf-8")
    ruff = Path(sys.executable).parent / "ruff"
    for args in (["check", "--isolated", "--select", "E,F,W,I,UP,B"], ["format", "--isolated", "--check"]):
        done = subprocess.run([str(ruff), *args, str(out)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
