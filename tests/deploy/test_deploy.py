"""`interlock deploy k8s`: manifests valid against Kubernetes' schemas, a ConfigMap per plan, no secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import orjson
import pytest
import yaml

from interlock.cli import main
from interlock.deploy import TARGETS
from interlock.runtime.loaded.plan import load_plan
from tests.conftest import ROOT

CONFIG = ROOT / "tests" / "fixtures" / "plans" / "preset-rtx4090.yaml"
K8S_VERSION = "1.30"
FILES = ["configmap.yaml", "deployment.yaml", "service.yaml", "servicemonitor.yaml"]


def deploy(out: Path, *args: str, source: Path = CONFIG) -> dict[str, Any]:
    assert main(["deploy", "k8s", str(source), "-o", str(out), *args]) == 0
    assert sorted(p.name for p in out.iterdir()) == FILES
    return {p.stem: yaml.safe_load(p.read_text()) for p in out.iterdir()}


def test_every_target_is_registered() -> None:
    assert set(TARGETS) == {"k8s", "prometheus-rules"}


def test_the_manifests_are_valid_kubernetes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = deploy(tmp_path, "--replicas", "3", "--state-url", "redis://redis:6379/0", "--namespace", "llm")
    for name in ("configmap", "deployment", "service"):
        kubernetes_validate.validate(docs[name], K8S_VERSION, strict=True)  # raises on any error
    monitor = docs["servicemonitor"]  # a CRD: no bundled schema; its shape by hand
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"] == docs["service"]["spec"]["selector"]
    assert {d["metadata"]["namespace"] for d in docs.values()} == {"llm"}
    deployment = docs["deployment"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert container["args"] == [
        "serve",
        "/etc/interlock/plan.json",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--state-url",
        "redis://redis:6379/0",
    ]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert pod["volumes"][0]["configMap"]["name"] == docs["configmap"]["metadata"]["name"]
    assert capsys.readouterr().err == ""  # shared state given: no warning


def test_the_configmap_holds_the_plan_and_is_named_by_its_hash(tmp_path: Path) -> None:
    docs = deploy(tmp_path)
    data = orjson.loads(docs["configmap"]["data"]["plan.json"])
    plan = load_plan(data, {p["api_key_env"]: "x" for p in data["providers"].values() if p["api_key_env"]})
    assert docs["configmap"]["metadata"]["name"] == f"interlock-plan-{plan.content_hash[7:19]}"
    assert docs["deployment"]["spec"]["template"]["metadata"]["annotations"] == {
        "interlock.dev/plan": plan.content_hash
    }


def test_a_new_plan_is_a_new_configmap_and_a_rollout(tmp_path: Path) -> None:
    first = deploy(tmp_path / "a")
    again = deploy(tmp_path / "b")
    assert (tmp_path / "a" / "deployment.yaml").read_bytes() == (
        tmp_path / "b" / "deployment.yaml"
    ).read_bytes()
    changed = tmp_path / "changed.yaml"
    changed.write_text(CONFIG.read_text().replace("fast", "quick"))
    other = deploy(tmp_path / "c", source=changed)
    names = {d["configmap"]["metadata"]["name"] for d in (first, again, other)}
    assert len(names) == 2
    volumes = other["deployment"]["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["configMap"]["name"] == other["configmap"]["metadata"]["name"]


def test_credentials_come_from_a_secret_by_name_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "gsk-SECRET-value-never-written-1234"
    monkeypatch.setenv("GROQ_API_KEY", secret)
    docs = deploy(tmp_path, "--credentials-secret", "llm-keys")
    env = docs["deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "GROQ_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "llm-keys", "key": "GROQ_API_KEY"}},
    } in env
    assert all("value" not in variable for variable in env)
    for path in tmp_path.iterdir():
        assert secret not in path.read_text()
    assert "2 replicas without --state-url" in capsys.readouterr().err


def test_every_caller_keys_variable_comes_from_the_secret_too(tmp_path: Path) -> None:
    """Without them the pods never start: the plan needs every `key_env` set under `auth: required`."""
    docs = deploy(tmp_path, source=ROOT / "examples" / "multi-team.yaml")
    env = docs["deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [variable["name"] for variable in env] == [
        "GROQ_API_KEY",
        "ONCALL_KEY",
        "RESEARCH_KEY",
        "SUPPORT_KEY",
    ]
    assert all(variable["valueFrom"]["secretKeyRef"]["key"] == variable["name"] for variable in env)


def test_a_config_that_does_not_compile_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nproviders: [nope]\n")
    assert main(["deploy", "k8s", str(bad), "-o", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()
    assert "does not compile" in capsys.readouterr().err


def test_a_state_url_with_a_password_stays_in_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "redis://:hunter2-SECRET@redis:6379/0"
    assert main(["deploy", "k8s", str(CONFIG), "-o", str(tmp_path / "no"), "--state-url", url]) == 2
    assert "holds a password" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    docs = deploy(tmp_path / "yes", "--state-url-in-secret")
    container = docs["deployment"]["spec"]["template"]["spec"]["containers"][0]
    ref = {"secretKeyRef": {"name": "interlock-credentials", "key": "INTERLOCK_STATE_URL"}}
    assert {"name": "INTERLOCK_STATE_URL", "valueFrom": ref} in container["env"]
    assert "--state-url" not in container["args"]
    assert capsys.readouterr().err == ""


def test_the_output_folder_is_made_but_not_its_parents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "missing" / "deploy"
    assert main(["deploy", "k8s", str(CONFIG), "-o", str(deep)]) == 1
    assert capsys.readouterr().err.startswith(f"interlock deploy: cannot create {deep}: No such file")
    assert not (tmp_path / "missing").exists()
