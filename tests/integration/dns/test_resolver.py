"""archiver.dns.resolver against a real DNS server on 127.0.0.1 (tests/support/dnsserver.py), over UDP
and TCP."""

from __future__ import annotations

from pathlib import Path

import dns.asyncquery
import dns.flags
import dns.message
import dns.rcode
import pytest
import trio

from archiver.dns.resolver import Answer, RefreshStats, Resolver, refresh
from archiver.store.embedded.dnshistory import DnsHistory
from archiver.store.models import Observation
from tests.support.dnsserver import LOCAL, DnsServer, TestZone, start_dns

TIMEOUT = 0.5
AGES = {"min_age": 100.0, "max_age": 1000.0, "retry_base": 10.0, "retry_max": 80.0}


@pytest.fixture
async def served(nursery: trio.Nursery) -> tuple[TestZone, DnsServer, Resolver, int]:
    zone = TestZone()
    server = DnsServer(zone)
    port = await nursery.start(server.serve)
    return zone, server, Resolver(nameservers=[f"{LOCAL}:{port}"], timeout=TIMEOUT), port


async def test_server_answers_like_an_authoritative_server(served):
    zone, server, _, port = served
    zone.set("alias.test", cname="www.test", ttl=30)
    zone.set("www.test", a=["192.0.2.1"])
    response = await dns.asyncquery.udp(dns.message.make_query("alias.test", "A"), LOCAL, port=port)
    assert response.flags & dns.flags.AA
    assert [(r.name.to_text(), r.rdtype.name, [d.to_text() for d in r]) for r in response.answer] == [
        ("alias.test.", "CNAME", ["www.test."]),
        ("www.test.", "A", ["192.0.2.1"]),
    ]
    nodata = await dns.asyncquery.udp(dns.message.make_query("www.test", "AAAA"), LOCAL, port=port)
    assert nodata.rcode() == dns.rcode.NOERROR and nodata.answer == []
    unknown = await dns.asyncquery.udp(dns.message.make_query("nx.test", "A"), LOCAL, port=port)
    assert unknown.rcode() == dns.rcode.NXDOMAIN
    zone.set("many.test", a=[f"10.0.0.{i}" for i in range(1, 61)])
    big = dns.message.make_query("many.test", "A")
    cut = await dns.asyncquery.udp(big, LOCAL, port=port, raise_on_truncation=False)
    assert cut.flags & dns.flags.TC and cut.answer == []
    whole = await dns.asyncquery.tcp(big, LOCAL, port=port)
    assert len(whole.answer[0]) == 60 and not whole.flags & dns.flags.TC
    assert server.queries[-2:] == [("many.test", "A", "udp"), ("many.test", "A", "tcp")]


async def test_a_and_aaaa_in_answer_order(served):
    zone, server, resolver, _ = served
    zone.set("www.example.test", a=["192.0.2.9", "192.0.2.1"], aaaa=["2001:db8:0:0:0:0:0:1"], ttl=300)
    zone.set("v4.test", a=["192.0.2.3"], ttl=20)
    zone.set("v6.test", aaaa=["2001:DB8::6"], ttl=40)
    answer = await resolver.resolve("WWW.Example.Test.")
    assert answer == Answer(
        "www.example.test",
        Observation(
            "www.example.test", "www.example.test", (), ("192.0.2.9", "192.0.2.1", "2001:db8::1"), 300.0
        ),
        "ok",
        300.0,
    )
    assert sorted(server.queries) == [("www.example.test", t, "udp") for t in ("A", "AAAA")]
    v4 = await resolver.resolve("v4.test")
    assert v4.observation.addresses == ("192.0.2.3",) and v4.ttl == 20.0
    v6 = await resolver.resolve("v6.test")
    assert v6.observation.addresses == ("2001:db8::6",) and v6.ttl == 40.0


async def test_cname_chain(served):
    zone, _, resolver, _ = served
    zone.set("alias.test", cname="mid.test", ttl=30)
    zone.set("mid.test", cname="host.test", ttl=400)
    zone.set("host.test", a=["192.0.2.7"], aaaa=["2001:db8::7"], ttl=600)
    answer = await resolver.resolve("alias.test")
    assert answer.outcome == "ok"
    assert answer.observation == Observation(
        "alias.test", "host.test", ("alias.test", "mid.test"), ("192.0.2.7", "2001:db8::7"), 30.0
    )
    assert answer.ttl == 30.0  # the smallest TTL along the chain


async def test_many_addresses_fall_back_to_tcp(served):
    zone, server, resolver, _ = served
    many = [f"10.0.{i // 250}.{i % 250 + 1}" for i in range(300)]
    zone.set("many.test", a=many)
    answer = await resolver.resolve("many.test")
    assert answer.observation.addresses == tuple(many)
    assert ("many.test", "A", "udp") in server.queries and ("many.test", "A", "tcp") in server.queries
    assert ("many.test", "AAAA", "tcp") not in server.queries  # its empty answer fits in UDP


async def test_failures_are_outcomes(served):
    zone, _, resolver, _ = served
    zone.set("dangling.test", cname="gone.test")
    zone.servfail("broken.test")
    outcomes = {
        name: (await resolver.resolve(name))
        for name in ("nx.test", "dangling.test", "broken.test", "bad..name")
    }
    assert {name: a.outcome for name, a in outcomes.items()} == {
        "nx.test": "nxdomain",
        "dangling.test": "nxdomain",
        "broken.test": "servfail",
        "bad..name": "error",
    }
    assert all(a.observation is None and a.ttl == 0.0 for a in outcomes.values())


async def test_name_without_addresses_is_an_empty_observation(served):
    zone, _, resolver, _ = served
    zone.set("empty.test")
    zone.set("alias.test", cname="empty.test", ttl=30)
    negative = float(dns.message.NEGATIVE_TTL_WITHOUT_SOA)  # the server sends no SOA
    assert await resolver.resolve("empty.test") == Answer(
        "empty.test", Observation("empty.test", "empty.test", (), (), negative), "no-address", negative
    )
    assert (await resolver.resolve("alias.test")).observation == Observation(
        "alias.test", "empty.test", ("alias.test",), (), 30.0
    )


async def test_blackholed_name_times_out_within_the_budget(served):
    zone, server, resolver, _ = served
    zone.blackhole("hole.test")
    started = trio.current_time()
    answer = await resolver.resolve("hole.test")
    took = trio.current_time() - started
    assert answer.outcome == "timeout" and answer.observation is None
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 0.2
    assert {q for q in server.queries if q[0] == "hole.test"} == {
        ("hole.test", "A", "udp"),
        ("hole.test", "AAAA", "udp"),
    }


async def test_closed_port_is_a_timeout_not_an_exception():
    # Nothing listens on this UDP port of 127.0.0.1; dnspython ignores the ICMP errors (unconnected socket).
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    await sock.bind((LOCAL, 0))
    port = sock.getsockname()[1]
    sock.close()
    answer = await Resolver(nameservers=[f"{LOCAL}:{port}"], timeout=0.3).resolve("www.test")
    assert answer.outcome == "timeout" and answer.observation is None


async def test_blackholed_name_does_not_stall_the_pass(served, tmp_path: Path):
    zone, _, resolver, _ = served
    names = [f"site{i}.test" for i in range(20)]
    for i, name in enumerate(names):
        zone.set(name, a=[f"192.0.2.{i + 1}"])
    zone.blackhole("hole.test")
    seen: list[tuple[int, int, dict[str, int]]] = []
    with DnsHistory(tmp_path / "dns.sqlite") as history:
        stats = await refresh(
            history,
            resolver,
            ["hole.test", *names],
            now=lambda: 1000.0,
            force=False,
            concurrency=4,
            progress=lambda s: seen.append((s.asked, s.ok, dict(s.failed))),
            **AGES,
        )
        assert (stats.asked, stats.ok, stats.failed) == (21, 20, {"timeout": 1})
        # One worker waits out the blackhole while the three others resolve the twenty names.
        assert stats.elapsed < TIMEOUT + 0.4
        assert seen[-2:] == [(20, 20, {}), (21, 20, {"timeout": 1})]  # the twenty first, the blackhole last
        assert all(history.current(name).addresses == (f"192.0.2.{i + 1}",) for i, name in enumerate(names))
        hole = history.state("hole.test")
        assert (hole.outcome, hole.failures, hole.checked, hole.next_check) == ("timeout", 1, 1000.0, 1010.0)
        assert history.current("hole.test") is None


async def test_answer_the_history_refuses_is_recorded_as_an_error(nursery: trio.Nursery, tmp_path: Path):
    zone = TestZone()
    zone.set("odd.test", cname="10.1")  # valid DNS, but "10.1" reads as an address to the history
    zone.set("10.1", a=["192.0.2.1"])
    zone.set("fine.test", a=["192.0.2.2"])
    resolver = Resolver(nameservers=[f"{LOCAL}:{await start_dns(nursery, zone)}"], timeout=TIMEOUT)
    with DnsHistory(tmp_path / "dns.sqlite") as history:
        stats = await refresh(
            history, resolver, ["odd.test", "fine.test"], now=lambda: 50.0, force=True, **AGES
        )
        assert (stats.ok, stats.failed) == (1, {"error": 1})
        assert history.state("odd.test").outcome == "error" and history.current("odd.test") is None
        assert history.current("fine.test").addresses == ("192.0.2.2",)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def addresses_at(history: DnsHistory, name: str, when: float) -> tuple[str, tuple[str, ...]] | None:
    resolved = history.at(name, when)
    return None if resolved is None else (resolved.canonical, resolved.addresses)


async def test_refresh_records_changes_between_passes(served, tmp_path: Path):
    zone, _, resolver, _ = served
    zone.set("www.a.test", a=["192.0.2.1"], ttl=60)
    zone.set("alias.test", cname="www.a.test", ttl=60)
    zone.set("www.b.test", a=["198.51.100.1"], aaaa=["2001:db8::b"], ttl=5000)
    names = ["www.a.test", "alias.test", "www.b.test", "127.0.0.1", "[::1]", "10.1"]
    clock = Clock(1000.0)
    with DnsHistory(tmp_path / "dns.sqlite") as history:

        async def run(force: bool = False) -> RefreshStats:
            # One at a time, so that the names are recorded in a known order within a pass.
            return await refresh(history, resolver, names, now=clock, force=force, concurrency=1, **AGES)

        first = await run()
        assert (first.asked, first.ok, first.changed, first.failed) == (3, 3, 3, {})  # literals skipped
        assert history.state("www.a.test").next_check == 1100.0  # ttl 60 raised to min_age
        assert history.state("www.b.test").next_check == 2000.0  # ttl 5000 lowered to max_age

        clock.t = 1050.0
        assert (await run()).asked == 0  # nothing due yet
        zone.set("www.a.test", a=["192.0.2.1", "192.0.2.2"], ttl=60)
        clock.t = 1200.0
        second = await run()
        assert (second.asked, second.changed) == (2, 1)  # www.b.test not due; alias.test sees it recorded

        zone.set("www.a.test", a=["192.0.2.2"], ttl=60)
        clock.t = 1400.0
        third = await run(force=True)
        assert (third.asked, third.changed) == (3, 1)

        zone.set("alias.test", cname="www.b.test", ttl=60)
        clock.t = 1600.0
        assert (await run()).changed == 1

        a, b = ("www.a.test", ("192.0.2.2",)), ("www.b.test", ("198.51.100.1", "2001:db8::b"))
        assert [addresses_at(history, "alias.test", t) for t in (999.0, 1100.0, 1300.0, 1500.0, 1700.0)] == [
            None,
            ("www.a.test", ("192.0.2.1",)),
            ("www.a.test", ("192.0.2.1", "192.0.2.2")),
            a,
            b,
        ]
        assert [addresses_at(history, "www.a.test", t) for t in (999.0, 1000.0, 1200.0, 1400.0, 1700.0)] == [
            None,
            ("www.a.test", ("192.0.2.1",)),
            ("www.a.test", ("192.0.2.1", "192.0.2.2")),
            a,
            a,
        ]
        assert history.current("alias.test").aliases == ("alias.test",)
        assert history.current("alias.test").id == history.current("www.b.test").id
        rows = [(r.value, r.type, r.entered, r.superseded) for r in history.history("www.a.test")]
        assert rows == [
            ("www.a.test", "canonical", 1000.0, None),
            ("192.0.2.1", "address", 1000.0, 1400.0),
            ("alias.test", "alias", 1000.0, 1600.0),
            ("192.0.2.2", "alias", 1200.0, 1400.0),
            ("192.0.2.2", "address", 1400.0, None),
        ]

        # A SERVFAIL keeps the history and backs off; NXDOMAIN is definitive and waits min_age.
        zone.servfail("www.a.test")
        clock.t = 1700.0
        assert (await run(force=True)).failed == {"servfail": 1}
        assert history.state("www.a.test").next_check == 1710.0
        clock.t = 1710.0
        assert (await run()).failed == {"servfail": 1}
        state = history.state("www.a.test")
        assert (state.outcome, state.failures, state.next_check) == ("servfail", 2, 1730.0)
        assert addresses_at(history, "www.a.test", 1720.0) == a
        zone.remove("www.a.test")
        clock.t = 1730.0
        assert (await run()).failed == {"nxdomain": 1}
        state = history.state("www.a.test")
        assert (state.outcome, state.failures, state.next_check) == ("nxdomain", 3, 1830.0)
        assert history.current("www.a.test") is None and addresses_at(history, "www.a.test", 1729.0) == a

        # www.b.test loses its addresses but still exists: its address rows go, its names stay.
        zone.set("www.b.test")
        clock.t = 1900.0
        last = await run(force=True)
        assert (last.ok, last.changed, last.failed) == (0, 1, {"nxdomain": 1, "no-address": 2})
        assert addresses_at(history, "alias.test", 1900.0) == ("www.b.test", ())
        assert addresses_at(history, "alias.test", 1899.0) == b
        assert history.state("www.b.test").outcome == "no-address"


@pytest.mark.parametrize(("raised", "outcome"), [(OSError("network is unreachable"), "error"),
                                                 (EOFError(), "error"),
                                                 (TypeError("a bug"), None),
                                                 (KeyError("a bug"), None)])
async def test_only_dns_and_network_errors_become_outcomes(served, monkeypatch, raised, outcome):
    _, _, resolver, _ = served

    def make_query(*args: object, **kwargs: object) -> dns.message.Message:
        raise raised

    # dnspython builds each query with make_query before any I/O, outside its per-nameserver guard.
    monkeypatch.setattr(dns.message, "make_query", make_query)
    if outcome is not None:
        answer = await resolver.resolve("www.test")
        assert answer == Answer("www.test", None, outcome, 0.0)
        return
    with pytest.raises(ExceptionGroup) as caught:
        await resolver.resolve("www.test")
    assert caught.value.exceptions and all(e is raised for e in caught.value.exceptions)
