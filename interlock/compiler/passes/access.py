"""tenants + keys -> the plan's access table: ACL patterns parsed, keys tied to a tenant and a secret.

A secret never reaches the plan: a key names the variable holding it (``key_env``) or carries the hash
that ``interlock keys add`` printed. ACL patterns follow the concurrency pattern rules (``patterns.py``);
a name is allowed when the tenant's and the key's ``allowed`` (unset: everything) both match it and no
``denied`` of either does. Prices are resolved per candidate here, so the runtime only looks one up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from interlock.common.apikeys import KEY_ID, parse_hash
from interlock.common.pattern_text import parse_match
from interlock.common.patterns import allows, matches, matching_row, order
from interlock.compiler.context import ApiKey, CompileContext
from interlock.compiler.loader import Entry
from interlock.compiler.passes.providers import ENV_NAME, credential_variable
from interlock.compiler.secrets import looks_like_secret
from interlock.schema.config import Limits, TenantSection
from interlock.schema.plan import PlanAccess, PlanKey, PlanLimits, PlanMatch, PlanPrice, PlanTenant

ACL_LISTS = ("allowed", "denied")
MIN_WEIGHT, MAX_WEIGHT = 0.01, 1000.0  # fair-queuing weights: tags stay exact in Redis's scores


def access(ctx: CompileContext) -> None:
    """Check ``tenants``, ``keys`` and ``pricing``; keep their compiled form for the plan (``ctx.access``)."""
    known = _known_names(ctx)
    tenants: dict[str, PlanTenant] = {}
    for name, tenant in ctx.tenants.items():
        limits = _limits(ctx, tenant.section, tenant.entry, f"tenants.{name}", known)
        weight = _weight(ctx, tenant.section, tenant.entry, name)
        if limits is not None and weight is not None:
            tenants[name] = PlanTenant(
                name=name,
                description=tenant.section.description,
                limits=limits,
                weight=weight,
                priority=tenant.section.priority,
            )
    keys: dict[str, PlanKey] = {}
    for key in ctx.keys.values():
        compiled = _key(ctx, key, known)
        if compiled is not None:
            keys[key.id] = compiled
    _duplicates(ctx)
    for key_id, compiled in keys.items():
        owner = tenants.get(compiled.tenant)
        if owner is not None:
            _some_model(ctx, ctx.keys[key_id], owner.limits, compiled.limits, known)
    _auth_without_keys(ctx)
    _no_operator(ctx, keys)
    pricing = ctx.pricing
    prices = _prices(ctx, known)
    _unpriced(ctx, tenants, keys, prices, known)
    ctx.access = PlanAccess(
        tenants=tenants,
        keys=keys,
        currency=pricing.currency if pricing is not None else "USD",
        prices=prices,
    )


def _known_names(ctx: CompileContext) -> list[str]:
    """Every name a caller may send that the plan declares: aliases, chain candidates, model facts."""
    names = set(ctx.aliases) | set(ctx.models)
    names.update(link.candidate for links in ctx.expanded.values() for link in links)
    return sorted(names)


def _limits(
    ctx: CompileContext, section: Limits, entry: Entry, where: str, known: list[str]
) -> PlanLimits | None:
    """The compiled limits, or None when a pattern is malformed (each one reported)."""
    lists: dict[str, list[PlanMatch] | None] = {}
    for name in ACL_LISTS:
        written: list[str] | None = getattr(section, name)
        if written is None:
            lists[name] = None
            continue
        rows = _patterns(ctx, written, entry, f"{where}.{name}", name, known)
        if rows is None:
            return None
        lists[name] = rows
    return PlanLimits(
        allowed=lists["allowed"],
        denied=lists["denied"] or [],
        requests_per_minute=section.requests_per_minute,
        tokens_per_minute=section.tokens_per_minute,
        max_concurrent=section.max_concurrent,
        credits=section.credits,
        credits_unit=section.credits_unit,
    )


def _patterns(
    ctx: CompileContext, written: list[str], entry: Entry, where: str, field: str, known: list[str]
) -> list[PlanMatch] | None:
    rows: list[PlanMatch] = []
    ok = True
    for index, pattern in enumerate(written):
        row = parse_match(pattern)
        if row is None:
            ok = False
            ctx.sink.add(
                "IL813",
                ctx.span_of(entry, field, index),
                f"`{pattern}` in `{where}` is not a model pattern",
                path=f"{where}[{index}]",
                value=pattern,
                hint="write a name (`mana/fast`, `groq/llama-3.3-70b-versatile`), a prefix ending in one "
                "`*` (`mana/*`) or `*` alone",
            )
            continue
        if not any(matches(row, name) for name in known):
            ctx.sink.add(
                "IL814",
                ctx.span_of(entry, field, index),
                f"`{pattern}` in `{where}` matches no alias and no declared model",
                path=f"{where}[{index}]",
                value=pattern,
                hint="check the spelling against `aliases` and the chains' `provider/model` names",
            )
        rows.append(row)
    return order(rows) if ok else None


def _key(ctx: CompileContext, key: ApiKey, known: list[str]) -> PlanKey | None:
    section, entry, where = key.section, key.entry, f"keys.{key.id}"
    ok = True
    if not KEY_ID.match(key.id):
        ok = False
        ctx.sink.add(
            "IL817",
            entry.key_span,
            f"key id `{key.id}` is not a usable key id",
            path=where,
            value=key.id,
            hint="letters, digits, `-` and `_`, at most 64, starting with a letter or digit "
            "(the id is part of a generated key and names the caller in logs)",
        )
    if section.tenant not in ctx.tenants and not ctx.broken_under(f"tenants.{section.tenant}"):
        ok = False
        declared = ", ".join(f"`{name}`" for name in ctx.tenants) or "none"
        ctx.sink.add(
            "IL811",
            ctx.span_of(entry, "tenant"),
            f"key `{key.id}` belongs to tenant `{section.tenant}`, which is not declared under `tenants`",
            path=f"{where}.tenant",
            value=section.tenant,
            hint=f"declared tenants: {declared}",
        )
    if not _secret(ctx, key):
        ok = False
    limits = _limits(ctx, section, entry, where, known)
    if not ok or limits is None:
        return None
    return PlanKey(
        id=key.id,
        tenant=section.tenant,
        description=section.description,
        key_env=section.key_env,
        hash=section.hash,
        operator=section.operator,
        limits=limits,
        priority=section.priority,
        priority_header=section.priority_header,
    )


def _weight(ctx: CompileContext, section: TenantSection, entry: Entry, name: str) -> float | None:
    """A tenant's fair-queuing weight, or None when it is out of range (reported)."""
    weight = section.weight
    if math.isfinite(weight) and MIN_WEIGHT <= weight <= MAX_WEIGHT:
        return weight
    ctx.sink.add(
        "IL831",
        ctx.span_of(entry, "weight"),
        f"`tenants.{name}.weight` is {weight:g}; a weight is from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}",
        path=f"tenants.{name}.weight",
        value=f"{weight:g}",
        hint="a weight is a share against the other tenants waiting for the same model (2: twice a "
        "weight-1 tenant's); leave it out for 1",
    )
    return None


def _secret(ctx: CompileContext, key: ApiKey) -> bool:
    """Exactly one of ``key_env`` (a variable name) and ``hash`` (well formed, for this key's id)."""
    section, entry, where = key.section, key.entry, f"keys.{key.id}"
    if (section.key_env is None) == (section.hash is None):
        both = section.key_env is not None
        ctx.sink.add(
            "IL816",
            entry.key_span,
            f"key `{key.id}` has {'both `key_env` and `hash`' if both else 'neither `key_env` nor `hash`'}",
            path=where,
            hint="name the variable holding the secret (`key_env: TEAM_KEY`) or paste the `hash` that "
            "`interlock keys add` printed; not both",
        )
        return False
    if section.key_env is not None:
        variable = section.key_env
        if looks_like_secret(variable) or not ENV_NAME.match(variable):
            entry.doc.mark_secret((*entry.path, "key_env"))
            ctx.sink.add(
                "IL816",
                ctx.span_of(entry, "key_env"),
                f"`{where}.key_env` is not a variable name; the value is not shown",
                path=f"{where}.key_env",
                hint="if this is the key itself, replace it and write the name of the variable holding it",
            )
            return False
        span = ctx.span_of(entry, "key_env")
        if not credential_variable(ctx, span, f"{where}.key_env", variable, f"key `{key.id}`'s secret"):
            return False
        if not _own_variable(ctx, key, variable):
            return False
        if ctx.options.require_env and not ctx.options.environ.get(variable):
            ctx.sink.add(
                "IL105",
                ctx.span_of(entry, "key_env"),
                f"key variable `{variable}` of key `{key.id}` is not set (or empty)",
                path=f"{where}.key_env",
                value=variable,
                hint=f"export {variable}=... in the deployment environment",
            )
        return True
    assert section.hash is not None
    if parse_hash(section.hash) is None:
        ctx.sink.add(
            "IL816",
            ctx.span_of(entry, "hash"),
            f"`{where}.hash` is not `hmac-sha256$<32 hex salt>$<64 hex digest>`",
            path=f"{where}.hash",
            hint="paste the line `interlock keys add --tenant T --id ID` printed",
        )
        return False
    return True


def _own_variable(ctx: CompileContext, key: ApiKey, variable: str) -> bool:
    """A caller key's variable is no provider's: the provider's key would let anyone who holds it in,
    and the caller's secret would be sent upstream (two keys sharing one is IL812)."""
    for name, provider in ctx.providers.items():
        if provider.section.api_key_env != variable:
            continue
        ctx.sink.add(
            "IL111",
            ctx.span_of(key.entry, "key_env"),
            f"`keys.{key.id}.key_env` is `{variable}`, which provider `{name}` sends upstream as its key; "
            "a caller's secret may not be a provider's credential",
            path=f"keys.{key.id}.key_env",
            value=variable,
            hint=f"give key `{key.id}` a variable of its own (`interlock keys add` makes a secret)",
        )
        return False
    return True


def _duplicates(ctx: CompileContext) -> None:
    """Two keys on one variable or one hash would be the same caller under two ids."""
    seen: dict[str, str] = {}
    for key in ctx.keys.values():
        section = key.section
        for field, value in (("key_env", section.key_env), ("hash", section.hash)):
            if value is None:
                continue
            first = seen.setdefault(f"{field}:{value}", key.id)
            if first != key.id:
                shown = value if field == "key_env" else "the same hash"
                ctx.sink.add(
                    "IL812",
                    ctx.span_of(key.entry, field),
                    f"keys `{first}` and `{key.id}` share {f'`{shown}`' if field == 'key_env' else shown}",
                    path=f"keys.{key.id}.{field}",
                    value=value if field == "key_env" else None,
                    hint="every key needs a secret of its own (`interlock keys add` makes one)",
                )


def _some_model(
    ctx: CompileContext, key: ApiKey, tenant: PlanLimits, own: PlanLimits, known: list[str]
) -> None:
    """A key that may call nothing declared is a mistake (its tenant or its own lists shut it out; an
    alias whose every candidate is denied counts as shut)."""
    denied = [*tenant.denied, *own.denied]
    for name in known:
        if not (allows(tenant, name) and allows(own, name)):
            continue
        chain = [link.candidate for link in ctx.expanded.get(name, [])] if name in ctx.aliases else [name]
        if any(not any(matches(row, c) for row in denied) for c in chain):
            return  # callable, and (an alias) with a candidate left after `denied`
    ctx.sink.add(
        "IL815",
        key.entry.key_span,
        f"key `{key.id}` may call no alias and no declared model: its own `allowed`/`denied` and those "
        f"of tenant `{key.section.tenant}` leave nothing",
        path=f"keys.{key.id}",
        value=key.id,
        hint="widen `allowed` (e.g. `mana/*`) or narrow `denied`",
    )


def _auth_without_keys(ctx: CompileContext) -> None:
    if ctx.server.auth != "required" or ctx.keys or ctx.sources.named["keys"]:
        return
    entry = ctx.sources.singletons["server"]  # `auth: required` is written there
    ctx.sink.add(
        "IL818",
        ctx.span_of(entry, "auth"),
        "`server.auth` is `required` but no key is declared, so every request would be refused",
        path="server.auth",
        value="required",
        hint="declare keys under `keys` (`interlock keys add --tenant T --id ID` prints one)",
    )


def _no_operator(ctx: CompileContext, keys: dict[str, PlanKey]) -> None:
    """With keys read and none an operator, the fleet's state (every tenant's and key's budget and usage,
    the workers) is shown to any valid key: allowed, for the configs written before operators, but said."""
    if ctx.server.auth == "off" or not keys or any(key.operator for key in keys.values()):
        return
    first = ctx.keys[next(iter(keys))]
    ctx.sink.add(
        "IL820",
        first.entry.key_span,
        f"no key is an operator, so any valid key ({len(keys)} declared) can read every tenant's and "
        "key's budget and usage, and the workers' state, on `/ui`, `/v1/health`, `/v1/metadata` and "
        "`/api/ps`",
        path="keys",
        hint=f"set `operator: true` on the keys of the people who run the gateway (`keys.{first.id}."
        "operator`, say); every other key then gets 403 on those routes",
    )


def _unpriced(
    ctx: CompileContext,
    tenants: dict[str, PlanTenant],
    keys: dict[str, PlanKey],
    prices: dict[str, PlanPrice],
    known: list[str],
) -> None:
    """A budget in money needs a price for every model its caller may reach: unpriced ones cost 0."""
    aliases = ctx.aliases
    reachable: dict[str, list[str]] = {
        name: [link.candidate for link in ctx.expanded.get(name, [])] if name in aliases else [name]
        for name in known
    }
    levels: list[tuple[str, Entry, list[PlanLimits]]] = [
        (f"tenants.{name}", ctx.tenants[name].entry, [t.limits]) for name, t in tenants.items()
    ]
    levels += [
        (f"keys.{key_id}", ctx.keys[key_id].entry, [k.limits, tenants[k.tenant].limits])
        for key_id, k in keys.items()
        if k.tenant in tenants
    ]
    for where, entry, chain in levels:
        own = chain[0]
        if own.credits_unit != "money" or not own.credits:
            continue
        missing = sorted(
            {
                cid
                for name, candidates in reachable.items()
                if all(allows(level, name) for level in chain)
                for cid in candidates
                if "/" in cid and cid not in prices
            }
        )
        if not missing:
            continue
        shown = ", ".join(f"`{cid}`" for cid in missing[:3])
        if len(missing) > 3:
            shown += f" and {len(missing) - 3} more"
        ctx.sink.add(
            "IL819",
            ctx.span_of(entry, "credits_unit"),
            f"`{where}` keeps credits in money, but models it may call have no price (they would "
            f"cost nothing): {shown}",
            path=f"{where}.credits_unit",
            value="money",
            hint="add them to `pricing.models` (a pattern such as `groq/*` covers a provider)",
        )


def _prices(ctx: CompileContext, known: Iterable[str]) -> dict[str, PlanPrice]:
    """The most specific ``pricing.models`` pattern's price for each declared candidate."""
    pricing = ctx.pricing
    if pricing is None or ctx.broken_under("pricing"):
        return {}
    entry = ctx.sources.singletons["pricing"]
    rows = []
    by_pattern: dict[str, PlanPrice] = {}
    for pattern, price in pricing.models.items():
        row = parse_match(pattern)
        if row is None:
            ctx.sink.add(
                "IL813",
                ctx.key_span_of(entry, "models", pattern),
                f"`{pattern}` in `pricing.models` is not a model pattern",
                path=f"pricing.models.{pattern}",
                value=pattern,
                hint="a `provider/model` name, a prefix ending in one `*` (`groq/*`) or `*` alone",
            )
            continue
        rows.append(row)
        by_pattern[pattern] = PlanPrice(input=price.input, output=price.output)
    rows = order(rows)
    candidates = {name for name in known if "/" in name and name not in ctx.aliases}
    prices: dict[str, PlanPrice] = {}
    for name in sorted(candidates):
        row = matching_row(rows, name)
        if row is not None:
            prices[name] = by_pattern[row.pattern]
    return prices
