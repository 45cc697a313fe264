"""Which addresses the crawler may connect to (pure logic, no I/O).

A public page must not make the crawler fetch from the network the crawler runs in (its own
services, a cloud metadata endpoint, the office LAN) and then hand what came back to anyone through
the replay. The HTTP client asks ``refusal`` about the very address it is about to connect to, so
what counts is where the connection goes, whatever name, notation, redirect or DNS answer led there.

Refused, unless inside one of ``crawl.allowed_networks``: unspecified, loopback, link-local,
private (RFC 1918, RFC 4193 unique-local, deprecated site-local), shared CGNAT space (RFC 6598),
multicast, and every other address IANA does not mark globally reachable (reserved, documentation,
benchmarking, 6to4 relay anycast, ...). IPv6 forms that carry an IPv4 address are judged by that
address too: IPv4-mapped (``::ffff:a.b.c.d``), 6to4 (``2002::/16``), NAT64 (``64:ff9b::/96`` and
the local-use ``64:ff9b:1::/48``) and Teredo's client address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
_RFC1918 = tuple(map(ipaddress.IPv4Network, ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")))


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
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if isinstance(address, ipaddress.IPv4Address):
        if any(address in net for net in _RFC1918):
            return "private"
        if address in _CGNAT:
            return "cgnat"
    elif address in _UNIQUE_LOCAL or address in _SITE_LOCAL:
        return "private"
    if address.is_multicast:
        return "multicast"
    if not address.is_global:
        return "reserved"
    return None


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
