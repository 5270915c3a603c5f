"""Where a plan's credentials are read from and sent to, checked once when the plan loads.

The compiler refuses these with a position (IL111, IL117, IL120, IL821, IL823); a plan file can be
written by hand, so the runtime asks again before it reads a single variable. Caller keys' variables
(and the value each holds: only the serving process sees the environment it runs in, and a variable
whose name says "secret" can still hold a path or ``80``; the compiler checks it with ``--require-env``,
IL822) are checked by ``access.py``, imported by a plan with keys. ``plan.py`` raises the problems
found as one ``PlanError``.
"""

from __future__ import annotations

from interlock.common.envnames import not_a_credential
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
    if plan.server.key_env_prefixes or plan.access.keys:
        from interlock.runtime.loaded.access import caller_key_problems  # caller keys' variables

        problems.extend(caller_key_problems(plan, sent))
    return problems


def _urls(plan: RoutingPlan, provider: PlanProvider) -> list[str]:
    urls = [provider.base_url] if provider.base_url else []
    return urls + [plan.workers[w].url for w in provider.workers if w in plan.workers]
