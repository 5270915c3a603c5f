"""What a URL's host is, however it is spelt: a cloud metadata or link-local address, this machine, this
network, or somewhere else.

A base URL receives the provider's key with every request and probe, from the gateway's network position:
pointed at ``169.254.169.254`` it reads the cloud's instance credentials, pointed at loopback it reaches
services that trust local callers, and anywhere off this network it hands the key to whoever runs the
host. Resolvers accept many spellings of one address (``2852039166``, ``0xa9fea9fe``,
``0251.0376.0251.0376``, ``169.254.43518``, ``::ffff:169.254.169.254``), so the host is read the way
``inet_aton`` reads it before it is classified; an IPv6 address that carries an IPv4 one (mapped
``::ffff:0:0/96``, NAT64 ``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48``, IPv4-compatible
``::/96``, 6to4 ``2002::/16``) is classified as that IPv4 address, since a NAT64 gateway or a dual stack
delivers it there. Names are not resolved: the compiler has no network, and DNS can answer differently
at run time; a name is this network's when it has one label (``gpu-box``, a container's service) or ends
in a suffix no registry delegates (``LOCAL_SUFFIXES``).

Shared ground: the compiler (IL113, IL114, IL120) and the runtime, when it loads a plan, read hosts here.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

HostClass = Literal["metadata", "link-local", "loopback", "private"]

METADATA_NAMES = frozenset(
    ("metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal")
)
"""Names clouds give their instance-metadata service (Google's, AWS's)."""

METADATA_ADDRESSES = frozenset(
    (
        ipaddress.ip_address("169.254.169.254"),  # AWS, Google, Azure, OpenStack, ...
        ipaddress.ip_address("169.254.170.2"),  # AWS ECS task credentials
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("168.63.129.16"),  # Azure WireServer (extensions, the host's agent)
        ipaddress.ip_address("192.0.0.192"),  # Oracle Cloud's instance metadata
        ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    )
)

PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
"""This network's addresses: RFC 1918, shared address space (RFC 6598: carrier NAT, Tailscale), IPv6
unique local addresses."""

LOCAL_SUFFIXES = ("local", "internal", "lan", "home", "corp", "localdomain", "home.arpa")
"""Name suffixes no public registry delegates (mDNS, ICANN's private-use `.internal`, RFC 8375, and
those ICANN keeps undelegated for the collisions they cause): such a name is resolved on this network."""

NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
"""The well-known NAT64 prefix (RFC 6052): the last 32 bits are the IPv4 address reached."""
LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
"""The local-use NAT64 prefix (RFC 8215): a network translates with a prefix of 48 to 96 bits inside it,
so the IPv4 address sits where RFC 6052 puts it for that length; every such reading is classified."""
RFC6052_LENGTHS = (48, 56, 64, 96)
COMPATIBLE = ipaddress.IPv6Network("::/96")
"""IPv4-compatible addresses (RFC 4291, deprecated): ``::a9fe:a9fe`` is 169.254.169.254 on many stacks."""

_PART = re.compile(r"^(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$")


def host_class(host: str) -> HostClass | None:
    """``metadata``, ``link-local``, ``loopback`` or ``private`` (this network) for ``host`` (a URL's
    hostname, without brackets), or None for any other host: one off this network."""
    name = host.lower().rstrip(".")
    if name in METADATA_NAMES:
        return "metadata"
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback"
    address = _address(name)
    if address is None:
        local = "." not in name or name.endswith(tuple(f".{suffix}" for suffix in LOCAL_SUFFIXES))
        return "private" if local and name else None
    reached = _embedded(address) if isinstance(address, ipaddress.IPv6Address) else [address]
    found = {_class(one) for one in reached}
    return next((kind for kind in CLASSES if kind in found), None)


CLASSES: tuple[HostClass, ...] = ("metadata", "link-local", "loopback", "private")
"""The classes in the order a host that may reach several addresses is given one: the worst."""


def _class(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> HostClass | None:
    if address in METADATA_ADDRESSES:
        return "metadata"
    if address.is_link_local:
        return "link-local"
    if address.is_loopback or address.is_unspecified:  # 0.0.0.0 and :: connect to this machine
        return "loopback"
    if any(address in network for network in PRIVATE_NETWORKS):
        return "private"
    return None


def _embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The IPv4 addresses an IPv6 one may carry (mapped, NAT64, IPv4-compatible, 6to4), else itself;
    ``::`` and ``::1`` stay themselves (unspecified and loopback, not 0.0.0.0 and 0.0.0.1)."""
    if address in LOCAL_NAT64:  # zeros read at another length than the network's say nothing
        readings = (_rfc6052(address, length) for length in RFC6052_LENGTHS)
        return [reading for reading in readings if not reading.is_unspecified]
    embedded = address.ipv4_mapped or address.sixtofour
    if embedded is None and (address in NAT64 or (address in COMPATIBLE and int(address) > 1)):
        embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return [embedded if embedded is not None else address]


def _rfc6052(address: ipaddress.IPv6Address, length: int) -> ipaddress.IPv4Address:
    """The IPv4 address in ``address`` under a NAT64 prefix of ``length`` bits (RFC 6052, 2.2): it
    follows the prefix, skipping bits 64 to 71."""
    bits = int(address)
    if length == 96:
        return ipaddress.IPv4Address(bits & 0xFFFFFFFF)
    if length == 64:
        return ipaddress.IPv4Address((bits >> 24) & 0xFFFFFFFF)
    before = 64 - length  # bits of the IPv4 address between the prefix and bit 64
    high = (bits >> 64) & ((1 << before) - 1)
    low = (bits >> (128 - 72 - (32 - before))) & ((1 << (32 - before)) - 1)
    return ipaddress.IPv4Address(high << (32 - before) | low)


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``name`` spells, reading IPv4 as ``inet_aton`` does (1-4 parts, each decimal, octal
    with a leading 0, or hex with 0x; the last part fills the remaining bytes)."""
    if ":" in name:
        try:
            return ipaddress.IPv6Address(name.split("%", 1)[0])
        except ValueError:
            return None
    parts = name.split(".")
    if not 1 <= len(parts) <= 4 or not all(_PART.match(p) for p in parts):
        return None
    values = [_number(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(parts)):
        return None
    number = 0
    for value in head:
        number = number * 256 + value
    number = number * 256 ** (5 - len(parts)) + last
    return ipaddress.IPv4Address(number)


def _number(part: str) -> int:
    if part[:2] in ("0x", "0X"):
        return int(part[2:] or "0", 16)
    return int(part, 8 if part.startswith("0") else 10)
