"""Name resolution for the crawler: the hosts file, then the DNS history, then (once) DNS.

The hosts file is the operator's override (and how the demo web and the tests map their names to
127.0.0.1); it is read once at start, and each name used from it is recorded in the DNS history
with source ``hosts``. Other names come from the history that ``archiver dns`` keeps fresh ahead of
the crawl, through a small in-memory cache; only a name the service has not resolved yet is
resolved inline, once, and that answer is recorded too (source ``inline``).

A name whose last answer failed is not asked again before its retry time. After a transient failure
(SERVFAIL, timeout) the last known addresses stay in use, as resolvers serving stale data do
(RFC 8767); an NXDOMAIN retires them in the history, so the site is retried later.

The history is read and written in worker threads, one call at a time (``archiver dns`` may hold its
write lock; see :mod:`archiver.store.offloop`). A recording that gives up waiting for that lock is logged and
skipped: the resolution is used all the same.
"""

from __future__ import annotations

import ipaddress
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from archiver.dns.resolver import Answer, Resolver, next_check
from archiver.logs import event
from archiver.store.dnsrows import normalize
from archiver.store.interfaces import DnsHistoryStore
from archiver.store.models import NameState, Observation, Resolved
from archiver.store.offloop import OffLoop, is_busy

log = logging.getLogger("archiver.dns.lookup")


@dataclass(frozen=True)
class Resolution:
    host: str
    addresses: tuple[str, ...]      # empty when the name could not be resolved
    source: str                     # "literal", "hosts", "history" or "dns" (inline)
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
            table.setdefault(normalize(name), []).append(address)
    return table


class Lookup:
    """A site host's addresses: literal, hosts file, DNS history (cached), else DNS inline."""

    def __init__(self, *, hosts_file: Path | None, history: DnsHistoryStore, dns: Resolver,
                 min_age: float, max_age: float, retry_base: float, retry_max: float,
                 cache_size: int = 4096) -> None:
        self.hosts: dict[str, list[str]] = {}
        if hosts_file is not None:
            try:
                self.hosts = parse_hosts(hosts_file.read_text(encoding="utf-8", errors="replace"))
            except FileNotFoundError:
                self.hosts = {}
        self.history = history
        self.dns = dns
        self.ages = {"min_age": min_age, "max_age": max_age, "retry_base": retry_base,
                     "retry_max": retry_max}
        self._cache: OrderedDict[str, tuple[Resolution, float]] = OrderedDict()
        self._cache_size = cache_size
        self._history_calls = OffLoop()

    async def resolve(self, host: str) -> Resolution:
        bare = host.strip("[]")
        try:
            ipaddress.ip_address(bare)
            return Resolution(host, (bare,), "literal")
        except ValueError:
            pass
        now = time.time()
        cached = self._cache.get(host)
        if cached is not None and cached[1] > now:
            self._cache.move_to_end(host)
            return cached[0]
        resolution, until = await self._lookup(host, now)
        self._cache[host] = (resolution, until)
        self._cache.move_to_end(host)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return resolution

    async def _lookup(self, host: str, now: float) -> tuple[Resolution, float]:
        """The resolution of ``host`` and until when it may be used without asking again."""
        min_age = self.ages["min_age"]
        if host in self.hosts:
            addresses = tuple(self.hosts[host])
            await self._record(host, self.history.record,
                               Observation(host, host, (), addresses, min_age, source="hosts"), now,
                               next_check=now + self.ages["max_age"])
            return Resolution(host, addresses, "hosts"), now + min_age
        state, current = await self._history_calls.call(self._known, host, now)
        if state is not None:
            if state.outcome != "ok" and state.next_check > now:
                return Resolution(host, (), "history", state.outcome), state.next_check
            if current is not None and current.addresses:
                return Resolution(host, current.addresses, "history"), now + min_age
        answer = await self.dns.resolve(host)
        failures = (state.failures if state else 0) + 1
        check = next_check(answer, now, failures=failures, **self.ages)
        if answer.observation is not None and not await self._record(
                host, self.history.record, replace(answer.observation, source="inline"), now,
                next_check=check):
            # An answer the history refuses (a CNAME to "10.1", which reads as an address).
            answer = Answer(host, None, "error", 0.0)
            check = next_check(answer, now, failures=failures, **self.ages)
        if answer.outcome != "ok" or answer.observation is None:
            if answer.observation is None:
                await self._record(host, self.history.record_failure, host, answer.outcome, now,
                                   next_check=check)
            return Resolution(host, (), "dns", answer.outcome), check
        return Resolution(host, answer.observation.addresses, "dns"), now + min_age

    def _known(self, host: str, now: float) -> tuple[NameState | None, Resolved | None]:
        """In a worker thread: the history's state of ``host`` and, if it may be used now, its
        current addresses (read only then: the read grows with the host's aliases)."""
        state = self.history.state(host)
        if state is None or (state.outcome != "ok" and state.next_check > now):
            return state, None
        return state, self.history.current(host)

    async def _record(self, host: str, write: Callable[..., object], *args: object,
                      next_check: float) -> bool:
        """``write(*args, next_check=...)`` (a recording about ``host``) in a worker thread; False
        if the history refuses it (ValueError). A write that gives up waiting for the lock is logged
        and skipped (True: the answer stands)."""
        try:
            await self._history_calls.call(write, *args, next_check=next_check)
        except ValueError:
            return False
        except sqlite3.OperationalError as e:
            if not is_busy(e):
                raise
            event(log, logging.WARNING, "dns-history-busy", host=host, error=str(e))
        return True
