"""`interlock simulate` and `interlock explain ... --down`: what-if on the shipped example, with snapshots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from interlock.cli import main

EXAMPLE = "config.rtx4090.yaml"

pytestmark = pytest.mark.usefixtures("at_root")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The command's exit code and output, the plan's hash masked (the example changes often)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, re.sub(r"sha256:[0-9a-f]{64}", "sha256:HASH", out), err


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> str:
    from interlock.compiler import compile_config
    from interlock.schema.canonical import canonical_json

    ctx = compile_config(str(Path(__file__).resolve().parents[2] / EXAMPLE))
    assert ctx.plan is not None
    path = tmp_path_factory.mktemp("whatif") / "plan.json"
    path.write_text(canonical_json(ctx.plan.model_dump(mode="json")))
    return str(path)


def test_the_gpu_box_down_moves_local_aliases_to_the_cloud(
    plan: str, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    code, out, err = run(capsys, "simulate", plan, "--down", "rtx4090", "--fail-if-unservable")
    assert (code, err) == (0, "")
    assert out == snapshot


def test_clouds_and_box_down_leave_aliases_without_a_candidate_and_lose_tools(
    plan: str, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    argv = ["simulate", plan, "--down", "rtx4090,groq", "--down", "openrouter", "--format", "json"]
    code, out, _ = run(capsys, *argv)
    assert code == 0  # reporting only
    code, out, _ = run(capsys, *argv, "--fail-if-unservable")
    assert code == 1
    report = json.loads(out)
    vision = next(a for a in report["aliases"] if a["name"] == "mana/vision")
    assert vision["answers"] == "google/gemini-2.0-flash-exp"
    reasoning = next(a for a in report["aliases"] if a["name"] == "mana/reasoning")
    assert (reasoning["servable"], reasoning["capabilities_lost"]) == (False, ["tools"])
    assert report == snapshot


def test_a_saturated_box_queues_instead_of_falling_back(
    plan: str, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    code, out, _ = run(capsys, "simulate", plan, "--saturated", "rtx4090", "--down", "google")
    assert code == 0
    assert out == snapshot


def test_unknown_parts_are_named_with_what_exists(plan: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "simulate", plan, "--down", "rtx4090,rtx5090")
    assert (code, out) == (2, "")
    assert err == (
        "interlock simulate: --down: `rtx5090` is not a worker or provider of this plan "
        "(known: google, groq, ollama, openrouter, rtx4090)\n"
    )


def test_explain_a_config_alias_with_parts_down(
    capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    code, out, _ = run(capsys, "explain", EXAMPLE, "mana/vision", "--down", "rtx4090,google")
    assert code == 0
    what_if = out[out.index("what if down:") :]
    assert what_if == snapshot


def test_explain_a_plan_alias_with_parts_down(
    plan: str, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    code, out, err = run(capsys, "explain", plan, "mana/long-form", "--down", "ollama")
    assert (code, err) == (0, "")
    assert out == snapshot
    code, out, err = run(capsys, "explain", plan, "mana/nope")
    assert (code, out) == (2, "")
    assert err.startswith(f"alias `mana/nope` is not in the plan {plan}; ")
