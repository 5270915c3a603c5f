"""Who is calling: a caller key recognised in one lookup, its tenant, and what both may use.

Why this boundary: every surface authenticates the same way, and everything that bills, audits or
traces a request needs the same answer to "who is this", so it is worked out once per request, here,
and never again. ``KeyBook`` is built once per plan (``KeyBook.of``): the secrets of ``key_env`` keys
live in it as SHA-256 digests (memory only, never in the plan, a log or a page), generated keys as their
``hash``. ``KeyBook.caller`` costs one digest and one dictionary lookup, whatever the number of keys.

Where to hook (credits, audit, tracing): a row of the feature table (``runtime/features``); the keys
feature authenticates (``lifecycle._handle`` calls its hook) before the body is read
and stores the ``Caller`` on ``RequestRecord.caller`` (``journal.py``); the record is finished, with
its status, candidate and usage, in ``Journal.finish``. ``Caller.key_id`` and ``Caller.tenant`` are
safe to log (None for an anonymous caller under ``auth: off|optional``); ``Caller.key_limits`` and
``Caller.tenant_limits`` hold the compiled ``credits``/``credits_unit`` and rates; the answer's tokens
(usage) are on ``RequestRecord.tokens``. The secret is never on the ``Caller``. ``Caller.targets``
holds, per alias whose chain the caller's ``denied`` patterns cut, the alias without those candidates:
the lifecycle walks that instead (built at plan load, one lookup per request).

Outcomes of ``authenticate``: auth ``off`` -> ``ANONYMOUS`` without reading a header; no key ->
``ANONYMOUS`` under ``optional``, ``Unauthenticated`` under ``required``; a key the book does not know
-> ``Unauthenticated`` (whatever the mode: a wrong key is never silently anonymous); a known key -> its
``Caller``.

Operators: the routes of ``OPERATOR_PATHS`` show the whole fleet (every tenant's and key's budget and
usage, the workers). When the plan declares at least one ``operator: true`` key (``KeyBook.operators``),
``admit`` refuses them to every other caller: ``OperatorOnly`` (403) for a valid key,
``Unauthenticated`` (401) for an anonymous one; the test is ``Caller.operator``, set at plan load. A plan
with no operator key answers them to any valid key, as before operators existed (``IL820`` says so).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from interlock.common.apikeys import (
    SECRET_SUFFIXES,
    bad_prefix,
    key_id_of,
    parse_hash,
    secret_like,
    verify,
    weak_secret,
)
from interlock.common.envnames import not_a_credential
from interlock.common.patterns import allows, matches
from interlock.common.vendors import vendor_of
from interlock.runtime.base.errors import (
    CredentialMissing,
    OperatorOnly,
    PlanError,
    TwoKeys,
    Unauthenticated,
    whole_seconds,
)
from interlock.runtime.loaded.callers import ANONYMOUS, Budget, Caller, Header, Refusal, Turn, operator_route
from interlock.schema.plan import PlanAccess, PlanLimits, RoutingPlan

if TYPE_CHECKING:
    from interlock.runtime.loaded.tables import Target

KEY_HEADERS = (b"authorization", b"x-api-key")  # where a caller key may come (read for the audit line)

_BEARER = b"bearer "


@dataclass(frozen=True, slots=True)
class KeyBook:
    """Every caller key of one plan, ready for one-lookup recognition."""

    mode: str  # "off" | "optional" | "required"
    by_digest: Mapping[bytes, Caller]  # SHA-256 of a `key_env` secret -> its caller
    by_id: Mapping[str, tuple[bytes, bytes, Caller]]  # generated keys: id -> (salt, digest, caller)
    operators: bool = False  # some key is an operator: the operator routes answer only operators
    verified: dict[bytes, Caller] = field(default_factory=dict)  # generated keys seen: SHA-256 -> caller

    @classmethod
    def of(
        cls,
        access: PlanAccess,
        mode: str,
        env: Mapping[str, str],
        aliases: Mapping[str, Target],
        candidates: Iterable[str],
    ) -> KeyBook:
        """The book for a plan; ``env`` holds the ``key_env`` secrets (already checked to be set)."""
        by_digest: dict[bytes, Caller] = {}
        by_id: dict[str, tuple[bytes, bytes, Caller]] = {}
        for key_id, key in sorted(access.keys.items()):
            tenant = access.tenants[key.tenant].limits
            levels = (tenant, key.limits)
            targets = _without_denied(aliases, levels)
            decided = {n: all(allows(level, n) for level in levels) for n in candidates}
            for name in aliases:
                kept = targets.get(name)
                decided[name] = all(allows(level, name) for level in levels) and (
                    kept is None or bool(kept.candidates)
                )
            weight = access.tenants[key.tenant].weight
            priority = key.priority or access.tenants[key.tenant].priority
            interactive, batch = Turn(key.tenant, weight, False), Turn(key.tenant, weight, True)
            caller = Caller(
                key_id=key_id,
                tenant=key.tenant,
                key_limits=key.limits,
                tenant_limits=tenant,
                decided=decided,
                budgets=_budgets(f"k:{key_id}", key.limits) + _budgets(f"t:{key.tenant}", tenant),
                targets={name: t for name, t in targets.items() if t.candidates},
                operator=key.operator,
                account=(key.tenant, key_id),
                credits=key.limits.credits > 0 or tenant.credits > 0,
                offered=", ".join(sorted(name for name in aliases if decided[name])),
                turn=batch if priority == "batch" else interactive,
                turns=(interactive, batch) if key.priority_header else None,
            )
            if key.key_env is not None:
                by_digest[hashlib.sha256(env[key.key_env].encode()).digest()] = caller
            elif key.hash is not None:
                parsed = parse_hash(key.hash)
                assert parsed is not None  # checked when the plan was compiled and loaded
                by_id[key_id] = (*parsed, caller)
        return cls(mode, by_digest, by_id, operators=any(key.operator for key in access.keys.values()))

    def caller(self, key: str) -> Caller | None:
        """The caller ``key`` belongs to, or None."""
        digest = hashlib.sha256(key.encode()).digest()
        found = self.by_digest.get(digest) or self.verified.get(digest)
        if found is not None:
            return found
        key_id = key_id_of(key)
        entry = self.by_id.get(key_id) if key_id is not None else None
        if entry is not None and verify(key, entry[0], entry[1]):
            self.verified[digest] = entry[2]  # one entry per generated key at most: its one secret
            return entry[2]
        return None

    def authenticate(self, headers: Iterable[Header]) -> Caller:
        """The request's caller (see the module docstring for every outcome)."""
        presented = presented_key(headers)
        if presented is None:
            if self.mode == "required":
                raise Unauthenticated(
                    "this gateway needs an API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`"
                )
            return ANONYMOUS
        found = self.caller(presented)
        if found is None:
            raise Unauthenticated("the API key sent is not valid for this gateway")
        return found

    def admit(self, caller: Caller, path: str) -> None:
        """Nothing, unless ``path`` is an operator route, the plan declares operators and ``caller`` is
        not one: then ``OperatorOnly`` for a key, ``Unauthenticated`` for an anonymous caller."""
        if not self.operators or caller.operator:
            return
        route = operator_route(path)
        if route is None:
            return
        if caller.anonymous:
            raise Unauthenticated(
                f"`{route}` needs an operator key: send `Authorization: Bearer <key>` or `x-api-key: <key>`"
            )
        raise OperatorOnly(
            f"key `{caller.key_id}` (tenant `{caller.tenant}`) may not read `{route}`: it shows every "
            "tenant's state and needs an operator key (`operator: true` in the key's entry)"
        )


def _without_denied(aliases: Mapping[str, Target], levels: tuple[PlanLimits, ...]) -> dict[str, Target]:
    """Each alias whose chain holds a candidate a level's ``denied`` names, without those candidates
    (the last one left never spills); an alias left with none is kept empty (the caller may not call it)."""
    denied = [row for level in levels for row in level.denied]
    out: dict[str, Target] = {}
    if not denied:
        return out
    for name, alias in aliases.items():
        kept = [i for i, c in enumerate(alias.candidates) if not any(matches(row, c.id) for row in denied)]
        if len(kept) == len(alias.candidates):
            continue
        spill = [alias.spill[i] for i in kept]
        if spill:
            spill[-1] = None
        out[name] = dataclasses.replace(
            alias,
            candidates=tuple(alias.candidates[i] for i in kept),
            spill=tuple(spill),
            retry=tuple(alias.retry[i] for i in kept) if alias.retry else (),
        )
    return out


def _budgets(name: str, limits: PlanLimits) -> tuple[Budget, ...]:
    rates = (limits.requests_per_minute, limits.tokens_per_minute, limits.max_concurrent)
    return (Budget(name, *rates),) if any(rates) else ()


def refusal_message(caller: Caller, refusal: Refusal) -> str:
    """What a 429 for a caller limit says: whose limit, which one, its value (no other caller named)."""
    kind, _, name = refusal.budget.partition(":")
    whose = f"key `{name}`" if kind == "k" else f"tenant `{name}` (of key `{caller.key_id}`)"
    what = {
        "requests_per_minute": f"{refusal.value} requests per minute",
        "tokens_per_minute": f"{refusal.value} tokens per minute",
        "max_concurrent": f"{refusal.value} requests at once",
    }[refusal.limit]
    return f"{whose} may make {what}, and that is used up; retry in {whole_seconds(refusal.retry_after_s)} s"


def presented_key(headers: Iterable[Header]) -> str | None:
    """The key in ``Authorization: Bearer <key>`` or ``x-api-key``; None when neither is sent. An empty
    one (``Bearer `` from a client with no key set) counts as not sent; two different ones are
    ``TwoKeys`` (which one the caller meant cannot be known, and picking the first let a proxy's
    header decide). The bytes are read as UTF-8, as the secret in ``key_env`` is."""
    found: bytes | None = None
    for name, value in headers:
        if name == b"authorization":
            if value[:7].lower() != _BEARER:
                continue
            value = value[7:]
        elif name != b"x-api-key":
            continue
        key = value.strip()
        if not key:
            continue
        if found is not None and key != found:
            raise TwoKeys(
                "the request carries two different API keys (`Authorization` and `x-api-key`, or one of "
                "them twice); send one"
            )
        found = key
    return None if found is None else found.decode("utf-8", "replace")


# -- a plan's caller keys, checked when it loads ---------------------------------------------------


def key_problems(plan: RoutingPlan) -> list[str]:
    """What is wrong with the plan's caller keys (their tenants, their secret's source)."""
    problems: list[str] = []
    for key_id, key in plan.access.keys.items():
        if key.tenant not in plan.access.tenants:
            problems.append(f"key {key_id} names unknown tenant {key.tenant}")
        if (key.key_env is None) == (key.hash is None) or (
            key.hash is not None and parse_hash(key.hash) is None
        ):
            problems.append(f"key {key_id} needs exactly one of key_env and a well-formed hash")
    return problems


def caller_key_problems(plan: RoutingPlan, sent: Mapping[str, str]) -> list[str]:
    """Each operator prefix that may not mark caller key variables, and each caller key variable that may
    not hold a secret (``sent``: the variables providers send upstream, by provider)."""
    prefixes = tuple(plan.server.key_env_prefixes)
    problems = [
        f"server.key_env_prefixes {prefix!a} {reason}"
        for prefix in prefixes
        if (reason := bad_prefix(prefix)) is not None
    ]
    for key_id, key in sorted(plan.access.keys.items()):
        if key.key_env is not None:
            reason = _caller_variable(key.key_env, sent, prefixes)
            if reason is not None:
                problems.append(f"caller key {key_id} reads its secret from {key.key_env}, which {reason}")
    return problems


def _caller_variable(variable: str, sent: Mapping[str, str], prefixes: tuple[str, ...]) -> str | None:
    reason = not_a_credential(variable)
    if reason is not None:
        return reason
    if variable in sent:
        return f"provider {sent[variable]} sends upstream"
    vendor = vendor_of(variable)
    if vendor is not None:
        return f"holds {vendor.name}'s key, a model vendor's credential"
    if not secret_like(variable, prefixes):
        names = ", ".join(f"*{suffix}" for suffix in SECRET_SUFFIXES)
        return f"is not named as a secret ({names} or a prefix in server.key_env_prefixes)"
    return None


def key_book(
    plan: RoutingPlan, env: Mapping[str, str], origin: str, secrets: list[str], aliases: Mapping[str, Target]
) -> KeyBook:
    """The caller keys of a plan under ``auth: optional|required``: every ``key_env`` variable must be set
    and hold a secret (its value is added to ``secrets``, to be scrubbed from text passed on)."""
    for key in sorted(plan.access.keys.values(), key=lambda k: k.id):
        if key.key_env is None:
            continue
        value = env.get(key.key_env, "")
        if not value:
            raise CredentialMissing(
                f"{origin}: caller key {key.id} needs the variable {key.key_env}, which is not set",
                variable=key.key_env,
            )
        secrets.append(value)
    weak = _weak_key_values(plan, env)
    if weak:
        raise PlanError(f"{origin}: caller keys without a secret: " + "; ".join(weak))
    return KeyBook.of(plan.access, plan.server.auth, env, aliases, plan.candidates)


def _weak_key_values(plan: RoutingPlan, env: Mapping[str, str]) -> list[str]:
    """Each caller key whose variable is set but holds no secret (a path, a short value, the value of a
    variable that is none); the values are never shown."""
    problems: list[str] = []
    for key_id, key in sorted(plan.access.keys.items()):
        if key.key_env is None or not env.get(key.key_env):
            continue
        reason = weak_secret(key.key_env, env)
        if reason is not None:
            problems.append(f"caller key {key_id}: the value of {key.key_env} {reason}")
    return problems
