"""Destinations: a provider's credential -> the hosts it may be sent to (vendor keys bound to vendor hosts).

A vendor's variable (``OPENAI_API_KEY``, ``HF_TOKEN``: ``interlock.common.vendors``) goes only to that
vendor's hosts, whatever the provider's ``kind``; another host must be written in the provider's
``api_key_hosts``,
a line a reviewer sees (``interlock diff`` reports it as its own change). Any other variable goes off this
network only to a vendor's host or a listed one (IL120): an allow rule, since no list of other systems'
secret names is ever complete. Once a provider lists hosts, the list pins any variable: every host the
provider calls is its vendor's or listed. A provider whose variable or URLs already have a diagnostic is
left alone (a derived error would only repeat it).
"""

from __future__ import annotations

import ipaddress
import re

from interlock.common.vendors import host_of, listed_host, stray_hosts, unlisted_hosts, vendor_of
from interlock.compiler.context import CompileContext, Provider
from interlock.compiler.passes.providers import accepted, called_urls

HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$"
)


def destinations(ctx: CompileContext) -> None:
    """Each provider's ``api_key_hosts`` well formed and used; its credential sent nowhere else."""
    for name, provider in ctx.providers.items():
        if ctx.broken_under(f"providers.{name}"):
            continue
        listed = _listed(ctx, name, provider)
        variable = provider.section.api_key_env
        if listed is None or variable is None or not accepted(variable):
            continue
        urls = called_urls(provider)
        if urls:  # none: IL101, IL102, IL106 or IL107 said why; "never calls" would only repeat it
            _unused(ctx, name, provider, listed, urls)
            _bound(ctx, name, provider, variable, listed, urls)
            _vouched(ctx, name, provider, variable, listed, urls)


def _listed(ctx: CompileContext, name: str, provider: Provider) -> list[str] | None:
    """The provider's ``api_key_hosts`` as hosts, or None when one is malformed (IL118 reported)."""
    entries = provider.section.api_key_hosts
    if entries is None:
        return []
    where = f"providers.{name}.api_key_hosts"
    if provider.section.api_key_env is None:
        ctx.sink.add(
            "IL118",
            ctx.key_span_of(provider.entry, "api_key_hosts"),
            f"`{where}` lists hosts for a credential, but provider `{name}` has no `api_key_env`",
            path=where,
            hint="remove `api_key_hosts`, or name the variable the provider sends in `api_key_env`",
        )
        return None
    hosts: list[str] = []
    for index, entry in enumerate(entries):
        host = listed_host(entry)
        if not _is_host(host):
            ctx.sink.add(
                "IL118",
                ctx.span_of(provider.entry, "api_key_hosts", index),
                f"`{where}[{index}]` is `{entry}`, which is not a host name or an IP address",
                path=f"{where}[{index}]",
                value=entry,
                hint="one host a line, as in the URL, without scheme, port, path or wildcard "
                "(e.g. `llm-proxy.example.net`)",
            )
            return None
        hosts.append(host)
    return hosts


def _is_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return bool(HOST_NAME.match(host))
    return True


def _unused(ctx: CompileContext, name: str, provider: Provider, listed: list[str], urls: list[str]) -> None:
    """A listed host the provider never calls is a permission waiting for a later `base_url` edit."""
    called = {host_of(url) for url in urls}
    for index, host in enumerate(listed):
        if host in called:
            continue
        ctx.sink.add(
            "IL119",
            ctx.span_of(provider.entry, "api_key_hosts", index),
            f"`providers.{name}.api_key_hosts[{index}]` is `{host}`, which provider `{name}` never calls; "
            "a later edit of its URLs could send the key there without a new line under review",
            path=f"providers.{name}.api_key_hosts[{index}]",
            value=host,
            hint=f"remove `{host}`; the provider calls {', '.join(sorted(called)) or 'no host'}",
        )


def _bound(
    ctx: CompileContext, name: str, provider: Provider, variable: str, listed: list[str], urls: list[str]
) -> None:
    vendor = vendor_of(variable)
    where = f"providers.{name}.api_key_env"
    for host in stray_hosts(variable, urls, listed):
        if vendor is not None:
            message = (
                f"`{where}` is `{variable}`, {vendor.name}'s key, and provider `{name}` sends it to "
                f"`{host}`, which is not {vendor.name}'s ({', '.join(vendor.domains)})"
            )
            hint = (
                f"point the provider at {vendor.name}'s API, or give `{host}` a variable of its own; if the "
                f"key truly belongs there (a proxy in front of {vendor.name}), say so: "
                f"`api_key_hosts: [{host}]`"
            )
        else:
            message = (
                f"`{where}` is `{variable}`, and provider `{name}` sends it to `{host}`, which its "
                "`api_key_hosts` does not list"
            )
            hint = f"add `{host}` to `api_key_hosts` if the key belongs there, or fix the URL"
        ctx.sink.add(
            "IL117",
            ctx.span_of(provider.entry, "api_key_env"),
            message,
            path=where,
            value=variable,
            hint=hint,
        )


def _vouched(
    ctx: CompileContext, name: str, provider: Provider, variable: str, listed: list[str], urls: list[str]
) -> None:
    """A variable no vendor's table knows leaves this network only for a host the config names (IL120):
    its name alone never says whose key it holds (``NOMAD_TOKEN``, ``CI_JOB_JWT``, ...)."""
    where = f"providers.{name}.api_key_env"
    for host in unlisted_hosts(variable, urls, listed):
        ctx.sink.add(
            "IL120",
            ctx.span_of(provider.entry, "api_key_env"),
            f"`{where}` is `{variable}`, no model vendor's key, and provider `{name}` sends it to `{host}`, "
            "a host off this network that `api_key_hosts` does not list",
            path=where,
            value=variable,
            hint=f"if `{variable}` holds the key of the service at `{host}`, say so: "
            f"`api_key_hosts: [{host}]` (a line a reviewer sees, and `interlock diff` reports); otherwise "
            "name the variable that holds its key",
        )
