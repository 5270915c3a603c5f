"""Credentials: each provider gets only its own; no value shows in answers, health, metrics or logs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from tests.e2e.conftest import ALPHA_KEY, SECRETS, WRONG_KEY, Fakes
from tests.e2e.harness import Served

HI = [{"role": "user", "content": "hi"}]


def test_each_provider_gets_only_its_own_credential(gateway: Served, fakes: Fakes) -> None:
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="caller-key-not-forwarded", max_retries=0)
    sdk.chat.completions.create(model="e2e/keys", messages=HI)
    sdk.chat.completions.create(model="bravo/b-keys", messages=HI)
    to_alpha = [
        r for r in fakes.alpha.requests if isinstance(r.body, dict) and r.body.get("model") == "a-keys"
    ]
    assert [r.headers.get("authorization") for r in to_alpha] == [f"Bearer {ALPHA_KEY}"]
    assert fakes.bravo.requests  # probes and the call above
    assert all("authorization" not in r.headers for r in fakes.bravo.requests)
    assert all(r.headers.get("authorization") == f"Bearer {ALPHA_KEY}" for r in fakes.alpha.requests)


def test_an_upstream_echoing_the_key_in_a_401_does_not_leak_it(gateway: Served, fakes: Fakes) -> None:
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="caller", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        sdk.chat.completions.create(model="e2e/wrongkey", messages=HI)
    assert info.value.body == {
        "message": "upstream wrongkey/w1 refused the gateway's credentials for wrongkey (401)",
        "type": "authentication_error",
        "param": None,
        "code": "upstream_error",
    }
    assert WRONG_KEY not in info.value.response.text
    assert any(WRONG_KEY in r.headers.get("authorization", "") for r in fakes.wrong.requests)  # it was sent
    assert not any(isinstance(r.body, dict) and r.body.get("model") == "b-w" for r in fakes.bravo.requests)


def test_no_credential_value_in_health_metrics_aliases_or_logs(gateway: Served) -> None:
    surfaces = {
        path: gateway.http.get(path).text for path in ("/v1/health", "/metrics", "/v1/aliases", "/v1/models")
    }
    surfaces["log"] = gateway.log()
    assert "POST /v1/chat/completions" in surfaces["log"]  # the access log is on: the check has teeth
    for where, text in surfaces.items():
        for secret in SECRETS:
            assert secret not in text, f"{where} shows a credential"


def test_a_missing_credential_stops_the_start_naming_only_the_variable(tmp_path: Path, fakes: Fakes) -> None:
    config = tmp_path / "interlock.yaml"
    config.write_text(fakes.config())
    done = subprocess.run(
        [sys.executable, "-m", "interlock", "serve", str(config), "--port", "0"],
        capture_output=True,
        env={"PATH": os.environ.get("PATH", ""), "WRONG_KEY": WRONG_KEY},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == b""
    last = done.stderr.decode().strip().splitlines()[-1]
    reason = "provider alpha needs the credential variable ALPHA_KEY, which is not set"
    assert last == f"interlock serve: {config}: {reason}"
    assert WRONG_KEY not in done.stderr.decode()
