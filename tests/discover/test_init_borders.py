"""`interlock init --discover` against servers that answer as an attacker would: their text never becomes
configuration or reaches the terminal raw, their numbers are refused where they enter, and an answer is
bounded in time (as a whole) and in size. The generator proves every file it writes reads back as meant."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import orjson
import pytest
import yaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from interlock.cli import main
from interlock.discover import Found, discover
from interlock.discover.base import MAX_ANSWER_BYTES, said
from interlock.discover.written import UnprovenConfig, prove, written
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.fake_server import Answer, Incoming, JsonAnswer
from interlock.testing.faults import Fault

BREAKS = ("\r", "\n", "\r\n", "\x85", "\u2028", "\u2029")
"""Every line break a YAML reader knows (ruamel.yaml ends a comment only at ``\\n``)."""
CONTROLS = (
    "".join(chr(c) for c in range(0x20) if chr(c) not in "\r\n")
    + "\x7f"
    + "".join(chr(c) for c in range(0x80, 0xA0) if c != 0x85)
    + "\u200b\u200e\u202e\u2066\ufeff"  # zero width, bidi marks and overrides, byte order mark
    + "\x1b[2J\x1b]0;pwned\x07\x9b31m"  # clear the screen, set the window title, CSI in C1
)
CAPTURE = "http://127.0.0.1:9/capture/v1"


def hostile(tag: str) -> str:
    """A text field holding each YAML line break, each followed by a provider, and every control."""
    evil = "{kind: openai, base_url: '" + CAPTURE + "', api_key_env: LLAMACPP_KEY} #"
    return tag + "".join(f"{b}  evil{i}: {evil}" for i, b in enumerate(BREAKS)) + CONTROLS


YAML_SIGNIFICANT = "&a:#b'c'\"d\"{e}[f]*g!h|i>j%k@l`m`~?-,:"
"""A model's name that is one word of printable text, every character of it meaningful to YAML."""


class HostileLlama(FakeOpenAI):
    """llama-server whose /props puts attacker text in `build_info` and `model_alias`."""

    def _props(self, incoming: Incoming) -> Answer:
        answer = super()._props(incoming)
        assert isinstance(answer, JsonAnswer)
        return JsonAnswer({**answer.obj, "build_info": hostile("b1"), "model_alias": hostile("alias")})


def unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal or a YAML reader would act on (a line break ``\\n`` aside)."""
    kinds = ("Cc", "Cf", "Zl", "Zp")
    return sorted({repr(c) for c in text if c != "\n" and unicodedata.category(c) in kinds})


def test_no_text_a_server_chose_becomes_configuration_or_reaches_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = [ModelSpec(hostile("m")), ModelSpec("llama3.2:3b", ("completion", "tools"))]
    with (
        FakeOllama(name="box", version=hostile("0.12"), models=models) as ollama,
        HostileLlama(name="llama", server="llama.cpp", models=[YAML_SIGNIFICANT]) as llama,
        FakeOpenAI(name="other", models=[hostile(f"x{i}") for i in range(3)] + ["phi-4"]) as other,
    ):
        out = tmp_path / "interlock.yaml"
        argv = ["init", "--discover", ollama.url, "--discover", llama.url, "--discover", other.url]
        assert main([*argv, "-o", str(out)]) == 0
        err = capsys.readouterr().err
    text = out.read_text()
    assert unsafe(text) == []
    assert unsafe(err) == []
    assert "Ollama 0.12\\x0d  evil0: {kind: openai" in err  # shown escaped, cut at 120 characters
    for loaded in (yaml.load(text, Loader=yaml.CSafeLoader), yaml.safe_load(text)):  # libyaml, as lint
        assert list(loaded["providers"]) == ["ollama", "llamacpp", "compat"]
        assert loaded["providers"]["llamacpp"] == {
            "kind": "openai",
            "api_key_env": "LLAMACPP_KEY",
            "workers": [
                {"name": "llamacpp-1", "url": f"{llama.url}/v1", "server": "llama.cpp", "max_concurrent": 1}
            ],
        }
        assert loaded["providers"]["ollama"]["workers"][0]["url"] == ollama.url
        assert list(loaded["models"]) == [f"llamacpp/{YAML_SIGNIFICANT}"]  # compat/phi-4 has no facts
        assert loaded["aliases"]["local/chat"]["chain"] == [
            f"llamacpp/{YAML_SIGNIFICANT}",  # the name, exactly: a scalar escaped for YAML
            "ollama/llama3.2:3b",
            "compat/phi-4",
        ]
    assert "evil" not in yaml.safe_load(text)["providers"]
    assert "# llama-server b1\\x0d  evil0: {kind: openai" in text  # the comment says it, escaped, on one line
    assert "1 model(s) left out: no name usable in a configuration" in err
    assert "3 model(s) left out: no name usable in a configuration" in err
    assert main(["lint", str(out), "--strict"]) == 0


def test_the_generator_refuses_a_file_that_reads_back_as_other_data() -> None:
    config = CommentedMap({"version": 1, "providers": CommentedMap()})
    config.yaml_add_eol_comment("b1\revil: {kind: openai} #", "version")  # said() not applied
    unmeant = r"^the text reads as other data than meant: `'evil'` is not meant$"
    with pytest.raises(UnprovenConfig, match=unmeant):
        written(config)
    folded = CommentedMap({"chain": CommentedSeq(["e\x85f"])})  # ruamel writes NEL raw: it reads as a space
    with pytest.raises(UnprovenConfig, match=r"^the text reads as other data than meant: `'chain'\.\[0\]`"):
        written(folded)
    with pytest.raises(UnprovenConfig, match=r"^the text holds U\+001B, which YAML does not allow$"):
        prove("version: 1  # \x1b[2J\n", {"version": 1})
    prove("version: 1  # fine\n", {"version": 1})


def test_said_escapes_every_break_and_control_and_is_stable() -> None:
    text = hostile("b")
    shown = said(text, 10_000)
    assert unsafe(shown) == []
    assert said(shown, 10_000) == shown
    assert said("Ollama 0.12.6") == "Ollama 0.12.6"
    assert said("x" * 500, 20) == "x" * 17 + "..."


class AbsurdOllama(FakeOllama):
    """Ollama whose /api/show says `num_ctx` in 5,000 digits and a trained window of 2^62."""

    def _show(self, incoming: Incoming) -> Answer:
        answer = super()._show(incoming)
        assert isinstance(answer, JsonAnswer)
        info = {"general.architecture": "llama", "llama.context_length": 2**62}  # orjson: 64 bits at most
        return JsonAnswer({**answer.obj, "parameters": "num_ctx " + "9" * 5000, "model_info": info})


class AbsurdLlama(FakeOpenAI):
    """llama-server that says it has 10^12 slots of 2^62 tokens."""

    def _props(self, incoming: Incoming) -> Answer:
        answer = super()._props(incoming)
        assert isinstance(answer, JsonAnswer)
        settings = {**answer.obj["default_generation_settings"], "n_ctx": 2**62}
        return JsonAnswer({**answer.obj, "total_slots": 10**12, "default_generation_settings": settings})

    def _slots(self, incoming: Incoming) -> Answer:
        return JsonAnswer({"error": "slots endpoint is disabled"}, 501)


def test_absurd_numbers_are_refused_where_they_enter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        AbsurdOllama(name="box", models=[ModelSpec("llama3.2:3b", ("completion", "tools"))]) as ollama,
        AbsurdLlama(name="llama", server="llama.cpp", models=["smollm2"]) as llama,
    ):
        found = discover([ollama.url, llama.url], timeout_s=5)
        out = tmp_path / "interlock.yaml"
        assert main(["init", "--discover", ollama.url, "--discover", llama.url, "-o", str(out)]) == 0
    box, server = found
    assert isinstance(box, Found)
    assert isinstance(server, Found)
    assert [(m.name, m.context_tokens) for m in box.models] == [("llama3.2:3b", None)]
    assert (server.slots, server.models[0].context_tokens) == (None, None)
    assert "its slot count is not one from 1 to 4096: `max_concurrent` is not written" in server.notes
    config = yaml.safe_load(out.read_text())
    assert "max_concurrent" not in config["providers"]["llamacpp"]["workers"][0]
    assert "context_tokens" not in config["models"]["llamacpp/smollm2"]
    capsys.readouterr()


def test_an_answer_is_bounded_as_a_whole_in_time(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeOllama(name="slow") as slow:
        slow.set_fault(Fault.trickle(0.02))  # ~1 kB of /api/tags: 20 s, a byte every 20 ms
        (result,) = discover([slow.url], timeout_s=1)
        asked = [r.path for r in slow.requests]
    assert result == f"{slow.url}: does not answer; GET /api/tags: no whole answer within 1 s"
    assert asked == ["/api/tags"]  # a server that was late once is asked nothing more


def test_an_answer_is_bounded_in_size() -> None:
    padding = {"models": [], "padding": "x" * (MAX_ANSWER_BYTES + 1)}
    with FakeOllama(name="huge") as huge, FakeOllama(name="endless") as endless:
        huge.set_fault(Fault.recorded(orjson.dumps(padding)))
        endless.set_fault(Fault.endless())  # a JSON body that never ends, as fast as it is read
        results = discover([huge.url, endless.url], timeout_s=30)
    why = f"an answer over {MAX_ANSWER_BYTES:,} bytes"
    assert results[0] == (
        f"{huge.url}: answers, but as none of Ollama, llama-server, OpenAI- or Anthropic-compatible; "
        f"GET /api/tags: {why}"  # its 404 to GET / is an answer
    )
    assert results[1] == results[0].replace(huge.url, endless.url)


def test_a_window_and_slots_from_the_fakes_are_still_read(tmp_path: Path) -> None:
    with FakeOpenAI(name="llama", server="llama.cpp", models=["smollm2"]) as llama:
        llama.reported.slots = 3
        (found,) = discover([llama.url], timeout_s=5)
    assert isinstance(found, Found)
    assert (found.slots, found.models[0].context_tokens) == (3, 4096)


def test_num_ctx_in_any_digits_but_ascii_is_unknown() -> None:
    from interlock.common.bounds import window_text

    texts = ("8192", "²", "٣", "9" * 19, "0", "1" * 18)
    assert [window_text(t) for t in texts] == [8192, None, None, None, None, None]
    assert re.fullmatch(r"\d+", "٣")  # what `str.isdigit` and `\d` would have let through
