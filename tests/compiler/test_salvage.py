"""Fail fast, all at once: a shape error in one key does not hide the entry's other problems."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interlock.compiler import CompileContext
from tests.conftest import compile_text


def lint(tmp_path: Path, text: str, **options: Any) -> CompileContext:
    return compile_text(tmp_path, "version: 1\n" + text, **options)


def codes(ctx: CompileContext) -> list[str]:
    return [d.code for d in ctx.sink.sorted()]


def test_unknown_kind_is_reported_even_when_the_entry_has_an_unknown_key(tmp_path: Path) -> None:
    ctx = lint(
        tmp_path,
        "providers:\n  groq: {kind: openia, base_url: 'https://g.internal/v1', api_key_env: G, retries: 3}\n"
        "aliases:\n  a: {chain: [groq/x, groq/y]}\n",
    )
    assert codes(ctx) == ["IL101", "IL003"]
    assert ctx.sink.sorted()[0].hint == "did you mean `openai`?"


def test_a_misspelt_key_does_not_also_report_the_key_as_missing(tmp_path: Path) -> None:
    ctx = lint(
        tmp_path,
        "providers:\n  groq: {kind: openai, base_ulr: 'https://g.internal/v1', api_key_evn: G}\n"
        "aliases:\n  a: {chain: [groq/x, groq/y]}\n",
    )
    assert codes(ctx) == ["IL003", "IL003"]  # no IL102 missing-base-url, no IL108 no-credential
    assert [d.hint for d in ctx.sink.sorted()] == ["did you mean `base_url`?", "did you mean `api_key_env`?"]


def test_health_problems_are_independent(tmp_path: Path) -> None:
    ctx = lint(
        tmp_path, "health: {probe_interval: 3s, probe_timeout: 5s, open_for: 10x, failure_threshold: 0}\n"
    )
    assert codes(ctx) == ["IL401", "IL008", "IL402"]
    # ...but a comparison with a value that failed is not made against its default instead.
    ctx = lint(tmp_path, "health: {probe_interval: 3 sec, probe_timeout: 40s}\n")
    assert codes(ctx) == ["IL008"]


def test_a_broken_worker_does_not_hide_its_neighbours(tmp_path: Path) -> None:
    ctx = lint(
        tmp_path,
        "providers:\n  local:\n    kind: ollama\n    workers:\n"
        "      - {url: 'http://10.0.0.1:11434'}\n"
        "      - {name: b, url: 'http://10.0.0.2:11434', max_concurrent: two}\n"
        "      - {name: c, url: 'http://10.0.0.3:11434', max_concurrent: 0}\n"
        "aliases:\n  a: {chain: [local/x, local/y]}\n",
    )
    assert [(d.code, d.path) for d in ctx.sink.sorted()] == [
        ("IL004", "providers.local.workers[0].name"),
        ("IL004", "providers.local.workers[1].max_concurrent"),
        ("IL203", "providers.local.workers[2].max_concurrent"),
    ]
    assert sorted(ctx.workers) == ["b", "c"]
    assert ctx.workers["c"].entry.path == ("providers", "local", "workers", 2)


def test_a_bad_chain_entry_keeps_the_positions_of_the_others(tmp_path: Path) -> None:
    ctx = lint(
        tmp_path,
        "providers:\n  g: {kind: openai, base_url: 'https://g.internal/v1', api_key_env: G}\n"
        "aliases:\n  a: {chain: [3, g/x, grok/y]}\n",
    )
    assert [(d.code, d.path, str(d.span).split(":", 1)[1]) for d in ctx.sink.sorted()] == [
        ("IL004", "aliases.a.chain[0]", "5:15"),
        ("IL304", "aliases.a.chain[2]", "5:23"),
    ]


def test_references_to_a_broken_provider_or_alias_are_not_reported_again(tmp_path: Path) -> None:
    ctx = lint(
        tmp_path,
        "server: {default_alias: b}\n"
        "providers:\n  g: {base_url: 'https://g.internal/v1', api_key_env: G}\n"
        "aliases:\n  a: {chain: [g/x, b]}\n  b: {chain: g/y}\n",
    )
    assert [(d.code, d.message) for d in ctx.sink.sorted()] == [
        ("IL004", "`providers.g` is missing the required key `kind`"),
        ("IL004", "`aliases.b.chain` must be a list, not `g/y`"),
    ]


def test_require_env_reports_each_unset_variable(tmp_path: Path) -> None:
    text = (
        "providers:\n  g: {kind: openai, base_url: 'https://g.internal/v1', api_key_env: G_KEY}\n"
        "  h: {kind: openai, base_url: 'https://h.internal/v1', api_key_env: H_KEY}\n"
        "aliases:\n  a: {chain: [g/x, h/y]}\n"
    )
    assert codes(lint(tmp_path, text)) == []
    ctx = lint(tmp_path, text, require_env=True, environ={"H_KEY": "set"})
    assert [(d.code, d.message) for d in ctx.sink.items] == [
        ("IL105", "credential variable `G_KEY` of provider `g` is not set (or empty)")
    ]
    assert codes(lint(tmp_path, text, require_env=True, environ={"G_KEY": "1", "H_KEY": "2"})) == []
