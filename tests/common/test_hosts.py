"""A URL's host however it is spelt: each spelling of a metadata, link-local or loopback address is
classified as the address a resolver or a NAT64 gateway delivers it to (IL113, IL114)."""

from __future__ import annotations

import pytest

from interlock.common.hosts import host_class


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("169.254.169.254", "metadata"),
        ("2852039166", "metadata"),
        ("0xa9fea9fe", "metadata"),
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64: the gateway translates it to 169.254.169.254
        ("64:ff9b::169.254.169.254", "metadata"),
        ("::a9fe:a9fe", "metadata"),  # IPv4-compatible
        ("::169.254.169.254", "metadata"),
        ("2002:a9fe:a9fe::", "metadata"),  # 6to4
        ("168.63.129.16", "metadata"),  # Azure WireServer
        ("192.0.0.192", "metadata"),  # Oracle Cloud
        ("64:ff9b::a9fe:1", "link-local"),
        ("::a9fe:1", "link-local"),
        ("::1", "loopback"),  # inside ::/96, but loopback, not 0.0.0.1
        ("::", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),
        ("2001:db8::1", None),
        ("64:ff9b::808:808", None),  # 8.8.8.8 through NAT64: somewhere else
        ("64:ff9b:1::a9fe:a9fe", "metadata"),  # the local-use NAT64 /48 (RFC 8215), a /96 inside it
        ("64:ff9b:1:a9fe:a9:fe00::", "metadata"),  # ... with the /48 itself: bits 64-71 skipped
        ("64:ff9b:1:a9:fe:a9fe::", "metadata"),  # ... a /56
        ("64:ff9b:1:0:a9:fea9:fe00:0", "metadata"),  # ... a /64
        ("64:ff9b:1::7f00:1", "loopback"),
        ("64:ff9b:1::a9fe:1", "link-local"),
        ("64:ff9b:1::808:808", None),
        ("64:ff9b:1::", None),  # zeros at every length: no address
        ("api.groq.com", None),
    ],
)
def test_each_spelling_is_classified_as_the_address_it_reaches(host: str, expected: str | None) -> None:
    assert host_class(host) == expected
