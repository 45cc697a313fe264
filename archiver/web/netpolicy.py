"""Which addresses the crawler may connect to (pure logic, no I/O).

A public page must not make the crawler fetch from the network the crawler runs in (its own
services, a cloud metadata endpoint, the office LAN) and then hand what came back to anyone through
the replay. The HTTP client asks ``refusal`` about the very address it is about to connect to, so
what counts is where the connection goes, whatever name, notation, redirect or DNS answer led there.

Refused, unless inside one of ``crawl.allowed_networks``: the ranges of ``NON_PUBLIC``, each with
its reason: unspecified, loopback, link-local, private (RFC 1918, RFC 4193 unique-local,
deprecated site-local), shared CGNAT space (RFC 6598), multicast, and the other ranges IANA's
special-purpose registries do not mark globally reachable (reserved: documentation, benchmarking,
6to4 relay anycast, 240.0.0.0/4, discard-only, IETF protocol assignments, SRv6 SIDs); anything
else Python's ``ipaddress`` does not call global is refused as reserved too. IPv6 forms that carry
an IPv4 address are judged by that address too: IPv4-mapped (``::ffff:a.b.c.d``), 6to4
(``2002::/16``), NAT64 (``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48``) and Teredo's client
address. The systemd units deny every range of ``NON_PUBLIC`` in the kernel too (``IPAddressDeny=``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))

# Every range refused as it is, with the reason given, first match wins (so an address inside a
# range keeps the reason of the narrower one listed before it).
NON_PUBLIC: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(network), reason) for network, reason in (
        ("0.0.0.0/32", "unspecified"),
        ("0.0.0.0/8", "reserved"),  # "this network"
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "cgnat"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
        ("192.0.2.0/24", "reserved"),  # documentation (TEST-NET-1)
        ("192.88.99.0/24", "reserved"),  # 6to4 relay anycast (deprecated)
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "reserved"),  # benchmarking
        ("198.51.100.0/24", "reserved"),  # documentation (TEST-NET-2)
        ("203.0.113.0/24", "reserved"),  # documentation (TEST-NET-3)
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # future use, and the limited broadcast address
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("100::/64", "reserved"),  # discard-only
        ("2001::/23", "reserved"),  # IETF protocol assignments (Teredo, ORCHID...)
        ("2001:db8::/32", "reserved"),  # documentation
        ("3fff::/20", "reserved"),  # documentation
        ("5f00::/16", "reserved"),  # SRv6 SIDs
        ("fc00::/7", "private"),  # unique-local
        ("fe80::/10", "link-local"),
        ("fec0::/10", "private"),  # site-local (deprecated)
        ("ff00::/8", "multicast"),
    ))


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """CIDR strings (``"127.0.0.0/8"``, ``"::1/128"``, a bare address) -> networks; ValueError
    names the first bad one."""
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ValueError(f"not a network in CIDR notation: {value!r}") from None
    return tuple(out)


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64, Teredo client), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in prefix for prefix in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _kind(address: Address) -> str | None:
    """Why ``address`` is not a public one, or None."""
    for network, reason in NON_PUBLIC:
        if network.version == address.version and address in network:
            return reason
    return None if address.is_global else "reserved"


def refusal(ip: str, allowed: Sequence[Network] = ()) -> str | None:
    """Why the crawler must not connect to ``ip`` (a short reason), or None if it may."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return "not an address"
    inner = embedded_ipv4(address)
    judged = [address] if inner is None else [address, inner]
    if any(a in net for a in judged for net in allowed if a.version == net.version):
        return None
    for candidate in reversed(judged):  # the IPv4 address inside first: it says where it goes
        reason = _kind(candidate)
        if reason is not None:
            return reason if candidate is address else f"{reason} (inside {address})"
    return None
