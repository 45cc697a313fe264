"""Name resolution for the crawler: a hosts file first, then DNS through dnspython.

The hosts file is the operator's override (and how the demo web and the tests map their names to
127.0.0.1); it is read once at start. Everything else goes to dnspython's async resolver on trio,
with the nameservers from ``dns.nameservers`` or, when that list is empty, the system's.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver


@dataclass(frozen=True)
class Resolution:
    host: str
    addresses: tuple[str, ...]      # empty when the name could not be resolved
    source: str                     # "literal", "hosts" or "dns"
    error: str | None = None        # "nxdomain", "servfail", "timeout", "no-address", ...


def parse_hosts(text: str) -> dict[str, list[str]]:
    """Map each name in hosts-file ``text`` to its addresses, in file order."""
    table: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        try:
            address = str(ipaddress.ip_address(fields[0].split("%", 1)[0]))
        except ValueError:
            continue
        for name in fields[1:]:
            table.setdefault(name.lower().rstrip("."), []).append(address)
    return table


def parse_nameserver(entry: str) -> tuple[str, int]:
    """``"host"`` or ``"host:port"`` (IPv6 as ``"[::1]:53"`` or bare) -> (host, port)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 53
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, int(port)
    return entry, 53


class Resolver:
    """Resolves site host names: literals, then the hosts file, then DNS (A, then AAAA)."""

    def __init__(self, *, hosts_file: Path | None, nameservers: tuple[str, ...],
                 timeout: float) -> None:
        self.hosts: dict[str, list[str]] = {}
        if hosts_file is not None:
            try:
                self.hosts = parse_hosts(hosts_file.read_text(encoding="utf-8", errors="replace"))
            except FileNotFoundError:
                self.hosts = {}
        self._dns = dns.asyncresolver.Resolver(configure=not nameservers)
        if nameservers:
            self._dns.nameservers = [dns.nameserver.Do53Nameserver(*parse_nameserver(ns))
                                     for ns in nameservers]
        self._dns.lifetime = timeout
        self._dns.timeout = timeout

    async def resolve(self, host: str) -> Resolution:
        bare = host.strip("[]")
        try:
            ipaddress.ip_address(bare)
            return Resolution(host, (bare,), "literal")
        except ValueError:
            pass
        if host in self.hosts:
            return Resolution(host, tuple(self.hosts[host]), "hosts")
        addresses: list[str] = []
        error = None
        for rdtype in ("A", "AAAA"):
            try:
                answer = await self._dns.resolve(host, rdtype, search=False)
                addresses.extend(r.to_text() for r in answer)
            except dns.resolver.NXDOMAIN:
                return Resolution(host, (), "dns", "nxdomain")
            except dns.resolver.NoAnswer:
                continue
            except dns.resolver.NoNameservers:
                error = "servfail"
            except dns.exception.Timeout:
                error = "timeout"
            except dns.exception.DNSException as e:
                error = type(e).__name__.lower()
            if addresses:
                break
        if addresses:
            return Resolution(host, tuple(addresses), "dns")
        return Resolution(host, (), "dns", error or "no-address")
