"""The content hash: the fast check (orjson's bytes first) agrees with the definition."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.compiler import CompileOptions, compile_config
from interlock.schema.canonical import content_hash, has_content_hash
from tests.conftest import ROOT

TRICKY: list[dict[str, Any]] = [
    {"format_version": 1, "b": {"z": 1, "a": [True, None, False]}, "a": "plain"},
    {"floats": [0.5, 1e16, 1e-05, 1.5e300, -0.0, 3.0], "why": "orjson writes exponents differently"},
    {"text": 'é ü 中文 \u2028 \x01 " \\ /', "emoji": "🙂"},
    {"huge": 2**70, "negative": -(2**65)},  # orjson refuses integers past 64 bits
    {"nested": [{"k": [[]]}, {}], "": ""},
]


def _example_plan() -> dict[str, Any]:
    """The repository's example configuration, compiled: a plan as the compiler writes it."""
    ctx = compile_config(str(ROOT / "config.rtx4090.yaml"), CompileOptions(environ={}))
    assert ctx.plan is not None
    data: dict[str, Any] = ctx.plan.model_dump(mode="json")
    return data


@pytest.mark.parametrize("data", [_example_plan(), *TRICKY])
def test_fast_check_agrees_with_the_definition(data: dict[str, Any]) -> None:
    right = content_hash(data)
    assert has_content_hash({**data, "content_hash": right}, right)
    assert not has_content_hash(data, "sha256:" + "0" * 64)
    if data:
        edited = {**data, "added": 1}
        assert not has_content_hash(edited, right)
