"""The DNS history's contract (``store.interfaces.DnsHistoryStore``), run against every backend: the
SQLite file and the PostgreSQL tables on a real server. Only the interface is used."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from archiver.store.embedded.dnshistory import DnsHistory
from archiver.store.interfaces import DnsHistoryStore
from archiver.store.models import NameState, Observation
from archiver.store.postgres.dnshistory import PgDnsHistory

A, B, C, D = "192.0.2.1", "192.0.2.2", "2001:db8::c", "198.51.100.4"
OpenHistory = Callable[..., DnsHistoryStore]


@pytest.fixture(params=["sqlite", "postgresql"])
def open_history(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenHistory]:
    """Opens handles (``readonly``) on one DNS history; all closed after the test."""
    opened: list[DnsHistoryStore] = []
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_store_url")

        def make(*, readonly: bool = False) -> DnsHistoryStore:
            opened.append(PgDnsHistory(url, readonly=readonly))
            return opened[-1]
    else:

        def make(*, readonly: bool = False) -> DnsHistoryStore:
            opened.append(DnsHistory(tmp_path / "dns.sqlite", readonly=readonly))
            return opened[-1]

    yield make
    for history in opened:
        history.close()


@pytest.fixture
def db(open_history: OpenHistory) -> DnsHistoryStore:
    return open_history()


def obs(name: str, *addresses: str, canonical: str | None = None, chain: tuple[str, ...] = (),
        source: str = "dns") -> Observation:
    return Observation(name, canonical or name, tuple(chain), addresses, 300.0, source)


def cname(name: str, canonical: str, *addresses: str) -> Observation:
    return obs(name, *addresses, canonical=canonical, chain=(name,))


def rows(history: DnsHistoryStore, name: str) -> list[tuple[object, ...]]:
    return [(r.value, r.type, r.entered, r.superseded, r.id) for r in history.history(name)]


def addresses_at(history: DnsHistoryStore, name: str, when: float) -> tuple[object, ...] | None:
    found = history.at(name, when)
    return None if found is None else (found.id, found.canonical, found.addresses, found.aliases)


def test_a_host_history_from_first_sight_to_nxdomain(db: DnsHistoryStore) -> None:
    assert db.record(obs("example.org", A), 1000, next_check=1300) is True
    assert db.record(obs("example.org", A, B), 2000, next_check=2300) is True
    assert db.record(obs("example.org", B, A), 2500, next_check=2800) is False  # rotated: no change
    assert db.record(obs("example.org", A), 3000, next_check=3300) is True
    assert db.record(obs("example.org", B, C), 4000, next_check=4300) is True
    assert db.record(obs("example.org", C), 4500, next_check=4800) is True
    www = ("www.example.org",)
    assert db.record(obs("www.example.org", C, canonical="example.org", chain=www), 5000, next_check=5300)
    retarget = obs("www.example.org", D, canonical="edge.cdn.test", chain=(*www, "example.cdn.test"))
    assert db.record(retarget, 6000, next_check=6300) is True
    db.record_failure("www.example.org", "nxdomain", 7000, next_check=7600)

    host1 = [
        ("example.org", "canonical", 1000.0, None, 1),
        (A, "address", 1000.0, 4000.0, 1),
        (B, "alias", 2000.0, 3000.0, 1),
        (B, "address", 4000.0, 4500.0, 1),
        (C, "alias", 4000.0, 4500.0, 1),
        (C, "address", 4500.0, None, 1),
        ("www.example.org", "alias", 5000.0, 6000.0, 1),
    ]
    host2 = [
        ("edge.cdn.test", "canonical", 6000.0, None, 2),
        ("www.example.org", "alias", 6000.0, 7000.0, 2),
        ("example.cdn.test", "alias", 6000.0, None, 2),
        (D, "address", 6000.0, None, 2),
    ]
    assert rows(db, "example.org") == host1
    assert rows(db, "www.example.org") == host1 + host2
    assert rows(db, "example.cdn.test") == host2
    numbers = [r.row for r in db.history("www.example.org")]
    assert numbers == sorted(set(numbers))

    expected = {
        999: None,
        1000: (1, "example.org", (A,), ()),
        1999.5: (1, "example.org", (A,), ()),
        2000: (1, "example.org", (A, B), ()),
        3000: (1, "example.org", (A,), ()),
        4000: (1, "example.org", (B, C), ()),
        4500: (1, "example.org", (C,), ()),
        5000: (1, "example.org", (C,), www),
        6000: (1, "example.org", (C,), ()),
    }
    assert {t: addresses_at(db, "example.org", t) for t in expected} == expected
    www_expected = {
        4999: None,
        5000: (1, "example.org", (C,), www),
        6000: (2, "edge.cdn.test", (D,), (*www, "example.cdn.test")),
        6999: (2, "edge.cdn.test", (D,), (*www, "example.cdn.test")),
        7000: None,
    }
    assert {t: addresses_at(db, "www.example.org", t) for t in www_expected} == www_expected
    assert db.current("www.example.org") is None
    now = db.current("Example.ORG.")
    assert now is not None and now.addresses == (C,)
    at_5000 = db.at("www.example.org", 5000)
    assert at_5000 is not None and at_5000.name == "www.example.org"
    assert [r.value for r in at_5000.rows] == ["example.org", C, "www.example.org"]
    assert db.state("www.example.org") == NameState("www.example.org", 7000.0, 7600.0, "nxdomain", 1)
    assert db.state("example.org") == NameState("example.org", 4500.0, 4800.0, "ok", 0)


def test_recording_the_same_observation_again_changes_only_the_state(db: DnsHistoryStore) -> None:
    seen = obs("www.example.org", A, B, canonical="example.org", chain=("www.example.org",))
    assert db.record(seen, 1000, next_check=1300) is True
    before = db.history("www.example.org")
    assert db.record(seen, 1300, next_check=1600) is False
    assert db.history("www.example.org") == before
    assert db.state("www.example.org") == NameState("www.example.org", 1300.0, 1600.0, "ok", 0)


def test_names_of_one_canonical_host_share_its_id_and_ids_survive_a_vanishing(db: DnsHistoryStore) -> None:
    db.record(obs("example.org", A), 1000, next_check=0)
    db.record(cname("www.example.org", "example.org", A), 1100, next_check=0)
    db.record(obs("other.org", A), 1300, next_check=0)  # same address, another host: not merged
    found = [db.current(n) for n in ("example.org", "www.example.org", "other.org")]
    assert [f.id if f else None for f in found] == [1, 1, 2]
    db.record_failure("example.org", "nxdomain", 2000, next_check=0)
    assert db.current("example.org") is None and db.current("www.example.org") is None
    assert db.record(obs("example.org", C), 3000, next_check=0) is True
    back = db.current("example.org")
    assert back is not None and (back.id, back.addresses) == (1, (C,))
    assert db.at("example.org", 2500) is None


def test_a_canonical_name_that_becomes_a_cname_takes_its_host_along(db: DnsHistoryStore) -> None:
    db.record(obs("old.test", A, B), 1000, next_check=0)
    db.record(cname("www.old.test", "old.test", A, B), 1000, next_check=0)
    db.record(cname("old.test", "new.test", C), 2000, next_check=0)
    assert db.current("www.old.test") is None
    now = db.current("old.test")
    assert now is not None and (now.id, now.canonical, now.aliases, now.addresses) == (
        2, "new.test", ("old.test",), (C,))
    db.record(obs("old.test", A), 3000, next_check=0)
    back = db.current("old.test")
    assert back is not None and (back.id, back.canonical, back.aliases) == (1, "old.test", ())


def test_failures_count_and_only_nxdomain_supersedes(db: DnsHistoryStore) -> None:
    db.record(obs("example.org", A), 1000, next_check=1300)
    db.record_failure("example.org", "servfail", 1300, next_check=1400)
    db.record_failure("Example.org.", "timeout", 1400, next_check=1600)
    still = db.current("example.org")
    assert still is not None and still.addresses == (A,)
    assert db.state("example.org") == NameState("example.org", 1400.0, 1600.0, "timeout", 2)
    assert db.record(obs("example.org", A), 1600, next_check=1900) is False
    state = db.state("example.org")
    assert state is not None and state.failures == 0
    db.record_failure("never-seen.test", "nxdomain", 1700, next_check=2000)
    assert db.state("never-seen.test") == NameState("never-seen.test", 1700.0, 2000.0, "nxdomain", 1)
    assert db.history("never-seen.test") == []
    with pytest.raises(ValueError, match="failure outcome"):
        db.record_failure("example.org", "ok", 1800, next_check=0)


def test_an_answer_without_addresses_keeps_the_names(db: DnsHistoryStore) -> None:
    db.record(cname("www.example.org", "example.org", A, B), 1000, next_check=0)
    assert db.record(cname("www.example.org", "example.org"), 2000, next_check=0)
    now = db.current("www.example.org")
    assert now is not None and (now.canonical, now.addresses, now.aliases) == (
        "example.org", (), ("www.example.org",))
    state = db.state("www.example.org")
    assert state is not None and state.outcome == "no-address"


def test_source_normalisation_and_unicode_names(db: DnsHistoryStore) -> None:
    hosts = obs("Site-A.Demo.", "127.0.0.1", "0:0:0:0:0:0:0:1", "127.0.0.1", source="hosts")
    db.record(hosts, 10, next_check=0)
    found = db.current("site-a.demo")
    assert found is not None and [(r.value, r.type, r.source) for r in found.rows] == [
        ("site-a.demo", "canonical", "hosts"), ("127.0.0.1", "address", "hosts"), ("::1", "alias", "hosts")]
    assert db.current("127.0.0.1") is None and db.at("::1", 10) is None and db.history("::1") == []
    db.record(obs("bücher.example", A), 20, next_check=0)
    unicode_name = db.current("BÜCHER.example")
    assert unicode_name is not None and unicode_name.canonical == "bücher.example"


@pytest.mark.parametrize("bad", [
    Observation("a.test", "b.test", (), (A,), 1),
    Observation("a.test", "a.test", ("a.test",), (A,), 1),
    Observation("10.0.0.1", "10.0.0.1", (), (A,), 1),
    Observation("a.test", "a.test", (), ("999.1.1.1",), 1),
    Observation("a b.test", "a b.test", (), (A,), 1),
])
def test_incoherent_observations_are_refused(db: DnsHistoryStore, bad: Observation) -> None:
    with pytest.raises(ValueError):
        db.record(bad, 10, next_check=0)
    assert db.history("a.test") == [] and db.state("a.test") is None


def test_dates_never_go_backwards(db: DnsHistoryStore) -> None:
    db.record(obs("example.org", A), 1000, next_check=0)
    assert db.record(obs("example.org", B), 900, next_check=0) is True  # the clock stepped back
    assert rows(db, "example.org") == [
        ("example.org", "canonical", 1000.0, None, 1),
        (A, "address", 1000.0, 1000.0, 1),
        (B, "address", 1000.0, None, 1),
    ]


def test_due(db: DnsHistoryStore) -> None:
    db.record(obs("a.test", A), 100, next_check=400)
    db.record(obs("b.test", A), 100, next_check=200)
    db.record_failure("c.test", "timeout", 100, next_check=300)
    assert db.due(99) == []
    assert db.due(300) == ["b.test", "c.test"]
    assert db.due(1000, limit=2) == ["b.test", "c.test"]
    assert db.due(1000) == ["b.test", "c.test", "a.test"]
    asked = ["a.test", "new.test", "C.test.", "b.test", "new.test", "other.test"]
    assert db.due(250, asked) == ["new.test", "other.test", "b.test"]
    assert db.due(250, asked, limit=1) == ["new.test"]
    assert db.due(250, iter(f"n{i}.test" for i in range(1200)))[-1] == "n1199.test"
    assert db.due(0, []) == []


def test_a_reader_sees_the_writes_and_cannot_write(open_history: OpenHistory) -> None:
    writer = open_history()
    writer.record(obs("example.org", A), 1000, next_check=2000)
    reader = open_history(readonly=True)
    found = reader.current("example.org")
    assert found is not None and found.addresses == (A,)
    writer.record(obs("example.org", B), 1500, next_check=2500)
    again = reader.current("example.org")
    assert again is not None and again.addresses == (B,)
    assert reader.due(5000) == ["example.org"]
    with pytest.raises(Exception, match=r"(?i)read-?only"):
        reader.record(obs("example.org", C), 3000, next_check=0)
    still = reader.current("example.org")
    assert still is not None and still.addresses == (B,)


def test_two_handles_share_ids_and_clock(open_history: OpenHistory) -> None:
    one, two = open_history(), open_history()
    one.record(obs("a.test", A), 1000, next_check=0)
    two.record(obs("b.test", B), 2000, next_check=0)
    one.record(cname("www.b.test", "b.test", B), 1500, next_check=0)  # behind two's clock
    assert [(r.value, r.id, r.entered) for r in two.history("www.b.test")] == [
        ("b.test", 2, 2000.0), (B, 2, 2000.0), ("www.b.test", 2, 2000.0)]


def test_writers_at_once_give_each_new_host_its_own_id(open_history: OpenHistory) -> None:
    handles = [open_history() for _ in range(4)]
    start = threading.Barrier(len(handles))
    errors: list[BaseException] = []

    def write(n: int, history: DnsHistoryStore) -> None:
        start.wait()
        try:
            for i in range(15):
                history.record(obs(f"h{n}-{i}.test", A), 1000 + i, next_check=0)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n, h)) for n, h in enumerate(handles)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ids = {handles[0].current(f"h{n}-{i}.test").id for n in range(4) for i in range(15)}  # type: ignore[union-attr]
    assert ids == set(range(1, 61))
