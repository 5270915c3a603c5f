"""Caller keys and limits without a server: KeyBook outcomes, ACL decisions, the counters' windows."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from interlock.common.apikeys import hash_key, new_key
from interlock.common.pattern_text import parse_match
from interlock.runtime.base.errors import (
    InvalidRequest,
    ModelNotAllowed,
    OperatorOnly,
    TwoKeys,
    Unauthenticated,
)
from interlock.runtime.loaded.access import KeyBook, presented_key, refusal_message
from interlock.runtime.loaded.callers import (
    ANONYMOUS,
    COMMON,
    OPERATOR_PATHS,
    Budget,
    Refusal,
    Turn,
    operator_route,
)
from interlock.runtime.state.counters import MemoryCounters
from interlock.schema.plan import PlanAccess, PlanKey, PlanLimits, PlanMatch, PlanTenant


def _limits(allowed: list[str] | None = None, denied: tuple[str, ...] = (), **rates: int) -> PlanLimits:
    def rows(patterns: list[str] | tuple[str, ...]) -> list[PlanMatch]:
        parsed = [parse_match(p) for p in patterns]
        return [row for row in parsed if row is not None]

    return PlanLimits(allowed=None if allowed is None else rows(allowed), denied=rows(denied), **rates)


GENERATED = new_key("ci")
ACCESS = PlanAccess(
    tenants={
        "mana": PlanTenant(name="mana", description="", limits=_limits(["mana/*"], requests_per_minute=9)),
        "ops": PlanTenant(name="ops", description="", limits=_limits(denied=("groq/*",))),
    },
    keys={
        "alice": PlanKey(
            id="alice", tenant="mana", description="", key_env="ALICE_KEY", hash=None, limits=_limits()
        ),
        "ci": PlanKey(
            id="ci",
            tenant="ops",
            description="",
            key_env=None,
            hash=hash_key(GENERATED),
            limits=_limits(max_concurrent=2),
        ),
    },
)
NAMES = ("mana/fast", "groq/llama", "local/qwen")


def book(mode: str = "required") -> KeyBook:
    return KeyBook.of(ACCESS, mode, {"ALICE_KEY": "alice-secret-value"}, {}, NAMES)


def test_each_outcome_of_authenticate() -> None:
    keys = book()
    alice = keys.authenticate([(b"authorization", b"Bearer alice-secret-value")])
    assert (alice.key_id, alice.tenant) == ("alice", "mana")
    ci = keys.authenticate([(b"x-api-key", GENERATED.encode())])
    assert (ci.key_id, ci.tenant) == ("ci", "ops")
    with pytest.raises(Unauthenticated, match=r"^this gateway needs an API key: send `Authorization"):
        keys.authenticate([(b"authorization", b"Basic Zm9vOmJhcg==")])
    with pytest.raises(Unauthenticated, match=r"^the API key sent is not valid for this gateway$"):
        keys.authenticate([(b"authorization", b"Bearer il-ci.not-the-secret")])
    optional = book("optional")
    assert optional.authenticate([]) is ANONYMOUS
    with pytest.raises(Unauthenticated):  # a wrong key is never silently anonymous
        optional.authenticate([(b"x-api-key", b"wrong")])


def test_the_book_holds_digests_not_secrets() -> None:
    keys = book()
    assert hashlib.sha256(b"alice-secret-value").digest() in keys.by_digest
    assert "alice-secret-value" not in repr(keys)
    assert GENERATED not in repr(keys)


def test_acl_is_both_levels_deny_wins_and_direct_names_are_matched_too() -> None:
    keys = book()
    alice = keys.authenticate([(b"x-api-key", b"alice-secret-value")])
    assert alice.may_call("mana/fast")
    assert not alice.may_call("groq/llama")
    assert not alice.may_call("groq/not-in-the-plan")  # undeclared: matched against the patterns
    with pytest.raises(
        ModelNotAllowed,
        match=r"^`groq/x` is not a model key `alice` \(tenant `mana`\) may use; its aliases: ",
    ):
        alice.check("groq/x")
    ci = keys.authenticate([(b"x-api-key", GENERATED.encode())])
    assert ci.may_call("local/qwen")
    assert ci.may_call("mana/fast")
    assert not ci.may_call("groq/llama")
    assert [b.name for b in alice.budgets] == ["t:mana"]  # alice has no rates of her own
    assert [b.name for b in ci.budgets] == ["k:ci"]  # ops has none


def test_presented_key_reads_bearer_or_x_api_key() -> None:
    assert presented_key([(b"authorization", b"bearer  k1 ")]) == "k1"
    assert presented_key([(b"x-api-key", b"k2")]) == "k2"
    assert presented_key([(b"authorization", b"Bearer ")]) is None
    assert presented_key([]) is None


def test_an_empty_bearer_beside_a_key_is_ignored_and_two_keys_are_refused() -> None:
    assert presented_key([(b"authorization", b"Bearer "), (b"x-api-key", b"k2")]) == "k2"
    assert presented_key([(b"x-api-key", b" "), (b"authorization", b"Bearer k1")]) == "k1"
    assert presented_key([(b"authorization", b"Bearer k1"), (b"x-api-key", b"k1")]) == "k1"  # one key
    with pytest.raises(TwoKeys, match=r"^the request carries two different API keys") as refused:
        presented_key([(b"authorization", b"Bearer k1"), (b"x-api-key", b"k2")])
    assert (refused.value.status, refused.value.code) == (400, "ambiguous_api_key")
    with pytest.raises(TwoKeys):
        presented_key([(b"x-api-key", b"k1"), (b"x-api-key", b"k2")])
    with pytest.raises(TwoKeys):  # whichever of them is valid: which one was meant is unknown
        book().authenticate([(b"authorization", b"Bearer alice-secret-value"), (b"x-api-key", b"other")])


def test_a_utf8_secret_is_recognised() -> None:
    keys = KeyBook.of(ACCESS, "required", {"ALICE_KEY": "schlüssel-ключ-🔑"}, {}, NAMES)
    alice = keys.authenticate([(b"authorization", "Bearer schlüssel-ключ-🔑".encode())])
    assert alice.key_id == "alice"
    with pytest.raises(Unauthenticated):  # the same text read as latin-1 bytes is another key
        keys.authenticate([(b"x-api-key", "schlüssel-ключ-🔑".encode().decode("latin-1").encode())])


def test_windows_retry_after_and_nothing_counted_on_refusal() -> None:
    now = [120.0]
    counters = MemoryCounters(lambda: now[0])
    key, tenant = Budget("k:a", 2, 0, 0), Budget("t:x", 0, 10, 1)

    async def scenario() -> None:
        assert await counters.take([key]) is None
        assert await counters.take([key]) is None
        now[0] = 150.0
        assert await counters.take([key]) == Refusal("k:a", "requests_per_minute", 2, 30.0)
        now[0] = 180.0  # the next minute
        assert await counters.take([key, tenant]) is None
        refused = await counters.take([key, tenant])  # the tenant's one slot is in use
        assert refused == Refusal("t:x", "max_concurrent", 1, 1.0)
        assert counters.requests["k:a"] == 1  # the refused request counted nowhere
        await counters.done([key, tenant], 12)
        assert counters.in_flight == {"k:a": 2, "t:x": 0}  # the first two never said `done`
        assert await counters.take([tenant]) == Refusal("t:x", "tokens_per_minute", 10, 60.0)

    asyncio.run(scenario())


def test_refusal_messages_name_the_budget_not_other_callers() -> None:
    alice = book().authenticate([(b"x-api-key", b"alice-secret-value")])
    message = refusal_message(alice, Refusal("t:mana", "requests_per_minute", 9, 41.2))
    assert message == (
        "tenant `mana` (of key `alice`) may make 9 requests per minute, and that is used up; retry in 42 s"
    )


def test_operator_routes_admit_only_operator_keys_once_one_is_declared() -> None:
    ci = ACCESS.keys["ci"].model_copy(update={"operator": True})
    guarded = KeyBook.of(
        ACCESS.model_copy(update={"keys": {**ACCESS.keys, "ci": ci}}),
        "optional",
        {"ALICE_KEY": "alice-secret-value"},
        {},
        NAMES,
    )
    assert guarded.operators
    operator = guarded.authenticate([(b"x-api-key", GENERATED.encode())])
    alice = guarded.authenticate([(b"x-api-key", b"alice-secret-value")])
    assert (operator.operator, alice.operator) == (True, False)
    for path in (*OPERATOR_PATHS, "/ui/workers"):
        guarded.admit(operator, path)
        with pytest.raises(OperatorOnly) as refused:
            guarded.admit(alice, path)
        assert refused.value.message == (
            f"key `alice` (tenant `mana`) may not read `{operator_route(path)}`: it shows every tenant's "
            "state and needs an operator key (`operator: true` in the key's entry)"
        )
        with pytest.raises(Unauthenticated) as anonymous:
            guarded.admit(ANONYMOUS, path)  # `auth: optional`, no key: not served as anonymous here
        assert anonymous.value.message == (
            f"`{operator_route(path)}` needs an operator key: send `Authorization: Bearer <key>` or "
            "`x-api-key: <key>`"
        )
    for path in ("/v1/models", "/v1/chat/completions", "/ui/static/page.js", "/api/tags", "/v1/healthz"):
        guarded.admit(alice, path)  # everything else: the key's ACL decides, as before
        guarded.admit(ANONYMOUS, path)
    unguarded = book("optional")  # no operator declared: every caller reads them, as before operators
    assert not unguarded.operators
    assert OPERATOR_PATHS  # an empty table would let the loop below prove nothing
    for path in OPERATOR_PATHS:
        unguarded.admit(unguarded.authenticate([(b"x-api-key", b"alice-secret-value")]), path)
        unguarded.admit(ANONYMOUS, path)


PER_CALLER = {
    # the model routes: the caller's ACL decides
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/api/chat",
    "/api/generate",
    "/api/embed",
    "/api/embeddings",
    # listings: only what the caller may call (its aliases' candidates' health included)
    "/v1/models",
    "/v1/models/{model_id}",
    "/v1/aliases",
    "/api/tags",
    "/api/show",
    "/openapi.json",
}
"""Routes behind a key that show only the caller's own part of the gateway, reviewed one by one."""


def test_a_lifecycle_route_is_never_open() -> None:
    """The lifecycle authenticates every request when the plan has keys, without asking the path."""
    from interlock.runtime.loaded.callers import needs_key
    from interlock.runtime.request.route_table import rows, served
    from interlock.runtime.surfaces import contract, openai

    assert all(needs_key(row.path) for row in rows() if row.metered)
    with pytest.raises(ValueError, match=r"^/healthz: a lifecycle route must be behind the caller keys"):
        served("GET", "/healthz", openai.ChatCompletions(), contract.CHAT)


def test_every_route_is_open_per_caller_or_for_operators() -> None:
    """A new route must be put in one of the three: a route that shows fleet-wide or cross-tenant
    state belongs in ``OPERATOR_PATHS``."""
    from interlock.runtime.loaded.callers import needs_key
    from interlock.runtime.ops.openapi import routes

    served = {route.path for route in routes()}
    operator = {path for path in served if operator_route(path) is not None}
    open_ = {path for path in served if not needs_key(path)}
    assert operator == {"/ui", "/ui/{section}", "/v1/health", "/v1/metadata", "/api/ps"}
    assert open_ == {
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/version",
        "/",
        "/ui/static/{name}",
        "/docs",
        "/docs/static/{asset}",
    }
    assert served - operator - open_ == PER_CALLER
    assert operator <= {*OPERATOR_PATHS, "/ui/{section}"}


def test_a_callers_turn_is_its_tenants_weight_and_its_keys_or_tenants_priority() -> None:
    """Built at load; the header is read only for a key that may set it, and only its two values."""
    access = PlanAccess(
        tenants={
            "lab": PlanTenant(name="lab", description="", limits=_limits(), weight=3.0, priority="batch"),
            "app": PlanTenant(name="app", description="", limits=_limits()),
        },
        keys={
            "eval": PlanKey(
                id="eval", tenant="lab", description="", key_env="E", hash=None, limits=_limits()
            ),
            "chat": PlanKey(
                id="chat",
                tenant="lab",
                description="",
                key_env="C",
                hash=None,
                limits=_limits(),
                priority="interactive",
                priority_header=True,
            ),
            "web": PlanKey(id="web", tenant="app", description="", key_env="W", hash=None, limits=_limits()),
        },
    )
    keys = KeyBook.of(
        access, "required", {"E": "eval-secret", "C": "chat-secret", "W": "web-secret"}, {}, NAMES
    )
    evaluator, chat, web = (keys.caller(s) for s in ("eval-secret", "chat-secret", "web-secret"))
    assert evaluator is not None
    assert chat is not None
    assert web is not None
    assert evaluator.turn == Turn("lab", 3.0, batch=True)  # the tenant's priority
    assert chat.turn == Turn("lab", 3.0, batch=False)  # the key's own wins
    assert web.turn == Turn("app", 1.0)
    assert ANONYMOUS.turn is COMMON
    batch = [(b"x-interlock-priority", b"Batch ")]
    assert evaluator.turn_for(batch) is evaluator.turn  # may not choose: the header is not read
    assert evaluator.turn_for([(b"x-interlock-priority", b"interactive")]) == Turn("lab", 3.0, batch=True)
    assert chat.turn_for(batch) == Turn("lab", 3.0, batch=True)
    assert chat.turn_for([(b"x-interlock-priority", b"interactive")]) == chat.turn
    assert chat.turn_for([]) == chat.turn
    with pytest.raises(
        InvalidRequest, match=r"^`X-Interlock-Priority` is `urgent`; send `interactive` or `batch`$"
    ):
        chat.turn_for([(b"x-interlock-priority", b"urgent")])
