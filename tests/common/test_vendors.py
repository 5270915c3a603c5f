"""The vendor table and the credential-variable rules on their own (the fixtures show them in context)."""

from __future__ import annotations

import pytest

from interlock.common.apikeys import bad_prefix, secret_like, weak_secret
from interlock.common.envnames import not_a_credential
from interlock.common.vendors import VENDORS, stray_hosts, unlisted_hosts, vendor_of


def test_every_vendor_variable_is_one_vendors_and_may_be_a_credential() -> None:
    """A row the deny list refuses could never be used; a variable in two rows would have two homes."""
    variables = [variable for vendor in VENDORS for variable in vendor.variables]
    assert len(variables) == len(set(variables))
    assert [v for v in variables if not_a_credential(v) is not None] == []
    for vendor in VENDORS:
        assert all(d == d.lower().strip(".") and "." in d for d in vendor.domains), vendor.name


@pytest.mark.parametrize(
    ("variable", "urls", "allowed", "stray"),
    [
        ("OPENAI_API_KEY", ["https://api.openai.com/v1"], [], []),
        ("openai_api_key", ["https://API.OpenAI.com./v1"], [], []),  # case folded, trailing dot
        ("OPENAI_API_KEY", ["https://openai.com.evil.example/v1"], [], ["openai.com.evil.example"]),
        ("OPENAI_API_KEY", ["https://evilopenai.com/v1"], [], ["evilopenai.com"]),
        ("OPENAI_API_KEY", ["https://proxy.example.net/v1"], ["proxy.example.net"], []),
        ("HF_TOKEN", ["https://router.huggingface.co/v1", "https://x.endpoints.huggingface.cloud"], [], []),
        ("ANTHROPIC_API_KEY", ["https://evil.example"], [], ["evil.example"]),
        ("GROQ_API_KEY", ["http://[::1]:8080/v1"], ["[::1]"], []),
        ("PROXY_KEY", ["https://anywhere.example/v1"], [], []),  # no vendor, no list: not pinned
        ("PROXY_KEY", ["https://b.example/v1", "https://a.example/v1"], ["a.example"], ["b.example"]),
    ],
)
def test_a_credential_goes_only_to_its_vendors_or_the_listed_hosts(
    variable: str, urls: list[str], allowed: list[str], stray: list[str]
) -> None:
    assert stray_hosts(variable, urls, allowed) == stray


def test_vendor_of_names_the_vendor() -> None:
    assert [vendor_of(v).name for v in ("HUGGING_FACE_HUB_TOKEN", "GOOGLE_API_KEY")] == [
        "Hugging Face",
        "Google",
    ]  # type: ignore[union-attr]
    assert vendor_of("TEAM_KEY") is None


@pytest.mark.parametrize(
    "variable", ["_", "JAVA_HOME", "GOPATH", "CONDA_PREFIX", "HISTFILE", "KUBECONFIG", "COLUMNS", "PS4"]
)
def test_what_a_shell_exports_is_never_a_caller_key(variable: str) -> None:
    """The sweep's list: each lints clean no more (refused by the deny rule, and not named as a secret)."""
    assert not_a_credential(variable) is not None
    assert not secret_like(variable)


@pytest.mark.parametrize(
    ("variable", "prefixes", "named"),
    [
        ("TEAM_KEY", (), True),
        ("TEAM_KEY_2", (), True),
        ("TEAM_TOKEN", (), True),
        ("TEAM_SECRET", (), True),
        ("TEAM_APIKEY", (), True),
        ("TEAM_KEY_ID", (), False),
        ("KEY", (), False),
        ("TEAM", (), False),
        ("CK_TEAM", ("CK_",), True),
        ("ck_team", ("CK_",), True),
    ],
)
def test_a_caller_key_variable_must_be_named_as_a_secret(
    variable: str, prefixes: tuple[str, ...], named: bool
) -> None:
    assert secret_like(variable, prefixes) is named


@pytest.mark.parametrize(
    ("prefix", "bad"),
    [
        ("CK_", False),
        ("TEAMKEYS_", False),
        ("", True),
        ("ck_", True),
        ("C_", True),
        ("CK", True),
        ("AWS_", True),
        ("LC_", True),
        ("INTERLOCK_", True),
    ],
)
def test_a_declared_prefix_is_one_of_the_operators_own(prefix: str, bad: bool) -> None:
    assert (bad_prefix(prefix) is not None) is bad


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("/usr/bin/setsid", "is a path, not a secret (the variable holds a file or a program's name)"),
        (
            "~/.kube/config-and-more",
            "is a path, not a secret (the variable holds a file or a program's name)",
        ),
        (
            "C:\\Users\\ops\\key-material",
            "is a path, not a secret (the variable holds a file or a program's name)",
        ),
        ("+ ", "has 2 characters; a caller key's secret has at least 16"),
        ("en_US.UTF-8-and-more", "is also the value of `LANG`, which is no secret"),
        ("il-ops.0123456789abcdefghijklmnop", None),
    ],
)
def test_a_caller_key_value_must_look_like_a_secret(value: str, reason: str | None) -> None:
    env = {"OPS_KEY": value, "LANG": "en_US.UTF-8-and-more", "OTHER_KEY": "il-ops.0123456789abcdefghijklmnop"}
    assert weak_secret("OPS_KEY", env) == reason  # a secret shared with another *_KEY is IL812's concern


OTHER_SYSTEMS = (
    "NOMAD_TOKEN",
    "CONSUL_HTTP_TOKEN",
    "BOUNDARY_TOKEN",
    "TFE_TOKEN",
    "OP_CONNECT_TOKEN",
    "CI_JOB_JWT",
    "BUILDKITE_AGENT_ACCESS_TOKEN",
    "CIRCLE_TOKEN",
    "SCW_SECRET_KEY",
    "OS_TOKEN",
    "TENCENTCLOUD_SECRET_KEY",
)


@pytest.mark.parametrize("variable", OTHER_SYSTEMS)
def test_a_variable_no_vendor_s_leaves_this_network_only_for_a_listed_host(variable: str) -> None:
    """Each linted clean towards an outside host under the deny lists (issue 39, item 14)."""
    urls = ["https://evil.example/v1", "http://10.0.0.5:8080/v1", "http://gpu-box:8080/v1"]
    assert unlisted_hosts(variable, urls, []) == ["evil.example"]
    assert unlisted_hosts(variable, urls, ["evil.example"]) == []  # listed: stray_hosts pins the rest
    assert unlisted_hosts(variable, ["https://api.groq.com/openai/v1"], []) == []  # a vendor's host
    assert unlisted_hosts(variable, ["https://134744072/v1"], []) == ["134744072"]  # 8.8.8.8, spelt


def test_a_vendor_s_variable_is_bound_by_its_vendor_not_by_the_allow_rule() -> None:
    assert unlisted_hosts("GROQ_API_KEY", ["https://evil.example/v1"], []) == []
    assert stray_hosts("GROQ_API_KEY", ["https://evil.example/v1"], []) == ["evil.example"]
