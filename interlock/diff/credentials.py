"""Credentials: which variable's value is sent to which host, and which variables are read as secrets.

A config under review is served with the platform's secrets in its environment, so what a reviewer must
see first is where each secret goes: a provider's ``api_key_env`` is sent to every host it calls (its
``base_url``, its workers), before any request, by the probe; a caller key's ``key_env`` is what a caller
must present. A base URL or a variable edited in a pull request reads as a routing change elsewhere; here
it reads as "`GROQ_API_KEY` is now sent to collector.example.net". A host added to a provider's
``api_key_hosts`` is its own change: the line that lets a vendor's key (``OPENAI_API_KEY``) leave the
vendor's hosts. Variable names only, never values.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from interlock.common.vendors import vendor_of
from interlock.diff.change import Change, named
from interlock.schema.plan import PlanKey, PlanProvider, RoutingPlan


def credentials(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Each (variable, host) pair new in ``head``; each key added on a variable; each kept key whose
    secret comes from another place."""
    out: list[Change] = []
    before, after = _sent(base), _sent(head)
    for variable in sorted(after):
        old_hosts = before.get(variable, {})
        for host, providers in sorted(after[variable].items()):
            if host in old_hosts:
                continue
            who = ", ".join(f"`{name}`" for name in providers)
            was = ", ".join(sorted(old_hosts)) or "nowhere"
            summary = f"`{variable}` is now sent to {host} (provider {who}); before: {was}"
            out.append(
                Change(
                    "credential-sent",
                    variable,
                    sorted(old_hosts),
                    sorted(after[variable]),
                    summary,
                    field=host,
                    unit="list",
                )
            )
    for name, provider in sorted(head.providers.items()):
        out.extend(_hosts_allowed(name, base.providers.get(name), provider))
    old_prefixes, new_prefixes = base.server.key_env_prefixes, head.server.key_env_prefixes
    if sorted(old_prefixes) != sorted(new_prefixes):
        shown = ", ".join(f"`{p}*`" for p in new_prefixes) or "none"
        summary = (
            f"caller keys may be read from variables named {shown} beside `*_KEY`, `*_TOKEN`, `*_SECRET`, "
            f"`*_APIKEY` (was {', '.join(f'`{p}*`' for p in old_prefixes) or 'none'})"
        )
        out.append(
            Change(
                "key-prefixes-changed",
                "key_env_prefixes",
                old_prefixes,
                new_prefixes,
                summary,
                unit="list",
            )
        )
    old_keys, new_keys = base.access.keys, head.access.keys
    for key_id in sorted(new_keys.keys() - old_keys.keys()):
        key_env = new_keys[key_id].key_env
        if key_env is not None:
            summary = f"new key `{key_id}` accepts the secret held in `{key_env}`"
            out.append(Change("key-variable-added", key_env, None, key_id, summary, field=key_id))
    for key_id in sorted(new_keys.keys() & old_keys.keys()):
        old, new = _source(old_keys[key_id]), _source(new_keys[key_id])
        if old != new:
            summary = (
                f"key `{key_id}` now takes its secret from {_shown(new)} (was {_shown(old)}): callers "
                "still sending the old secret will be refused"
            )
            out.append(
                Change("key-secret-source-changed", f"keys.{key_id}", old, new, summary, field="secret")
            )
    return out


def _hosts_allowed(name: str, old: PlanProvider | None, new: PlanProvider) -> list[Change]:
    """Each host ``new`` lists in ``api_key_hosts`` that ``old`` did not list for the same variable."""
    variable = new.api_key_env
    if variable is None:
        return []
    before = old.api_key_hosts if old is not None and old.api_key_env == variable else []
    vendor = vendor_of(variable)
    off = f", off {vendor.name}'s hosts" if vendor is not None else ""
    out: list[Change] = []
    for host in sorted(set(new.api_key_hosts) - set(before)):
        summary = f"provider `{name}` may now send `{variable}` to {host}{off} (`api_key_hosts`)"
        out.append(
            Change(
                "key-host-allowed",
                variable,
                sorted(before),
                sorted(new.api_key_hosts),
                summary,
                field=host,
                unit="list",
            )
        )
    return out


def _source(key: PlanKey) -> str:
    return key.key_env if key.key_env is not None else "hash"


def _shown(source: str) -> str:
    return "a `hash`" if source == "hash" else named(source)


def _sent(plan: RoutingPlan) -> dict[str, dict[str, list[str]]]:
    """variable -> host -> the providers sending it there."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, provider in sorted(plan.providers.items()):
        if provider.api_key_env is None:
            continue
        urls = [provider.base_url] if provider.base_url else []
        urls += [plan.workers[w].url for w in provider.workers if w in plan.workers]
        hosts = out.setdefault(provider.api_key_env, {})
        for url in urls:
            senders = hosts.setdefault(_host(url), [])
            if name not in senders:
                senders.append(name)
    return out


def _host(url: str) -> str:
    """`host[:port]` of ``url`` (the port counts: another port is another service), lowercase."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or url, parts.port
    except ValueError:
        return url
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port is not None else shown
