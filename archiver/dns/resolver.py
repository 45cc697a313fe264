"""Resolving site hosts ahead of the crawl into the DNS history (dnspython's async resolver on trio).

The crawler never waits on DNS: :func:`refresh` resolves the names that are due and records each answer in
the DNS history (:class:`~archiver.store.interfaces.DnsHistoryStore`), which the crawler then reads.
:func:`next_check` is the pure scheduling rule (the TTL clamped for answers, exponential back-off for
failures).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import dns.asyncresolver
import dns.exception
import dns.name
import dns.nameserver
import dns.resolver
import trio

from archiver.config import parse_nameserver
from archiver.store.dnsrows import normalize
from archiver.store.interfaces import DnsHistoryStore
from archiver.store.models import Observation

# When the A and AAAA queries fail differently, the most telling outcome wins (an authoritative
# NXDOMAIN over a server's failure, a failure over silence).
_FAILURES = ("nxdomain", "servfail", "refused", "timeout", "error")
# Definitive negative answers: re-asking before min_age would only repeat them.
_NEGATIVE = frozenset({"nxdomain", "no-address"})
# What DNS and the network can do to a query; these become the outcome "error". Anything else is a
# bug and propagates. (dnspython itself turns whatever one nameserver's exchange raised into
# NoNameservers, so a malformed answer from a hostile server is an outcome too.)
_NETWORK_ERRORS = (dns.exception.DNSException, OSError, EOFError, trio.BrokenResourceError)


@dataclass(frozen=True)
class Answer:
    name: str
    observation: Observation | None  # None on failure (an empty one for "no-address")
    outcome: str  # "ok", "nxdomain", "servfail", "timeout", "no-address", "refused", "error"
    ttl: float  # smallest TTL of the answer's records (the negative TTL for "no-address"); 0 on failure


@dataclass
class RefreshStats:
    asked: int = 0
    ok: int = 0
    changed: int = 0  # answers that changed the history's rows
    failed: dict[str, int] = field(default_factory=dict)  # outcome -> count
    elapsed: float = 0.0


def _is_literal(name: str) -> bool:
    """An IP address, or digits and dots, which getaddrinfo/inet_aton read as one ("10.1")."""
    if name.replace(".", "").isdigit():
        return True
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


class Resolver:
    """A and AAAA of one name at a time, through the given nameservers (or the system's)."""

    def __init__(self, *, nameservers: Sequence[str], timeout: float) -> None:
        self.timeout = timeout
        self._dns = dns.asyncresolver.Resolver(configure=not nameservers)
        if nameservers:
            self._dns.nameservers = [
                dns.nameserver.Do53Nameserver(*parse_nameserver(ns)) for ns in nameservers
            ]
        self._dns.search = []
        self._dns.cache = None  # every pass must see what the servers answer now
        self._dns.lifetime = timeout
        # Half the budget per try, so a lost UDP datagram is retried once in time (glibc's resolv.conf
        # default is likewise attempts:2); a truncated UDP answer is retried over TCP by dnspython itself.
        self._dns.timeout = timeout / 2

    async def resolve(self, name: str) -> Answer:
        """Resolve ``name``: DNS and network failures are outcomes; a bug raises (in an
        ExceptionGroup, from the nursery of the A and AAAA queries)."""
        name = normalize(name.strip())
        try:
            qname = dns.name.from_text(name)
        except (dns.exception.DNSException, ValueError):
            return Answer(name, None, "error", 0.0)
        results: dict[str, dns.resolver.Answer | str] = {}
        # dnspython's back-off sleeps between tries may overshoot its lifetime: this bounds the whole.
        with trio.move_on_after(self.timeout):
            async with trio.open_nursery() as nursery:
                for rdtype in ("A", "AAAA"):
                    nursery.start_soon(self._query, qname, rdtype, results)
        return _combine(name, results.get("A", "timeout"), results.get("AAAA", "timeout"))

    async def _query(self, qname: dns.name.Name, rdtype: str, results: dict) -> None:
        try:
            results[rdtype] = await self._dns.resolve(qname, rdtype, search=False, raise_on_no_answer=False)
        except dns.resolver.NXDOMAIN:
            results[rdtype] = "nxdomain"
        except dns.resolver.NoNameservers as e:
            results[rdtype] = _server_failure(e)
        except dns.exception.Timeout:
            results[rdtype] = "timeout"
        except _NETWORK_ERRORS:
            results[rdtype] = "error"


def _server_failure(error: dns.resolver.NoNameservers) -> str:
    """What the nameservers said, from dnspython's (server, tcp, port, error, response) list."""
    said = [e[3] for e in error.kwargs.get("errors", [])]
    if "SERVFAIL" in said:
        return "servfail"
    if "REFUSED" in said:
        return "refused"
    if any(isinstance(e, dns.exception.Timeout) for e in said):
        return "timeout"
    return "error"


def _combine(name: str, a: dns.resolver.Answer | str, aaaa: dns.resolver.Answer | str) -> Answer:
    """One Answer from the A and AAAA results.

    A partial result (A answered, AAAA timed out) is a failure: recording it would supersede the
    other family's addresses in the history when nothing changed. A name that exists without A or
    AAAA is an answer ("no-address", an observation without addresses): the history supersedes the
    addresses it had and keeps its names.
    """
    failures = [r for r in (a, aaaa) if isinstance(r, str)]
    if failures:
        return Answer(name, None, min(failures, key=_FAILURES.index), 0.0)
    answers = [r for r in (a, aaaa) if not isinstance(r, str)]
    addresses = tuple(
        dict.fromkeys(
            ipaddress.ip_address(rd.address).compressed for r in answers if r.rrset for rd in r.rrset
        )
    )
    main = next((r for r in answers if r.rrset), answers[0])
    chain = tuple(normalize(rrset.name.to_text()) for rrset in main.chaining_result.cnames)
    if addresses:
        # Positive records only: a no-data AAAA's negative TTL says nothing about the addresses kept.
        records = [
            rrset for r in answers for rrset in [*r.chaining_result.cnames, r.rrset] if rrset is not None
        ]
        ttl = float(min(rrset.ttl for rrset in records))
    else:
        ttl = float(min(r.chaining_result.minimum_ttl for r in answers))  # RFC 2308 negative TTL
    observation = Observation(
        name=name,
        canonical=normalize(main.canonical_name.to_text()),
        chain=chain,
        addresses=addresses,
        ttl=ttl,
    )
    return Answer(name, observation, "ok" if addresses else "no-address", ttl)


def next_check(
    answer: Answer,
    now: float,
    *,
    min_age: float,
    max_age: float,
    failures: int,
    retry_base: float,
    retry_max: float,
) -> float:
    """When to ask again: the TTL clamped to [min_age, max_age] after addresses; after the
    ``failures``-th failure in a row, retry_base doubled each time up to retry_max (and NXDOMAIN or
    no address, which are answers too, not before min_age)."""
    if answer.outcome == "ok":
        return now + min(max(answer.ttl, min_age), max_age)
    delay = min(retry_base * 2.0 ** min(max(failures, 1) - 1, 64), retry_max)
    if answer.outcome in _NEGATIVE:
        delay = max(delay, min_age)
    return now + delay


async def refresh(
    history: DnsHistoryStore,
    resolver: Resolver,
    names: Iterable[str],
    *,
    now: Callable[[], float],
    force: bool,
    concurrency: int = 32,
    min_age: float,
    max_age: float,
    retry_base: float,
    retry_max: float,
    progress: Callable[[RefreshStats], None] | None = None,
) -> RefreshStats:
    """One pass: resolve those of ``names`` that are due (all with ``force``), at most ``concurrency``
    at a time, recording each answer as it arrives. IP literals are skipped: they need no DNS.
    ``progress`` is called with the running stats after each answer.

    ``concurrency`` workers take the names from one iterator (rather than a task per name behind a
    CapacityLimiter), so a pass over a million names holds a million strings, not a million tasks.
    """
    started = trio.current_time()
    wanted = [n for n in dict.fromkeys(normalize(name.strip()) for name in names)
              if n and not _is_literal(n)]
    todo = wanted if force else history.due(now(), wanted)
    stats = RefreshStats()
    ages = {"min_age": min_age, "max_age": max_age, "retry_base": retry_base, "retry_max": retry_max}

    def record(answer: Answer) -> None:
        when = now()
        stats.asked += 1
        if answer.observation is not None:
            try:
                if history.record(answer.observation, when, next_check=following(answer, when)):
                    stats.changed += 1
            except ValueError:  # an answer the history refuses, e.g. a CNAME to "10.1" (an address)
                answer = Answer(answer.name, None, "error", 0.0)
        if answer.observation is None:
            history.record_failure(answer.name, answer.outcome, when, next_check=following(answer, when))
        if answer.outcome == "ok":
            stats.ok += 1
        else:
            stats.failed[answer.outcome] = stats.failed.get(answer.outcome, 0) + 1
        stats.elapsed = trio.current_time() - started
        if progress is not None:
            progress(stats)

    def following(answer: Answer, when: float) -> float:
        failures = 0
        if answer.outcome != "ok":
            state = history.state(answer.name)
            failures = (state.failures if state else 0) + 1
        return next_check(answer, when, failures=failures, **ages)

    pending = iter(todo)

    async def worker() -> None:
        for name in pending:  # shared by the workers: each name is taken by exactly one
            record(await resolver.resolve(name))

    async with trio.open_nursery() as nursery:
        for _ in range(min(concurrency, len(todo))):
            nursery.start_soon(worker)
    stats.elapsed = trio.current_time() - started
    return stats
