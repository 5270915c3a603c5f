"""`interlock keys add`: the key once on stderr, a config entry on stdout that verifies it and compiles."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from interlock.cli import main
from interlock.common.apikeys import key_id_of, parse_hash, verify
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


COMMENTED = """\
# A team's gateway: every comment here must survive an edit.
version: 1
server:
  auth: required   # callers need a key
  alias_namespace: "t/"
providers:
  cloud: {kind: openai, base_url: "https://api.internal/v1", api_key_env: CLOUD_KEY}
tenants:
  research:
    description: the research team   # who
keys:
  # the notebook's key
  notebook: {tenant: research, key_env: NOTEBOOK_KEY}
aliases:
  t/chat:
    description: 'chat'
    chain: [cloud/a, cloud/b]   # order matters
"""


def test_keys_add_write_twice_keeps_the_file_and_adds_only_the_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "interlock.yaml"
    config.write_text(COMMENTED)
    assert main(["keys", "add", "--tenant", "research", "--id", "ci", "--write", str(config)]) == 0
    first = capsys.readouterr()
    assert first.out == f"added key `ci` (tenant `research`) to {config}\n"
    key = re.fullmatch(r"key for ci \(shown once, store it now\): (il-ci\.[A-Za-z0-9_-]{43})\n", first.err)
    assert key is not None
    assert key.group(1) not in config.read_text()
    assert (
        main(["keys", "add", "--tenant", "ops", "--id", "oncall", "--operator", "--write", str(config)]) == 0
    )
    capsys.readouterr()
    after = config.read_text()
    hashes = re.findall(r'hash: "(hmac-sha256\$[0-9a-f]{32}\$[0-9a-f]{64})"', after)
    assert len(hashes) == 2
    added = [
        "  ops: {}",
        "  ci:",
        "    tenant: research",
        f'    hash: "{hashes[0]}"',
        "  oncall:",
        "    tenant: ops",
        f'    hash: "{hashes[1]}"',
        "    operator: true",
    ]
    diff = [line for line in difflib.ndiff(COMMENTED.splitlines(), after.splitlines()) if line[:2] != "  "]
    assert diff == [f"+ {line}" for line in added]  # nothing removed, nothing changed, in these places:
    lines = after.splitlines()
    assert lines.index("  ops: {}") == lines.index("    description: the research team   # who") + 1
    assert lines.index("  ci:") == lines.index("  notebook: {tenant: research, key_env: NOTEBOOK_KEY}") + 1
    parsed = parse_hash(hashes[0])
    assert parsed is not None
    assert verify(key.group(1), *parsed)
    ctx = compile_text(tmp_path, after)
    assert [d.code for d in ctx.sink.errors] == []


def test_keys_add_write_refuses_an_id_already_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "interlock.yaml"
    config.write_text(COMMENTED)
    assert main(["keys", "add", "--tenant", "research", "--id", "notebook", "--write", str(config)]) == 1
    assert capsys.readouterr().err == f"interlock keys add: {config} already has a key `notebook`\n"
    assert config.read_text() == COMMENTED
