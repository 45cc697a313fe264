"""Which addresses the crawler may connect to (archiver.web.netpolicy)."""

from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.netpolicy import NON_PUBLIC, embedded_ipv4, parse_networks, refusal
from tests.support.fuzzing import examples


@pytest.mark.parametrize(("ip", "reason"), [
    ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"),
    ("192.168.1.1", "private"), ("fd00::1", "private"), ("fec0::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),      # cloud metadata, IPv6 LL
    ("100.64.0.1", "cgnat"), ("100.127.255.254", "cgnat"),
    ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("240.0.0.1", "reserved"), ("192.0.2.1", "reserved"), ("198.18.0.1", "reserved"),
    ("2001:db8::1", "reserved"), ("0.1.2.3", "reserved"),
    ("::ffff:127.0.0.1", "loopback (inside ::ffff:7f00:1)"),
    ("::ffff:10.0.0.1", "private (inside ::ffff:a00:1)"),
    ("2002:a9fe:a9fe::1", "link-local (inside 2002:a9fe:a9fe::1)"),           # 6to4 of 169.254.169.254
    ("64:ff9b::7f00:1", "loopback (inside 64:ff9b::7f00:1)"),                # NAT64 of 127.0.0.1
    ("64:ff9b:1::c0a8:101", "private (inside 64:ff9b:1::c0a8:101)"),          # local-use NAT64
    ("not-an-ip", "not an address"), ("", "not an address"),
])
def test_non_public_addresses_are_refused(ip, reason):
    assert refusal(ip) == reason


@pytest.mark.parametrize("ip", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8",
                                "2002:808:808::1", "64:ff9b::808:808", "172.32.0.1", "100.128.0.1"])
def test_public_addresses_pass(ip):
    assert refusal(ip) is None


def test_allowed_networks_open_exactly_what_they_name():
    allowed = parse_networks(["127.0.0.1/32", "fd12::/16"])
    assert refusal("127.0.0.1", allowed) is None
    assert refusal("::ffff:127.0.0.1", allowed) is None                    # the same address
    assert refusal("127.0.0.2", allowed) == "loopback"
    assert refusal("fd12::5", allowed) is None
    assert refusal("fd13::5", allowed) == "private"


def test_parse_networks_names_the_bad_entry():
    assert parse_networks(["10.0.0.0/8", "::1", "192.168.1.7/24"])[2] == ipaddress.ip_network(
        "192.168.1.0/24")
    with pytest.raises(ValueError, match=re.escape("'10.0.0.0/33'")):
        parse_networks(["10.0.0.0/33"])


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_an_ipv4_address_and_its_ipv6_wrappings_get_one_verdict(number):
    v4 = ipaddress.IPv4Address(number)
    plain = refusal(str(v4))
    for wrapped in (ipaddress.IPv6Address(f"::ffff:{v4}"),
                    ipaddress.IPv6Address((0x0064FF9B << 96) | number)):
        assert embedded_ipv4(wrapped) == v4
        verdict = refusal(str(wrapped))
        assert (verdict is None) == (plain is None), (v4, wrapped, verdict)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=45))
def test_refusal_never_raises(text):
    assert refusal(text) is None or isinstance(refusal(text), str)


def _around(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> st.SearchStrategy:
    """Addresses inside ``network`` and just outside its ends."""
    first, last = int(network.network_address), int(network.broadcast_address)
    top = 2**network.max_prefixlen - 1
    numbers = st.integers(first, last) | st.sampled_from(
        [n for n in (first - 1, first, last, last + 1) if 0 <= n <= top])
    return numbers.map(lambda n: ipaddress.ip_address(n) if network.version == 4
                       else ipaddress.IPv6Address(n))


ADDRESSES = (st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
             | st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)
             | st.sampled_from([network for network, _ in NON_PUBLIC]).flatmap(_around))


@settings(max_examples=examples(1000), deadline=None)
@given(ADDRESSES)
def test_the_non_public_table_is_what_refusal_refuses(address):
    """NON_PUBLIC lists every range refused as it is (the systemd units deny each one): an
    address is refused for itself exactly when it lies in one, with that entry's reason. Forms
    carrying an IPv4 address are refused for that address too."""
    reason = refusal(str(address))
    inside = [why for network, why in NON_PUBLIC
              if network.version == address.version and address in network]
    if embedded_ipv4(address) is None:
        assert reason == (inside[0] if inside else None)
    elif inside:
        assert reason is not None
