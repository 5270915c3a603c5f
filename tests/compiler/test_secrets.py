"""Credential values never appear in a plan, a diagnostic (any format) or a source excerpt."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.cli import main
from interlock.commands.build import plan_text
from interlock.compiler import CompileOptions, compile_config
from interlock.compiler.diagnostics import DiagnosticSink
from interlock.compiler.loader import parse_document
from interlock.compiler.report import FORMATS, render

SECRETS = (
    "sk-proj-InlineSecret0123456789abcdef",
    "gsk_PastedIntoEnvName0123456789ABCDEF",
    "hunter2-url-password",
    "QueryToken0123456789",
    "TypoKeySecretValue42",
    "sk-ant-InAChain0123456789abcdef",
    "Bearer-less-token-value-77",
)

LEAKY = f"""version: 1
server: {{token: {SECRETS[6]}}}
providers:
  groq:
    kind: openai
    base_url: https://api.groq.com/openai/v1
    api_key: {SECRETS[0]}
  openrouter: {{kind: openai, base_url: "https://openrouter.ai/api/v1", api_key_env: {SECRETS[1]}}}
  mirror:
    kind: openai
    base_url: https://admin:{SECRETS[2]}@mirror.example/v1
    api_key_env: MIRROR_KEY
  proxy: {{kind: openai, base_url: "https://proxy.example/v1?api_key={SECRETS[3]}", api_key_env: PROXY_KEY}}
  typo: {{kind: openai, base_url: "https://typo.example/v1", apikey: {SECRETS[4]}, api_key_env: TYPO_KEY}}
aliases:
  fast: {{chain: [groq/llama-3.1-8b-instant, openrouter/openai/gpt-4o-mini, {SECRETS[5]}]}}
"""


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text
    for fragment in ("InlineSecret", "PastedIntoEnv", "hunter2", "QueryToken", "TypoKeySecret", "InAChain"):
        assert fragment not in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_secret_in_any_diagnostic_format(tmp_path: Path, fmt: str) -> None:
    config = tmp_path / "leaky.yaml"
    config.write_text(LEAKY)
    ctx = compile_config(str(config), CompileOptions(environ={}))
    codes = sorted(d.code for d in ctx.sink.items)
    assert codes.count("IL103") == 6
    assert codes.count("IL104") == 1
    text = render(ctx.sink.items, fmt, ctx.sources)
    assert text
    assert_clean(text)
    assert "***" in text or fmt != "text"


def test_source_excerpts_mask_the_secret_but_keep_the_key(tmp_path: Path) -> None:
    config = tmp_path / "leaky.yaml"
    config.write_text(LEAKY)
    ctx = compile_config(str(config), CompileOptions(environ={}))
    text = render(ctx.sink.items, "text", ctx.sources)
    assert "    api_key: ***" in text
    assert "base_url: ***" in text
    assert "api_key_env: ***}" in text


def test_lint_command_output_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "leaky.yaml"
    config.write_text(LEAKY)
    for fmt in FORMATS:
        assert main(["lint", str(config), "--format", fmt]) == 1
        out, err = capsys.readouterr()
        assert_clean(out + err)
    assert main(["compile", str(config), "-o", str(tmp_path / "plan.json")]) == 1
    out, err = capsys.readouterr()
    assert_clean(out + err)
    assert not (tmp_path / "plan.json").exists()


def test_the_plan_holds_variable_names_only(tmp_path: Path) -> None:
    config = tmp_path / "ok.yaml"
    config.write_text(
        """version: 1
providers:
  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}
  openrouter: {kind: openai, base_url: "https://openrouter.ai/api/v1", api_key_env: OPENROUTER_API_KEY}
aliases:
  fast: {chain: [groq/llama-3.1-8b-instant, openrouter/openai/gpt-4o-mini]}
"""
    )
    environ = {"GROQ_API_KEY": SECRETS[0], "OPENROUTER_API_KEY": SECRETS[1]}
    ctx = compile_config(str(config), CompileOptions(require_env=True, environ=environ))
    assert ctx.plan is not None
    assert ctx.sink.items == []
    text = plan_text(ctx.plan)
    assert_clean(text)
    assert '"api_key_env": "GROQ_API_KEY"' in text


def test_a_key_shaped_env_name_is_refused_not_echoed(tmp_path: Path) -> None:
    # `gsk_...` is a valid identifier, so only its shape gives it away; it must not reach the plan.
    config = tmp_path / "pasted.yaml"
    config.write_text(
        f"""version: 1
providers:
  groq: {{kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: {SECRETS[1]}}}
  openrouter: {{kind: openai, base_url: "https://openrouter.ai/api/v1", api_key_env: OPENROUTER_API_KEY}}
aliases:
  fast: {{chain: [groq/llama-3.1-8b-instant, openrouter/openai/gpt-4o-mini]}}
"""
    )
    ctx = compile_config(str(config), CompileOptions(environ={}))
    assert ctx.plan is None
    assert [d.code for d in ctx.sink.items] == ["IL104"]
    assert_clean(render(ctx.sink.items, "json", ctx.sources))


def test_a_yaml_syntax_error_on_a_secret_line_is_masked(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text(f"version: 1\nproviders:\n  groq: {{api_key: {SECRETS[0]}\n")
    ctx = compile_config(str(config), CompileOptions(environ={}))
    assert [d.code for d in ctx.sink.items] == ["IL001"]
    for fmt in FORMATS:
        assert_clean(render(ctx.sink.items, fmt, ctx.sources))


def test_a_secret_written_over_several_lines_is_masked_on_each_of_them() -> None:
    text = "a:\n  token: >-\n    FirstHalfOfTheSecret\n    SecondHalfOfTheSecret\n  next: 1\n"
    doc = parse_document("t.yaml", text, DiagnosticSink())
    doc.mark_secret(("a", "token"))
    doc.mark_secret(("a", "token"))  # marking twice changes nothing
    shown = [doc.excerpt(number, 1, 2) for number in range(1, 7)]
    assert [None if s is None else s[0] for s in shown] == [
        "a:",
        "  token: ***",
        "***",
        "***",
        "  next: 1",
        None,
    ]


EXPLAINED = f"""version: 1
providers:
  mirror:
    kind: openai
    base_url: https://admin:{SECRETS[2]}@mirror.example/v1
    api_key_env: MIRROR_KEY
  proxy: {{kind: openai, base_url: "https://proxy.example/v1?key={SECRETS[3]}", api_key_env: PROXY_KEY}}
  pasted: {{kind: openai, base_url: "https://pasted.example/v1", api_key_env: {SECRETS[1]}}}
aliases:
  fast:
    description: "the fast one"
    chain: [mirror/a, proxy/b, pasted/c]
"""


def test_explain_masks_what_lint_masks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "explained.yaml"
    config.write_text(EXPLAINED)
    assert main(["explain", str(config), "fast"]) == 0
    out, err = capsys.readouterr()
    assert_clean(out + err)
    assert "https://***@mirror.example/v1" in out
    assert "https://proxy.example/v1?key=***" in out
    assert "key from $***" in out
    for fmt in FORMATS:  # and lint, on the same file, says why
        assert main(["lint", str(config), "--format", fmt]) == 1
        out, err = capsys.readouterr()
        assert_clean(out + err)


def test_a_key_shaped_mapping_key_is_masked_in_every_key_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "keyed.yaml"
    config.write_text(
        "version: 1\nproviders:\n"
        '  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}\n'
        "aliases:\n"
        f"  {SECRETS[0]}: {{chain: [groq/a, groq/b]}}\n"
        f"  fast: {{chain: [groq/a, groq/b], {SECRETS[5]}: 1}}\n"
    )
    for fmt in FORMATS:
        assert main(["lint", str(config), "--format", fmt]) == 1
        out, err = capsys.readouterr()
        assert_clean(out + err)
        assert "IL103" in out
    ctx = compile_config(str(config), CompileOptions(environ={}))
    assert sorted((d.code, d.path) for d in ctx.sink.items) == [
        ("IL103", "aliases.***"),
        ("IL103", "aliases.fast.***"),
    ]
    assert ctx.plan is None


def test_a_description_holding_a_key_is_flagged_and_never_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "described.yaml"
    config.write_text(
        "version: 1\nproviders:\n"
        '  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}\n'
        "aliases:\n"
        f"  fast: {{chain: [groq/a, groq/b], description: 'fast; key {SECRETS[0]} works'}}\n"
        f"  slow: {{chain: [groq/c, groq/d], description: 'via https://bot:{SECRETS[2]}@mirror.example'}}\n"
        "  prose: {chain: [groq/e, groq/f], description: 'max token: 4k; password: see the wiki'}\n"
    )
    ctx = compile_config(str(config), CompileOptions(environ={}))
    assert [(d.code, d.path) for d in ctx.sink.sorted()] == [
        ("IL103", "aliases.fast.description"),
        ("IL103", "aliases.slow.description"),
    ]
    for fmt in FORMATS:
        assert_clean(render(ctx.sink.items, fmt, ctx.sources))
    assert main(["explain", str(config), "fast"]) == 0
    out, err = capsys.readouterr()
    assert_clean(out + err)
    assert main(["codegen", str(config), "--lang", "ts"]) == 1
    out, err = capsys.readouterr()
    assert_clean(out + err)
