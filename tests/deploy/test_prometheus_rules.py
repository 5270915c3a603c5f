"""`interlock deploy prometheus-rules`: rules promtool accepts, whose unit tests fire on recorded failures.

The series the rules are tested on are recorded here, from a real gateway's ``/metrics`` (in process, on
fakes): one scrape per minute of series time while everything is healthy, then while upstreams fail,
a worker refuses connections and a key spends its credits. promtool then evaluates the generated rules
on those series; an alert that names a metric or label the gateway does not export never fires.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from interlock.cli import main
from interlock.commands.gateway import build_gateway
from interlock.deploy import TARGETS
from interlock.deploy.gotemplate import TemplateError, literal, rendered
from interlock.deploy.prometheus import alert_ids, rules
from interlock.runtime.loaded.plan import load_plan
from interlock.testing.fake_fleet import GIB, FakeGpuBox, sim_model
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.runtime.conftest import compile_text
from tests.waiting import until

CONFIG = """\
version: 1
server: {{auth: required}}
providers:
  cloud: {{kind: openai, base_url: "{cloud}", api_key_env: CLOUD_KEY}}
  backup: {{kind: openai, base_url: "{backup}", api_key_env: CLOUD_KEY}}
  gone: {{kind: openai, base_url: "{gone}", api_key_env: CLOUD_KEY}}
  local:
    kind: ollama
    workers:
      - name: box
        url: "{box}"
        max_concurrent: 1
        queue: {{max_waiting: 4, max_wait: 1s}}
        telemetry: {{url: "{box}/telemetry"}}
  spare:
    kind: ollama
    workers:
      - name: box2
        url: "{box2}"
        max_concurrent: 1
        on_saturation: queue
        queue: {{max_waiting: 1, max_wait: 1h}}
health: {{probe_interval: 1h, probe_timeout: 1s, failure_threshold: 1, open_for: 1h, rate_limit_open_for: 1h}}
tenants:
  team: {{}}
keys:
  ops: {{tenant: team, key_env: OPS_KEY}}
  intern: {{tenant: team, key_env: INTERN_KEY, credits: 40}}
aliases:
  t/chat: {{description: falls back, chain: [cloud/c1, backup/c2]}}
  t/gone: {{description: loses its only candidate, chain: [gone/g1]}}
  t/local: {{description: the box, chain: [local/m1]}}
  t/busy: {{description: one slot held and the next request waiting, chain: [spare/m2]}}
"""
ENV = {"CLOUD_KEY": "sk-cloud", "OPS_KEY": "sk-ops-0123456789", "INTERN_KEY": "sk-intern-0123456789"}
HEALTHY, FAILING = 8, 24  # scrapes (minutes of series time) in each phase
INSTANCE = "gateway:8080"
WAITING = f'interlock_slot_queue_waiting{{instance="{INSTANCE}",worker="box2"}}'


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("INTERLOCK_REQUIRE_PROMTOOL") == "1":
            pytest.fail(
                "promtool is required here (INTERLOCK_REQUIRE_PROMTOOL=1): apt-get install prometheus"
            )
        pytest.skip("no promtool on PATH (Debian: apt-get install prometheus)")
    return found


def check(*args: str) -> str:
    done = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_target_is_registered_as_one_file() -> None:
    assert TARGETS["prometheus-rules"].one_file
    assert not TARGETS["k8s"].one_file


def test_promtool_accepts_the_rules_of_the_examples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[2]
    for config in (root / "config.rtx4090.yaml", root / "examples" / "multi-team.yaml"):
        out = tmp_path / f"{config.stem}.rules.yaml"
        assert main(["deploy", "prometheus-rules", str(config), "-o", str(out)]) == 0
        assert capsys.readouterr().out.startswith(f"wrote {out} (plan sha256:")
        assert "SUCCESS" in check("check", "rules", str(out))


def test_a_directory_is_refused_as_the_rule_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    assert main(["deploy", "prometheus-rules", str(root / "config.rtx4090.yaml"), "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"interlock deploy: {tmp_path} is a directory; give the file to write\n"


def test_every_alias_worker_and_key_with_credits_has_its_alerts(tmp_path: Path) -> None:
    plan = load_plan(
        compile_text(
            tmp_path, CONFIG.format(**{f: f"http://127.0.0.1:{9 + i}" for i, f in enumerate(FAKES)})
        ),
        ENV,
    )
    assert sorted(alert_ids(rules(plan.source))) == [
        'InterlockAliasAllCircuitsOpen{alias="t/busy"}',
        'InterlockAliasAllCircuitsOpen{alias="t/chat"}',
        'InterlockAliasAllCircuitsOpen{alias="t/gone"}',
        'InterlockAliasAllCircuitsOpen{alias="t/local"}',
        'InterlockAliasFallbackRate{alias="t/chat"}',  # one candidate: nothing to fall back to
        'InterlockAliasNoHealthyCandidate{alias="t/busy"}',
        'InterlockAliasNoHealthyCandidate{alias="t/chat"}',
        'InterlockAliasNoHealthyCandidate{alias="t/gone"}',
        'InterlockAliasNoHealthyCandidate{alias="t/local"}',
        'InterlockKeyCreditsNearlySpent{key="intern"}',  # `ops` has no credits
        'InterlockWorkerDown{worker="box"}',
        'InterlockWorkerDown{worker="box2"}',
        'InterlockWorkerQueueSaturated{worker="box"}',
        'InterlockWorkerQueueSaturated{worker="box2"}',
        'InterlockWorkerVramNearFull{worker="box"}',  # it declares telemetry; box2 does not
    ]
    for rule in alert_ids(rules(plan.source)).values():
        assert "`interlock status`" in rule["annotations"]["runbook"]


FAKES = ("cloud", "backup", "gone", "box", "box2")


def record(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, float]]]:
    """The plan's rules and one scrape per minute: ``HEALTHY`` while all is well, then ``FAILING``."""
    box = FakeGpuBox(name="box", models=[sim_model("m1", 15, load_s=0.0)], vram_bytes=16 * GIB)
    box2 = FakeGpuBox(name="box2", models=[sim_model("m2", 1, load_s=0.0)], vram_bytes=16 * GIB)
    with (
        FakeOpenAI(name="cloud") as cloud,
        FakeOpenAI(name="backup") as backup,
        FakeOpenAI(name="gone") as gone,
        box,
        box2,
    ):
        urls = {"cloud": cloud.base_url, "backup": backup.base_url, "gone": gone.base_url, "box": box.url}
        urls["box2"] = box2.url
        plan = load_plan(compile_text(tmp_path, CONFIG.format(**urls)), ENV)
        gateway = build_gateway(plan, probes=False)

        def fail() -> None:
            cloud.set_fault(Fault.http_status(500))
            gone.set_fault(Fault.http_status(500))
            box.refuse_connections()
            box2.hold()  # its one slot stays taken: the next request waits in its queue

        try:
            scrapes = asyncio.run(_scrape(gateway, fail))
        finally:
            box2.release()
    return rules(plan.source), scrapes


async def _scrape(gateway: Any, fail: Callable[[], None]) -> list[dict[str, float]]:
    scrapes: list[dict[str, float]] = []
    await gateway.startup()
    try:
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as http:

            async def ask(alias: str, key: str = "OPS_KEY") -> int:
                body = {"model": alias, "messages": [{"role": "user", "content": "hi"}]}
                headers = {"authorization": f"Bearer {ENV[key]}"}
                return (await http.post("/v1/chat/completions", json=body, headers=headers)).status_code

            async def minute() -> None:
                for alias in ("t/chat", "t/gone", "t/local"):
                    await ask(alias)
                await gateway.parts.live.fleet.telemetry_loop.collect_all()
                scrapes.append(_samples((await http.get("/metrics")).text))

            for _ in range(HEALTHY):
                await minute()
            fail()
            while await ask("t/chat", "INTERN_KEY") == 200:  # until its credits are spent: 402
                pass
            held = [asyncio.create_task(ask("t/busy")) for _ in range(2)]

            async def one_waits() -> bool:
                return bool(_samples((await http.get("/metrics")).text).get(WAITING))

            await until(one_waits, "the second request to wait for box2's slot")
            for _ in range(FAILING):
                await minute()
            for task in held:
                task.cancel()
    finally:
        await gateway.shutdown()
    return scrapes


def _samples(exposition: str) -> dict[str, float]:
    """``series -> value`` for every interlock sample but histograms' (promtool's series notation)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if not sample.name.startswith("interlock_") or sample.name.endswith(
                ("_bucket", "_sum", "_count")
            ):
                continue
            if sample.name.endswith("_created"):
                continue
            labels = {**sample.labels, "instance": INSTANCE}
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            out[f"{sample.name}{{{inner}}}"] = sample.value
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def test_the_rules_fire_on_recorded_failures_and_not_before(tmp_path: Path) -> None:
    promtool()
    data, scrapes = record(tmp_path)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    series = sorted({name for scrape in scrapes for name in scrape})
    input_series = [
        {"series": name, "values": " ".join(_value(scrape.get(name)) for scrape in scrapes)}
        for name in series
    ]
    by_id = alert_ids(data)

    def firing(*ids: str) -> list[dict[str, Any]]:
        return [
            {
                "exp_labels": {**by_id[i]["labels"], "instance": INSTANCE},
                "exp_annotations": by_id[i]["annotations"],
            }
            for i in ids
        ]

    healthy_end = f"{HEALTHY - 1}m"  # the last healthy scrape: the box's model loaded, 15 of 16 GiB
    end = f"{HEALTHY + FAILING - 1}m"
    expected = {
        (healthy_end, "InterlockWorkerVramNearFull"): firing('InterlockWorkerVramNearFull{worker="box"}'),
        (end, "InterlockWorkerVramNearFull"): [],  # the box refuses connections: no reading, no sample
        (end, "InterlockWorkerDown"): firing('InterlockWorkerDown{worker="box"}'),
        (end, "InterlockAliasNoHealthyCandidate"): firing(
            'InterlockAliasNoHealthyCandidate{alias="t/gone"}',
            'InterlockAliasNoHealthyCandidate{alias="t/local"}',
        ),
        (end, "InterlockAliasAllCircuitsOpen"): firing(
            'InterlockAliasAllCircuitsOpen{alias="t/gone"}', 'InterlockAliasAllCircuitsOpen{alias="t/local"}'
        ),
        (end, "InterlockAliasFallbackRate"): firing('InterlockAliasFallbackRate{alias="t/chat"}'),
        (end, "InterlockKeyCreditsNearlySpent"): firing('InterlockKeyCreditsNearlySpent{key="intern"}'),
        (end, "InterlockWorkerQueueSaturated"): firing('InterlockWorkerQueueSaturated{worker="box2"}'),
    }
    for name in {alert for _, alert in expected}:
        expected.setdefault((healthy_end, name), [])
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": input_series,
                "alert_rule_test": [
                    {"eval_time": at, "alertname": name, "exp_alerts": alerts}
                    for (at, name), alerts in sorted(expected.items())
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    assert "SUCCESS" in check("test", "rules", str(tmp_path / "tests.yaml"))


def _value(value: float | None) -> str:
    return "_" if value is None else repr(value)


def test_ci_fails_rather_than_skips_without_promtool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("INTERLOCK_REQUIRE_PROMTOOL", "1")  # as .ci/run sets it
    with pytest.raises(pytest.fail.Exception, match=r"^promtool is required here"):
        promtool()


HOSTILE_ALIASES = ("h/{{", "h/}}", "h/chat{{with query `up`}}{{.|first|value}}{{end}}", 'h/"{x}\\')
"""Alias names anyone may write: on main the first two made promtool refuse the file, the third ran its
PromQL query at alert time (its result sent to every receiver)."""


def test_names_render_literally_in_labels_and_annotations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    aliases = "".join(f"  {json.dumps(name)}: {{chain: [cloud/m1]}}\n" for name in HOSTILE_ALIASES)
    config = tmp_path / "hostile.yaml"
    config.write_text(
        "version: 1\nproviders:\n"
        '  cloud: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}\n'
        f"aliases:\n{aliases}"
    )
    out = tmp_path / "rules.yaml"
    assert main(["deploy", "prometheus-rules", str(config), "-o", str(out)]) == 0
    capsys.readouterr()
    assert "SUCCESS" in check("check", "rules", str(out))
    data = yaml.safe_load(out.read_text())
    fired = {
        rule["labels"]["alias"]: rule
        for group in data["groups"]
        for rule in group["rules"]
        if rule["alert"] == "InterlockAliasNoHealthyCandidate"
    }
    assert sorted(rendered(name) for name in fired) == sorted(HOSTILE_ALIASES)
    down = 'interlock_circuit_open{candidate="cloud/m1",instance="gateway:8080"}'
    expected = [
        {
            "exp_labels": {**{k: rendered(v) for k, v in rule["labels"].items()}, "instance": INSTANCE},
            "exp_annotations": {k: rendered(v) for k, v in rule["annotations"].items()},
        }
        for rule in fired.values()
    ]
    assert any("h/chat{{with query `up`}}" in e["exp_annotations"]["summary"] for e in expected)
    tests = {
        "rule_files": [out.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": down, "values": "1x5"},
                    {"series": 'up{job="x"}', "values": "7x5"},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "4m",
                        "alertname": "InterlockAliasNoHealthyCandidate",
                        "exp_alerts": expected,
                    }
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    assert "SUCCESS" in check("test", "rules", str(tmp_path / "tests.yaml"))


def test_the_generator_proves_every_label_and_annotation_renders_as_meant() -> None:
    assert literal("h/{{x}}") == 'h/{{"{"}}{{"{"}}x{{"}"}}{{"}"}}'
    assert rendered(literal("h/chat{{with query `up`}}{{end}}")) == "h/chat{{with query `up`}}{{end}}"
    unprinted = r"^a `\{` outside an action that prints it: 'h/\{\{ \$labels\.x \}\}'$"
    with pytest.raises(TemplateError, match=unprinted):
        rendered("h/{{ $labels.x }}")
