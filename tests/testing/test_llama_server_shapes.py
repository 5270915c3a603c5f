"""The llama.cpp fake (``FakeOpenAI(server="llama.cpp")``) answers ``/props``, ``/slots`` and
``/v1/models`` in the shapes the real ``llama-server`` answered with (tests/fixtures/discover/llama-server):
every field it sends is one the real server sent, with a value of the same JSON type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlock.testing.fake_openai import FakeOpenAI

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "discover" / "llama-server"


def _shape_within(fake: Any, real: Any, where: str = "") -> list[str]:
    """Where ``fake`` has a field ``real`` lacks, or a value of another JSON type."""
    if isinstance(fake, dict):
        if not isinstance(real, dict):
            return [f"{where}: an object, the real server sent {type(real).__name__}"]
        out = [f"{where}.{key}: not in the real answer" for key in fake if key not in real]
        for key in fake.keys() & real.keys():
            out += _shape_within(fake[key], real[key], f"{where}.{key}")
        return out
    if isinstance(fake, list):
        if not isinstance(real, list):
            return [f"{where}: a list, the real server sent {type(real).__name__}"]
        return [p for item in fake for p in _shape_within(item, real[0], f"{where}[]")] if real else []
    if type(fake) is not type(real) and not (isinstance(fake, int | float) and isinstance(real, int | float)):
        return [f"{where}: {type(fake).__name__}, the real server sent {type(real).__name__}"]
    return []


@pytest.mark.parametrize(
    ("path", "recorded"), [("/props", "props"), ("/slots", "slots"), ("/v1/models", "v1_models")]
)
def test_the_fake_answers_in_the_real_server_s_shape(path: str, recorded: str) -> None:
    real = json.loads((RECORDED / f"{recorded}.json").read_text())
    with FakeOpenAI(name="llama", server="llama.cpp", models=["smollm2"]) as fake:
        fake.reported.slots = 2
        answer = httpx.get(fake.url + path, timeout=10)
    assert answer.status_code == 200
    assert _shape_within(answer.json(), real) == []


def test_the_real_answers_say_what_init_reads() -> None:
    props = json.loads((RECORDED / "props.json").read_text())
    assert (props["total_slots"], props["default_generation_settings"]["n_ctx"]) == (2, 2048)
    models = json.loads((RECORDED / "v1_models.json").read_text())
    assert models["data"][0]["id"] == "smollm2"
    assert [s["n_ctx"] for s in json.loads((RECORDED / "slots.json").read_text())] == [2048, 2048]


def test_the_fake_applies_its_template_as_the_real_server_does() -> None:
    """``POST /apply-template`` with a tool: a prompt without it, as SmolLM2's template writes it."""
    real = json.loads((RECORDED / "apply_template.json").read_text())
    tool = {"type": "function", "function": {"name": "interlock_init_probe", "parameters": {}}}
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    with FakeOpenAI(name="llama", server="llama.cpp", models=["smollm2"]) as fake:
        answer = httpx.post(fake.url + "/apply-template", json=body, timeout=10).json()
        fake.template_tools = True
        with_tools = httpx.post(fake.url + "/apply-template", json=body, timeout=10).json()
    assert _shape_within(answer, real) == []
    assert answer["prompt"].endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert "interlock_init_probe" not in answer["prompt"]
    assert "interlock_init_probe" not in real["prompt"]
    assert "interlock_init_probe" in with_tools["prompt"]
