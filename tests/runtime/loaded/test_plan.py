"""Loading a plan: validation (version, schema, hash, references, credentials) and the lookup tables."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.loaded.plan import CredentialMissing, PlanError, load_plan, read_plan_file
from interlock.runtime.loaded.tables import Route
from interlock.runtime.net.fds import (
    default_max_connections,
    max_connections,
    open_file_limit,
    raise_open_file_limit,
)
from interlock.runtime.wire.base import Endpoint
from interlock.schema.canonical import canonical_json, content_hash
from tests.runtime.conftest import BASIC, build

PlanData = Callable[..., dict[str, Any]]


def rehash(data: dict[str, Any]) -> dict[str, Any]:
    data["content_hash"] = content_hash(data)
    return data


def test_aliases_resolve_to_candidate_objects_in_order(plan_data: PlanData) -> None:
    plan = build(plan_data())
    alias = plan.aliases["t/chat"]
    assert [c.id for c in alias.candidates] == ["local/m1", "cloud/c1", "free/f1"]
    assert alias.candidates[1] is plan.candidates["cloud/c1"]
    assert alias.header == (b"x-interlock-alias", b"t/chat")
    assert plan.plan_header == (b"x-interlock-plan", plan.content_hash.encode())


def test_endpoints_carry_timeouts_urls_and_only_their_own_credential(plan_data: PlanData) -> None:
    plan = build(plan_data())
    (local,) = plan.candidates["local/m1"].routes
    assert (local.endpoint.url, local.endpoint.label, local.worker) == (
        "http://127.0.0.1:9",
        "local@box1",
        "box1",
    )
    assert (local.endpoint.connect_s, local.endpoint.first_byte_s, local.endpoint.total_s) == (0.5, 2.0, 10.0)
    (cloud,) = plan.candidates["cloud/c1"].routes
    assert cloud.endpoint.url == "http://127.0.0.1:9/v1"
    assert dict(cloud.endpoint.headers) == {"Authorization": "Bearer sk-cloud-secret"}
    (free,) = plan.candidates["free/f1"].routes
    assert dict(free.endpoint.headers) == {}
    assert plan.secrets == ("sk-cloud-secret",)


def test_credentials_never_show_in_a_printed_plan(plan_data: PlanData) -> None:
    plan = build(plan_data())
    candidate = plan.candidates["cloud/c1"]
    assert "sk-cloud-secret" not in repr(candidate)
    assert "headers" not in repr(candidate.routes[0].endpoint)  # left out of an endpoint's repr()
    headers = candidate.routes[0].endpoint.headers
    assert (repr(headers), str(headers)) == ("{'Authorization': '[redacted]'}",) * 2


def test_slot_limits_come_from_the_compiled_table_then_the_patterns(plan_data: PlanData) -> None:
    plan = build(plan_data())
    assert plan.candidates["local/m1"].routes[0].slot_limit == 1
    provider = plan.providers["local"]
    assert plan.direct_candidate(provider, "big:70b").routes[0].slot_limit == 1
    assert plan.direct_candidate(provider, "other").routes[0].slot_limit == 2
    assert plan.workers["box1"].slot_limit("m1") == 1
    ad_hoc = plan.direct_candidate(provider, "other")
    assert (ad_hoc.in_plan, ad_hoc.metric_label) == (False, "local/*")
    assert plan.candidates["local/m1"].metric_label == "local/m1"


def test_an_unknown_format_version_is_refused(plan_data: PlanData) -> None:
    data = plan_data()
    data["format_version"] = 2
    with pytest.raises(
        PlanError,
        match=r"^plan: plan format_version 2 is not supported \(this interlock reads version 1\); "
        r"recompile it with this version of `interlock compile`$",
    ):
        build(data)


def test_a_plan_that_breaks_the_schema_is_refused(plan_data: PlanData) -> None:
    data = plan_data()
    del data["health"]
    data["server"]["direct_models"] = "yes"
    with pytest.raises(
        PlanError,
        match=r"^plan: the plan does not match plan.schema.json: \(root\): 'health' is a required property; "
        r"server.direct_models: 'yes' is not of type 'boolean'$",
    ):
        build(data)


def test_the_plan_is_read_strictly_as_json_schema_reads_it(plan_data: PlanData) -> None:
    data = plan_data()
    data["server"]["max_stream_line_bytes"] = "64"  # pydantic's lax mode would read it as 64
    with pytest.raises(
        PlanError,
        match=r"^plan: the plan does not match plan.schema.json: "
        r"server.max_stream_line_bytes: '64' is not of type 'integer'$",
    ):
        build(rehash(data))


def test_what_only_the_model_refuses_is_worded_by_the_model(plan_data: PlanData) -> None:
    data = plan_data()
    data["server"]["max_stream_line_bytes"] = 64.0  # an integer to JSON Schema, a float to the strict model
    with pytest.raises(
        PlanError,
        match=r"^plan: the plan is not a valid routing plan: "
        r"server.max_stream_line_bytes: Input should be a valid integer$",
    ):
        build(rehash(data))


def test_a_plan_edited_after_compiling_is_refused(plan_data: PlanData) -> None:
    data = plan_data()
    data["aliases"]["t/chat"]["candidates"].reverse()
    with pytest.raises(
        PlanError,
        match=r"^plan: content_hash sha256:[0-9a-f]{64} does not match the plan's content "
        r"\(sha256:[0-9a-f]{64}\); the plan was edited after compiling: recompile it$",
    ):
        build(data)


def test_a_dangling_reference_is_refused(plan_data: PlanData) -> None:
    data = plan_data()
    data["aliases"]["t/chat"]["candidates"].append("nowhere/x")
    with pytest.raises(
        PlanError, match=r"^plan: the plan is inconsistent: alias t/chat names unknown candidate nowhere/x$"
    ):
        build(rehash(data))


def test_a_missing_credential_names_the_variable_not_a_value(plan_data: PlanData) -> None:
    with pytest.raises(
        CredentialMissing,
        match=r"^plan: provider cloud needs the credential variable CLOUD_KEY, which is not set$",
    ) as info:
        build(plan_data(), {"OTHER_KEY": "sk-other"})
    assert info.value.variable == "CLOUD_KEY"


def test_an_empty_credential_counts_as_missing(plan_data: PlanData) -> None:
    with pytest.raises(
        CredentialMissing,
        match=r"^plan: provider cloud needs the credential variable CLOUD_KEY, which is not set$",
    ):
        build(plan_data(), {"CLOUD_KEY": ""})


def test_plan_files_are_read_as_json_objects(tmp_path: Path, plan_data: PlanData) -> None:
    good = tmp_path / "plan.json"
    good.write_text(canonical_json(plan_data()))
    assert load_plan(read_plan_file(good), {"CLOUD_KEY": "k"}, origin=str(good)).aliases
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(
        PlanError,
        match=rf"^{re.escape(str(bad))}: the plan is not valid JSON "
        r"\(unexpected character, expected a string key: line 1 column 2 \(char 1\)\)$",
    ):
        read_plan_file(bad)
    array = tmp_path / "array.json"
    array.write_text(json.dumps([1]))
    with pytest.raises(
        PlanError, match=rf"^{re.escape(str(array))}: the plan must be a JSON object, not an array$"
    ):
        read_plan_file(array)
    missing = tmp_path / "missing.json"
    with pytest.raises(
        PlanError, match=rf"^{re.escape(str(missing))}: cannot read the plan: No such file or directory$"
    ):
        read_plan_file(missing)


def test_the_shipped_example_plan_loads(tmp_path: Path) -> None:
    from interlock.compiler import compile_config

    root = Path(__file__).resolve().parents[3]
    ctx = compile_config(str(root / "config.rtx4090.yaml"))
    assert ctx.plan is not None
    data = json.loads(canonical_json(ctx.plan.model_dump(mode="json")))
    env = {"GROQ_API_KEY": "g", "OPENROUTER_API_KEY": "o", "GEMINI_API_KEY": "m"}
    plan = load_plan(data, env)
    assert plan.aliases["mana/long-form"].candidates[0].id == "ollama/gemma3:12b"
    assert plan.candidates["ollama/gemma3:12b"].routes[0].slot_limit == 1


# -- response headers: checked once, at load (issue 7, item 4) -----------------------------------------


def _renamed_alias(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    alias = data["aliases"].pop(old)
    alias["name"] = new
    data["aliases"][new] = alias
    if data["server"]["default_alias"] == old:
        data["server"]["default_alias"] = new
    return rehash(data)


@pytest.mark.parametrize("name", ["t/evil\r\nSet-Cookie: a=b", "t/nul\x00", "t/tab\there", " t/space"])
def test_an_alias_that_cannot_be_sent_in_a_header_is_refused(plan_data: PlanData, name: str) -> None:
    data = _renamed_alias(plan_data(), "t/cloud", name)
    with pytest.raises(PlanError) as caught:
        build(data)
    assert str(caught.value).startswith("plan: the plan would send broken response headers: alias ")
    assert ascii(name) in str(caught.value)
    assert "\r" not in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_alias_too_long_for_a_header_is_refused_and_named_cut_short(plan_data: PlanData) -> None:
    name = "t/" + "a" * 300
    with pytest.raises(PlanError) as caught:
        build(_renamed_alias(plan_data(), "t/cloud", name))
    message = str(caught.value)
    assert message.startswith("plan: the plan would send broken response headers: alias 't/aaa")
    assert "it is 302 characters long, more than 256" in message
    assert len(message) < 400


def test_a_candidate_id_with_a_line_break_is_refused(plan_data: PlanData) -> None:
    data = plan_data()
    data["candidates"]["cloud/c1"]["id"] = "cloud/c1\n"
    data["candidates"]["cloud/c1\n"] = data["candidates"].pop("cloud/c1")
    data["candidates"]["cloud/c1\n"]["model"] = "c1\n"
    for alias in data["aliases"].values():
        alias["candidates"] = [c + "\n" if c == "cloud/c1" else c for c in alias["candidates"]]
    with pytest.raises(PlanError, match=r"candidate 'cloud/c1\\n' cannot be sent in a response header"):
        build(rehash(data))


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("X-Resolved\r\nX-Injected: 1", "is not a valid HTTP header name"),
        ("X Resolved", "is not a valid HTTP header name"),
        ("Content-Length", "is a header the gateway sets itself"),
        ("x-interlock-plan", "is a header the gateway sets itself"),
        ("Set-Cookie", "means something to browsers, caches or proxies"),
        ("Location", "means something to browsers, caches or proxies"),
        ("Access-Control-Allow-Origin", "means something to browsers, caches or proxies"),
    ],
)
def test_a_resolved_header_that_cannot_be_sent_is_refused(
    plan_data: PlanData, header: str, reason: str
) -> None:
    data = plan_data()
    data["server"]["resolved_header"] = header
    with pytest.raises(PlanError, match=rf"^plan: the plan would send broken response headers: .*{reason}"):
        build(rehash(data))


def test_a_credential_that_cannot_be_sent_is_refused_without_showing_it(plan_data: PlanData) -> None:
    with pytest.raises(PlanError) as caught:
        build(plan_data(), {"CLOUD_KEY": "sk-cloud-secret\r\nX-Injected: 1"})
    assert str(caught.value) == (
        "plan: provider cloud: the credential in CLOUD_KEY cannot be sent in an Authorization header "
        "(control characters, or whitespace at either end)"
    )


def test_the_limits_are_read_from_the_plan_and_older_plans_get_the_defaults(plan_data: PlanData) -> None:
    derived = default_max_connections(open_file_limit())  # unset: from this process's open-file limit
    data = plan_data()
    assert data["server"]["max_connections"] is None
    server = build(data).server
    assert (server.header_timeout_s, server.body_timeout_s, server.max_connections) == (10.0, 30.0, derived)
    assert (server.max_upstream_body_bytes, server.max_stream_line_bytes) == (32 << 20, 1 << 20)
    data["server"]["max_connections"] = 1024
    assert build(rehash(data)).server.max_connections == 1024  # set: as written
    for key in ("header_timeout_ms", "body_timeout_ms", "max_connections"):
        del data["server"][key]
    data["server"]["max_stream_line_bytes"] = 4096
    server = build(rehash(data)).server
    assert (server.header_timeout_s, server.max_connections, server.max_stream_line_bytes) == (
        10.0,
        derived,
        4096,
    )


def test_the_default_cap_leaves_room_for_an_upstream_connection_each_and_some_files() -> None:
    assert default_max_connections(20_000) == 9_872
    assert default_max_connections(1024) == 384
    assert default_max_connections(256) == 64  # never below 64
    assert default_max_connections(None) == 65_536  # unlimited


def test_serve_raises_the_soft_open_file_limit_to_the_hard_one() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = min(soft, hard, 512)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))
    try:
        raise_open_file_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
        assert max_connections(None) == default_max_connections(
            None if hard == resource.RLIM_INFINITY else hard
        )
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


CYCLE_CHECK = BASIC.replace(
    "server: {default_alias: t/chat,",
    "server: {cors: {allow_origins: ['https://app.example.com']}, default_alias: t/chat,",
).replace("health: {", "routing: {sticky: {enabled: true}}\nhealth: {")


def test_loaded_tables_hold_no_reference_cycles(plan_data: PlanData) -> None:
    """A plan that a reload drops is freed at once by reference counting, frozen (``gc_policy``) or not:
    nothing in the tables may be part of a reference cycle."""
    data = plan_data(CYCLE_CHECK)
    build(data)  # anything a first load leaves behind once (imports, caches) is not what is asked
    plan = build(data)
    assert plan.cors is not None
    assert plan.routing.sticky is not None
    assert plan.candidates["local/m1"].routes[0].worker_header is not None
    plan.direct_candidate(plan.providers["local"], "other")
    kinds = {type(plan), type(plan.source), type(plan.cors), type(plan.routing.sticky)}
    kinds |= {type(plan.aliases["t/chat"]), type(plan.candidates["local/m1"]), Route, Endpoint}
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the next collection finds stays in gc.garbage, to look at
    try:
        del plan
        gc.collect()
        in_cycles = sorted({type(o).__name__ for o in gc.garbage if type(o) in kinds})
        assert in_cycles == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


def test_a_plan_reading_a_key_from_a_variable_that_is_no_credential_is_refused(plan_data: PlanData) -> None:
    """A plan written by hand gets the compiler's IL111 again: the AWS secret is never sent upstream,
    and a caller key is never the provider's variable (nor the process's HOME)."""
    data = plan_data()
    data["providers"]["cloud"]["api_key_env"] = "AWS_SECRET_ACCESS_KEY"
    with pytest.raises(
        PlanError,
        match=r"^plan: the plan reads credentials from the wrong variables: provider cloud reads its key "
        r"from AWS_SECRET_ACCESS_KEY, which holds another system's credential \(a cloud, CI, registry, "
        r"database or service secret\)$",
    ):
        build(rehash(data), {"AWS_SECRET_ACCESS_KEY": "aws-secret"})


def _with_keys(data: dict[str, Any], **variables: str) -> dict[str, Any]:
    """``data`` with ``auth: required`` and one operator key per ``id=VARIABLE``, rehashed."""
    data["server"]["auth"] = "required"
    limits = {"allowed": None, "denied": []}
    data["access"]["tenants"] = {"t": {"name": "t", "description": "", "limits": limits}}
    base = {"tenant": "t", "description": "", "hash": None, "operator": True, "limits": limits}
    data["access"]["keys"] = {
        key_id: {**base, "id": key_id, "key_env": variable} for key_id, variable in variables.items()
    }
    return rehash(data)


def test_a_caller_key_on_a_provider_variable_or_home_is_refused(plan_data: PlanData) -> None:
    data = _with_keys(plan_data(), ops="HOME", ci="CLOUD_KEY")
    with pytest.raises(PlanError) as caught:
        build(data, {"CLOUD_KEY": "sk-cloud", "HOME": "/root"})
    assert str(caught.value) == (
        "plan: the plan reads credentials from the wrong variables: caller key ci reads its secret from "
        "CLOUD_KEY, which provider cloud sends upstream; caller key ops reads its secret from HOME, which "
        "is a variable of the process itself, not a credential"
    )


def test_a_caller_key_variable_not_named_as_a_secret_or_a_vendors_is_refused(plan_data: PlanData) -> None:
    """The allow rule again, for a plan written by hand: `_` (the shell's last command) was an operator
    key once; a name must say "secret" or carry a declared prefix, and a vendor's key is no caller's."""
    data = _with_keys(plan_data(), shell="_", team="TEAM", vendor="OPENAI_API_KEY", lab="CK_LAB")
    with pytest.raises(PlanError) as caught:
        build(data, {"CLOUD_KEY": "sk-cloud-secret"})
    assert str(caught.value) == (
        "plan: the plan reads credentials from the wrong variables: caller key lab reads its secret from "
        "CK_LAB, which is not named as a secret (*_KEY, *_TOKEN, *_SECRET, *_APIKEY or a prefix in "
        "server.key_env_prefixes); caller key shell reads its secret from _, which is a variable of the "
        "process itself, not a credential; caller key team reads its secret from TEAM, which is not named "
        "as a secret (*_KEY, *_TOKEN, *_SECRET, *_APIKEY or a prefix in server.key_env_prefixes); caller "
        "key vendor reads its secret from OPENAI_API_KEY, which holds OpenAI's key, a model vendor's "
        "credential"
    )
    data = _with_keys(plan_data(), lab="CK_LAB")
    data["server"]["key_env_prefixes"] = ["CK_"]
    secret = "il-lab.0123456789abcdefghijklmnop"
    assert build(rehash(data), {"CLOUD_KEY": "sk-cloud-secret", "CK_LAB": secret}).keys is not None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("/usr/bin/setsid", "is a path, not a secret (the variable holds a file or a program's name)"),
        ("80", "has 2 characters; a caller key's secret has at least 16"),
        ("xterm-256color-direct", "is also the value of `TERM`, which is no secret"),
    ],
)
def test_a_caller_key_whose_value_is_no_secret_is_refused_at_plan_load(
    plan_data: PlanData, value: str, reason: str
) -> None:
    """What a process exports unasked (a path, `COLUMNS=80`, the terminal's name) is never a key, and the
    value itself is never shown."""
    data = _with_keys(plan_data(), ops="OPS_KEY")
    env = {"CLOUD_KEY": "sk-cloud-secret", "OPS_KEY": value, "TERM": "xterm-256color-direct"}
    with pytest.raises(
        PlanError,
        match=rf"^plan: caller keys without a secret: caller key ops: the value of "
        rf"OPS_KEY {re.escape(reason)}$",
    ):
        build(data, env)


def test_a_vendors_key_goes_only_to_its_hosts_unless_the_plan_lists_another(plan_data: PlanData) -> None:
    data = plan_data()
    data["providers"]["cloud"]["api_key_env"] = "ANTHROPIC_API_KEY"
    env = {"ANTHROPIC_API_KEY": "sk-ant-0123456789"}
    with pytest.raises(
        PlanError,
        match=r"^plan: the plan reads credentials from the wrong variables: provider cloud sends "
        r"ANTHROPIC_API_KEY \(Anthropic's key, not listed in its api_key_hosts\) to 127\.0\.0\.1$",
    ):
        build(rehash(data), env)
    data["providers"]["cloud"]["api_key_hosts"] = ["127.0.0.1"]
    assert build(rehash(data), env).providers["cloud"].name == "cloud"


def test_a_variable_no_vendor_s_goes_off_this_network_only_to_a_listed_host(plan_data: PlanData) -> None:
    """An allow rule, not a deny list: `NOMAD_TOKEN` passed every list of other systems' secret names."""
    data = plan_data()
    data["providers"]["cloud"]["api_key_env"] = "NOMAD_TOKEN"
    data["providers"]["cloud"]["base_url"] = "https://nomad.example.com/v1"
    env = {"NOMAD_TOKEN": "nomad-0123456789"}
    with pytest.raises(
        PlanError,
        match=r"^plan: the plan reads credentials from the wrong variables: provider cloud sends "
        r"NOMAD_TOKEN \(no model vendor's key, to a host off this network not listed in its "
        r"api_key_hosts\) to nomad\.example\.com$",
    ):
        build(rehash(data), env)
    data["providers"]["cloud"]["api_key_hosts"] = ["nomad.example.com"]
    assert build(rehash(data), env).providers["cloud"].name == "cloud"
    data["providers"]["cloud"]["api_key_hosts"] = []
    data["providers"]["cloud"]["base_url"] = "http://10.0.0.5:8080/v1"  # this network
    assert build(rehash(data), env).providers["cloud"].name == "cloud"


def test_the_settings_read_every_duration_of_their_plan_section_in_seconds(
    plan_data: Callable[..., dict[str, Any]],
) -> None:
    """``server``, ``health`` and ``preflight`` become the runtime's settings by one rule (every ``x_ms``
    as ``x_s``, in seconds; every other key as it is), so no key is copied wrong or left behind."""
    source = plan_data()
    for section in ("server", "health", "preflight"):
        source[section] = {
            key: value + 7 if key.endswith("_ms") else value for key, value in source[section].items()
        }
    plan = build(rehash(source))
    for section in ("server", "health", "preflight"):
        settings = getattr(plan, section)
        for key, value in source[section].items():
            if key.endswith("_ms"):
                assert getattr(settings, key[:-3] + "_s") == value / 1000, (section, key)
            elif hasattr(settings, key) and key != "max_connections":
                assert getattr(settings, key) == value, (section, key)
    assert plan.preflight.max_tokens_ceiling is (source["preflight"]["max_tokens"] == "ceiling")
