"""`interlock keys add`: the key once on stderr, a config entry on stdout that verifies it and compiles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from interlock.apikeys import key_id_of, parse_hash, verify
from interlock.cli import main
from tests.conftest import compile_text


def test_keys_add_prints_the_key_once_and_an_entry_with_its_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "add", "--tenant", "research", "--id", "ci-bot"]) == 0
    out, err = capsys.readouterr()
    key = re.fullmatch(r"key for ci-bot \(shown once, store it now\): (il-ci-bot\.[A-Za-z0-9_-]{43})\n", err)
    assert key is not None
    assert key_id_of(key.group(1)) == "ci-bot"
    assert key.group(1) not in out
    entry = re.fullmatch(
        r'  ci-bot:\n    tenant: research\n    hash: "(hmac-sha256\$[0-9a-f]{32}\$[0-9a-f]{64})"\n', out
    )
    assert entry is not None
    parsed = parse_hash(entry.group(1))
    assert parsed is not None
    assert verify(key.group(1), *parsed)
    assert not verify(key.group(1) + "x", *parsed)
    config = (
        "version: 1\nserver: {auth: required}\n"
        "providers: {local: {kind: ollama, workers: [{name: a, url: 'http://127.0.0.1:1'}]}}\n"
        "aliases: {chat: {chain: [local/m]}}\n"
        "tenants: {research: {}}\nkeys:\n" + out
    )
    ctx = compile_text(tmp_path, config)
    assert [d.code for d in ctx.sink.errors] == []
    assert ctx.plan is not None
    assert ctx.plan.access.keys["ci-bot"].hash == entry.group(1)


def test_keys_add_refuses_an_id_a_key_cannot_carry(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["keys", "add", "--tenant", "t", "--id", "ci.bot"])
    assert exited.value.code == 2
    assert "--id: `ci.bot` is not a key id" in capsys.readouterr().err


def test_keys_add_operator_prints_an_operator_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "add", "--tenant", "ops", "--id", "oncall", "--operator"]) == 0
    out = capsys.readouterr().out
    assert out.endswith('"\n    operator: true\n')
    config = (
        "version: 1\nserver: {auth: required}\n"
        "providers: {local: {kind: ollama, workers: [{name: a, url: 'http://127.0.0.1:1'}]}}\n"
        "aliases: {chat: {chain: [local/m]}}\n"
        "tenants: {ops: {}}\nkeys:\n" + out
    )
    ctx = compile_text(tmp_path, config)
    assert "IL820" not in [d.code for d in ctx.sink.items]  # an operator is declared
    assert ctx.plan is not None
    assert ctx.plan.access.keys["oncall"].operator
