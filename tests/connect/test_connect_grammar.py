"""`connect`'s output is shell-, TOML- and YAML-safe whatever the alias and URL hold (issue 39, defect 13).

An alias holding a newline once ended a comment line, so sourcing the printed lines ran `$(id -u)`;
Codex's TOML got a raw newline. Every client's text is run or parsed here as its reader would: the
shell lines by bash (nothing runs, every variable holds exactly what was meant), Codex's config by
`tomllib`, LiteLLM's by PyYAML.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from interlock.cli import main
from interlock.connect import CLIENTS, AliasFacts
from interlock.connect import grammar as grammar_module
from interlock.connect.grammar import Shell, Unparsed, comment, env_name, quoted, toml

SHELL_CLIENTS = ("claude-code", "open-webui", "openai-sdk", "anthropic-sdk", "agents-sdk")


def hostile(folder: Path) -> list[str]:
    """Aliases that would run `touch` in ``folder`` if any grammar let them out."""
    pwn = f"touch {folder}/pwned"
    return [
        f"co/local\n$({pwn})",
        f"co/local\r\nexport X=$({pwn})",
        f"co/local\u2028$({pwn})\u0085`{pwn}`",
        f'co/it\'s "quoted" \\ ${{HOME}} $({pwn}) # not a comment',
        'co/x"\n[model_providers.evil]\nbase_url = "http://evil"\n#',
    ]


def env_after(printed: str, cwd: Path) -> dict[str, str]:
    done = subprocess.run(
        ["bash", "-c", printed + "\nenv -0"],
        env={"PATH": os.environ.get("PATH", ""), "INTERLOCK_API_KEY": "sk-k"},
        cwd=cwd,
        capture_output=True,
        check=True,
        timeout=30,
    )
    pairs = (item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


@pytest.mark.parametrize("client", SHELL_CLIENTS)
@pytest.mark.parametrize("key_env", [None, "INTERLOCK_API_KEY"])
def test_shell_lines_export_exactly_the_values_and_run_nothing(
    client: str, key_env: str | None, tmp_path: Path
) -> None:
    for number, alias in enumerate(hostile(tmp_path)):
        url = f"http://127.0.0.1:8080/{number}$(touch {tmp_path}/url-pwned)"
        printed = CLIENTS[client](AliasFacts(url, alias, 100_000, key_env))
        env = env_after(printed, tmp_path)
        assert list(tmp_path.iterdir()) == [], printed  # nothing ran
        assert url in env.values() or url + "/v1" in env.values(), printed
        if client == "claude-code":
            assert env["ANTHROPIC_MODEL"] == alias
            assert env["ANTHROPIC_API_KEY"] == ("sk-k" if key_env else "interlock-no-key")


@pytest.mark.parametrize("key_env", [None, "INTERLOCK_API_KEY"])
def test_codex_s_toml_reads_back_as_meant(key_env: str | None, tmp_path: Path) -> None:
    for alias in hostile(tmp_path):
        url = 'http://127.0.0.1:8080/"]\nevil = 1'
        config = tomllib.loads(CLIENTS["codex"](AliasFacts(url, alias, 100_000, key_env)))
        assert config["model"] == alias
        assert list(config["model_providers"]) == ["interlock"]
        assert config["model_providers"]["interlock"]["base_url"] == url + "/v1"
        assert "evil" not in config


def test_litellm_s_yaml_reads_back_as_meant(tmp_path: Path) -> None:
    for alias in hostile(tmp_path):
        url = "http://127.0.0.1:8080/\n  evil: 1"
        entry = yaml.safe_load(CLIENTS["litellm"](AliasFacts(url, alias, 100_000, "K")))["model_list"][0]
        assert entry["model_name"] == alias
        assert entry["litellm_params"]["api_base"] == url + "/v1"


def test_every_character_reads_back_in_every_grammar() -> None:
    text = "".join(chr(c) for c in range(0x0, 0x250)) + "\u2028\u2029\ufeff\U0001f600"
    assert tomllib.loads(f"v = {quoted(text)}\n") == {"v": text}
    assert yaml.safe_load(f"v: {quoted(text)}\n") == {"v": text}
    shell = Shell()
    shell.comment(text)
    shell.export("V", text)
    assert shlex.split(shell.text(), comments=True) == ["export", f"V={text}"]
    assert comment(text).count("\n") == 1


def test_a_writer_whose_output_does_not_read_back_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check is the generator's own, not only the tests': a broken escape never reaches the user."""
    monkeypatch.setattr(grammar_module.shlex, "quote", lambda value: value)
    shell = Shell()
    shell.export("V", "a b")
    with pytest.raises(Unparsed):
        shell.text()
    monkeypatch.setattr(grammar_module, "quoted", lambda value: f'"{value}"')
    with pytest.raises(Unparsed):
        toml("", {"model": 'x"\ny = "1'}, {})


def test_a_variable_name_that_is_not_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=r"^`A;B` is not a variable name"):
        env_name("A;B")
    with pytest.raises(SystemExit) as exited:
        main(["connect", "codex", "--alias", "a", "--api-key-env", "X$(id)"])
    assert exited.value.code == 2
    assert "`X$(id)` is not a variable name" in capsys.readouterr().err
