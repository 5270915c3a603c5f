"""A URL's host however it is spelt: each spelling of a metadata, link-local or loopback address is
classified as the address a resolver or a NAT64 gateway delivers it to (IL113, IL114)."""

from __future__ import annotations

import pytest

from interlock.compiler.hosts import host_class


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
        ("api.groq.com", None),
    ],
)
def test_each_spelling_is_classified_as_the_address_it_reaches(host: str, expected: str | None) -> None:
    assert host_class(host) == expected
