"""Where a plan's credentials are read from and sent to, checked once when the plan loads.

The compiler refuses these with a position (IL111, IL117, IL120, IL821, IL823); a plan file can be written by
hand, so the runtime asks again before it reads a single variable. The value of a caller key's variable
is checked only here (and by the compiler with ``--require-env``, IL822): only the serving process sees
the environment it runs in, and a variable whose name says "secret" can still hold a path or ``80``.
Each function returns the problems as phrases; ``plan.py`` raises them as one ``PlanError``.
"""

from __future__ import annotations

from collections.abc import Mapping

from interlock.common.envnames import SECRET_SUFFIXES, bad_prefix, not_a_credential, secret_like
from interlock.common.vendors import stray_hosts, unlisted_hosts, vendor_of
from interlock.schema.plan import PlanProvider, RoutingPlan


def credential_problems(plan: RoutingPlan) -> list[str]:
    """Each variable that may not hold what the plan reads from it, and each host a provider's key may
    not go to; empty when all is well."""
    problems: list[str] = []
    sent = {p.api_key_env: name for name, p in sorted(plan.providers.items()) if p.api_key_env}
    for variable, name in sent.items():
        reason = not_a_credential(variable)
        if reason is not None:
            problems.append(f"provider {name} reads its key from {variable}, which {reason}")
    for name, provider in sorted(plan.providers.items()):
        held = provider.api_key_env
        if held is None or not_a_credential(held) is not None:
            continue
        vendor = vendor_of(held)
        owner = f"{vendor.name}'s key, " if vendor is not None else ""
        urls = _urls(plan, provider)
        for host in stray_hosts(held, urls, provider.api_key_hosts):
            where = f"{owner}not listed in its api_key_hosts"
            problems.append(f"provider {name} sends {held} ({where}) to {host}")
        for host in unlisted_hosts(held, urls, provider.api_key_hosts):
            where = "no model vendor's key, to a host off this network not listed in its api_key_hosts"
            problems.append(f"provider {name} sends {held} ({where}) to {host}")
    prefixes = tuple(plan.server.key_env_prefixes)
    for prefix in prefixes:
        reason = bad_prefix(prefix)
        if reason is not None:
            problems.append(f"server.key_env_prefixes {prefix!a} {reason}")
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


def _urls(plan: RoutingPlan, provider: PlanProvider) -> list[str]:
    urls = [provider.base_url] if provider.base_url else []
    return urls + [plan.workers[w].url for w in provider.workers if w in plan.workers]


def weak_key_values(plan: RoutingPlan, env: Mapping[str, str]) -> list[str]:
    """Each caller key whose variable is set but holds no secret (a path, a short value, the value of a
    variable that is none); the values are never shown."""
    from interlock.common.apikeys import weak_secret  # caller keys' rules: a plan with keys only

    problems: list[str] = []
    for key_id, key in sorted(plan.access.keys.items()):
        if key.key_env is None or not env.get(key.key_env):
            continue
        reason = weak_secret(key.key_env, env)
        if reason is not None:
            problems.append(f"caller key {key_id}: the value of {key.key_env} {reason}")
    return problems
