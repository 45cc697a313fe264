"""The temporal DNS history on a real SQLite file: rows over time, as-of answers, states, query plans."""

import sqlite3

import pytest

from archiver.store.dnsrows import is_address
from archiver.store.embedded.dnshistory import _ADDRESS, _CURRENT, _HOST_ADDRESSES, AT_QUERY, DnsHistory
from archiver.store.models import DnsRow, NameState, Observation

A, B, C, D = "192.0.2.1", "192.0.2.2", "2001:db8::c", "198.51.100.4"


def obs(name, *addresses, canonical=None, chain=(), source="dns"):
    return Observation(name, canonical or name, tuple(chain), addresses, 300.0, source)


def cname(name, canonical, *addresses):
    """An observation of ``name``, a CNAME straight to ``canonical``."""
    return obs(name, *addresses, canonical=canonical, chain=(name,))


def rows(history, name):
    """(value, type, entered, superseded, id) of every row of the hosts ``name`` ever belonged to."""
    return [(r.value, r.type, r.entered, r.superseded, r.id) for r in history.history(name)]


def addresses_at(history, name, when):
    found = history.at(name, when)
    return None if found is None else (found.id, found.canonical, found.addresses, found.aliases)


@pytest.fixture
def db(tmp_path):
    with DnsHistory(tmp_path / "dns.sqlite") as history:
        yield history


def test_a_host_history_from_first_sight_to_nxdomain(db):
    assert db.record(obs("example.org", A), 1000, next_check=1300) is True
    assert db.record(obs("example.org", A, B), 2000, next_check=2300) is True  # address added
    assert db.record(obs("example.org", B, A), 2500, next_check=2800) is False  # order rotated: no change
    assert db.record(obs("example.org", A), 3000, next_check=3300) is True  # address removed
    assert db.record(obs("example.org", B, C), 4000, next_check=4300) is True  # first address changes
    assert db.record(obs("example.org", C), 4500, next_check=4800) is True  # an alias address promoted
    www = ("www.example.org",)
    assert db.record(obs("www.example.org", C, canonical="example.org", chain=www), 5000, next_check=5300)
    retarget = obs("www.example.org", D, canonical="edge.cdn.test", chain=(*www, "example.cdn.test"))
    assert db.record(retarget, 6000, next_check=6300) is True  # CNAME retargeted to another host
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
    assert [r.row for r in db.history("www.example.org")] == list(range(1, 12))

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
        9999: (1, "example.org", (C,), ()),
    }
    assert {t: addresses_at(db, "example.org", t) for t in expected} == expected
    www_expected = {
        4999: None,
        5000: (1, "example.org", (C,), www),
        5999: (1, "example.org", (C,), www),
        6000: (2, "edge.cdn.test", (D,), (*www, "example.cdn.test")),
        6999: (2, "edge.cdn.test", (D,), (*www, "example.cdn.test")),
        7000: None,
        9999: None,
    }
    assert {t: addresses_at(db, "www.example.org", t) for t in www_expected} == www_expected
    assert db.current("www.example.org") is None
    assert db.current("Example.ORG.").addresses == (C,)
    assert db.current("example.cdn.test").canonical == "edge.cdn.test"
    at_5000 = db.at("www.example.org", 5000)
    assert at_5000.name == "www.example.org"
    assert [(r.row, r.value) for r in at_5000.rows] == [(1, "example.org"), (6, C), (7, "www.example.org")]
    assert db.state("www.example.org") == NameState("www.example.org", 7000.0, 7600.0, "nxdomain", 1)
    assert db.state("example.org") == NameState("example.org", 4500.0, 4800.0, "ok", 0)


def test_recording_the_same_observation_again_changes_only_the_state(db):
    seen = obs("www.example.org", A, B, canonical="example.org", chain=("www.example.org",))
    assert db.record(seen, 1000, next_check=1300) is True
    before = db.history("www.example.org")
    assert db.record(seen, 1300, next_check=1600) is False
    assert db.record(obs("example.org", B, A), 1400, next_check=1700) is False
    assert db.history("www.example.org") == before
    assert db.state("www.example.org") == NameState("www.example.org", 1300.0, 1600.0, "ok", 0)
    assert db.state("example.org") == NameState("example.org", 1400.0, 1700.0, "ok", 0)


def test_names_of_one_canonical_host_share_its_id(db):
    db.record(obs("example.org", A), 1000, next_check=0)
    db.record(cname("www.example.org", "example.org", A), 1100, next_check=0)
    chain = ("img.example.org", "static.example.org")
    db.record(obs("img.example.org", A, canonical="example.org", chain=chain), 1200, next_check=0)
    db.record(obs("other.org", A), 1300, next_check=0)  # same address, another host: not merged
    ids = {n: db.current(n).id for n in ("example.org", "www.example.org", "img.example.org")}
    assert set(ids.values()) == {1}
    assert db.current("static.example.org").aliases == ("www.example.org", *chain)
    assert db.current("other.org").id == 2
    # One name's observation leaves the aliases learnt from other names alone.
    db.record(cname("www.example.org", "example.org", B), 1400, next_check=0)
    assert db.current("img.example.org").addresses == (B,)
    assert db.current("img.example.org").aliases == ("www.example.org", *chain)


def test_a_canonical_host_keeps_its_id_when_it_vanishes_and_returns(db):
    db.record(obs("example.org", A), 1000, next_check=0)
    db.record(cname("www.example.org", "example.org", A), 1000, next_check=0)
    db.record(obs("b.test", B), 1000, next_check=0)
    db.record_failure("example.org", "nxdomain", 2000, next_check=0)
    # The canonical name is gone: its aliases led to it, so they go with it.
    assert db.current("example.org") is None and db.current("www.example.org") is None
    assert db.at("www.example.org", 1999).addresses == (A,)
    assert db.record(obs("example.org", C), 3000, next_check=0) is True
    assert rows(db, "example.org") == [
        ("example.org", "canonical", 1000.0, 2000.0, 1),
        (A, "address", 1000.0, 2000.0, 1),
        ("www.example.org", "alias", 1000.0, 2000.0, 1),
        ("example.org", "canonical", 3000.0, None, 1),
        (C, "address", 3000.0, None, 1),
    ]
    assert db.at("example.org", 2500) is None
    assert db.current("b.test").id == 2


def test_a_canonical_name_that_becomes_a_cname_takes_its_host_along(db):
    db.record(obs("old.test", A, B), 1000, next_check=0)
    db.record(cname("www.old.test", "old.test", A, B), 1000, next_check=0)
    db.record(cname("old.test", "new.test", C), 2000, next_check=0)
    assert [(v, t, s) for v, t, _, s, i in rows(db, "www.old.test") if i == 1] == [
        ("old.test", "canonical", 2000.0),
        (A, "address", 2000.0),
        (B, "alias", 2000.0),
        ("www.old.test", "alias", 2000.0),
    ]
    assert db.current("www.old.test") is None
    now = db.current("old.test")
    assert (now.id, now.canonical, now.aliases, now.addresses) == (2, "new.test", ("old.test",), (C,))
    # And back: the CNAME goes, old.test is canonical again under its old id.
    db.record(obs("old.test", A), 3000, next_check=0)
    back = db.current("old.test")
    assert (back.id, back.canonical, back.aliases) == (1, "old.test", ())
    assert db.at("old.test", 2999).canonical == "new.test"
    assert db.current("new.test").aliases == ()


def test_an_alias_that_becomes_canonical_leaves_its_old_host(db):
    db.record(cname("www.a.test", "a.test", A), 1000, next_check=0)
    db.record(obs("www.a.test", B), 2000, next_check=0)
    assert db.current("a.test").aliases == ()
    assert (db.current("www.a.test").id, db.current("www.a.test").canonical) == (2, "www.a.test")
    assert db.at("www.a.test", 1500).canonical == "a.test"


def test_transient_failures_supersede_nothing_and_count(db):
    db.record(obs("example.org", A), 1000, next_check=1300)
    db.record_failure("example.org", "servfail", 1300, next_check=1400)
    db.record_failure("Example.org.", "timeout", 1400, next_check=1600)
    assert db.current("example.org").addresses == (A,)
    assert db.state("example.org") == NameState("example.org", 1400.0, 1600.0, "timeout", 2)
    assert db.record(obs("example.org", A), 1600, next_check=1900) is False
    assert db.state("example.org").failures == 0
    db.record_failure("never-seen.test", "nxdomain", 1700, next_check=2000)
    assert db.state("never-seen.test") == NameState("never-seen.test", 1700.0, 2000.0, "nxdomain", 1)
    assert db.history("never-seen.test") == []
    with pytest.raises(ValueError, match="failure outcome"):
        db.record_failure("example.org", "ok", 1800, next_check=0)


def test_an_answer_without_addresses_keeps_the_names(db):
    db.record(cname("www.example.org", "example.org", A, B), 1000, next_check=0)
    assert db.record(cname("www.example.org", "example.org"), 2000, next_check=0)
    now = db.current("www.example.org")
    assert (now.canonical, now.addresses, now.aliases) == ("example.org", (), ("www.example.org",))
    assert db.state("www.example.org").outcome == "no-address"
    db.record(obs("example.org", B), 3000, next_check=0)
    last = db.current("example.org").rows[-1]
    assert (last.value, last.type, last.entered) == (B, "address", 3000.0)


def test_source_and_normalisation_are_kept(db):
    hosts = obs("Site-A.Demo.", "127.0.0.1", "0:0:0:0:0:0:0:1", "127.0.0.1", source="hosts")
    db.record(hosts, 10, next_check=0)
    assert [(r.value, r.type, r.source) for r in db.current("site-a.demo").rows] == [
        ("site-a.demo", "canonical", "hosts"),
        ("127.0.0.1", "address", "hosts"),
        ("::1", "alias", "hosts"),
    ]
    assert db.current("127.0.0.1") is None and db.at("::1", 10) is None and db.history("::1") == []


@pytest.mark.parametrize(
    "bad",
    [
        Observation("a.test", "b.test", (), (A,), 1),  # a canonical elsewhere with no chain
        Observation("a.test", "b.test", ("x.test",), (A,), 1),  # chain not starting at the name
        Observation("a.test", "a.test", ("a.test",), (A,), 1),  # a loop
        Observation("a.test", "c.test", ("a.test", "b.test", "a.test"), (A,), 1),
        Observation("10.0.0.1", "10.0.0.1", (), (A,), 1),  # an address is not a name
        Observation("a.test", "a.test", (), ("999.1.1.1",), 1),
        Observation("", "", (), (A,), 1),
        Observation("a b.test", "a b.test", (), (A,), 1),
    ],
)
def test_incoherent_observations_are_refused(db, bad):
    with pytest.raises(ValueError):
        db.record(bad, 10, next_check=0)
    assert db.history("a.test") == [] and db.state("a.test") is None


def test_dates_never_go_backwards(db):
    db.record(obs("example.org", A), 1000, next_check=0)
    assert db.record(obs("example.org", B), 900, next_check=0) is True  # the clock stepped back
    assert rows(db, "example.org") == [
        ("example.org", "canonical", 1000.0, None, 1),
        (A, "address", 1000.0, 1000.0, 1),
        (B, "address", 1000.0, None, 1),
    ]
    assert db.at("example.org", 1000).addresses == (B,)


def test_due(db):
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


def test_reopen_and_readonly(tmp_path):
    path = tmp_path / "dns.sqlite"
    with pytest.raises(FileNotFoundError):
        DnsHistory(path, readonly=True)
    with DnsHistory(path) as history:
        history.record(obs("example.org", A), 1000, next_check=2000)
    with DnsHistory(path) as history:
        assert history.record(obs("example.org", A), 2000, next_check=3000) is False
    with DnsHistory(path, readonly=True) as history:
        assert history.current("example.org").addresses == (A,)
        assert history.due(5000) == ["example.org"]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            history.record(obs("example.org", B), 3000, next_check=0)
    check = sqlite3.connect(path)
    # WAL while a writer has it open, a rollback journal once it closed: readable read-only then.
    assert check.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert check.execute("SELECT count(*) FROM dns").fetchone() == (2,)
    check.close()
    with DnsHistory(path) as history:
        assert history._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_two_handles_on_one_file_share_ids_and_clock(tmp_path):
    with DnsHistory(tmp_path / "dns.sqlite") as one, DnsHistory(tmp_path / "dns.sqlite") as two:
        one.record(obs("a.test", A), 1000, next_check=0)
        two.record(obs("b.test", B), 2000, next_check=0)
        one.record(cname("www.b.test", "b.test", B), 1500, next_check=0)  # behind two's clock
        assert [(r.value, r.id, r.entered) for r in two.history("www.b.test")] == [
            ("b.test", 2, 2000.0),
            (B, 2, 2000.0),
            ("www.b.test", 2, 2000.0),
        ]


@pytest.mark.parametrize("analyze", [False, True])
def test_current_and_at_are_index_searches(tmp_path, analyze):
    path = tmp_path / "dns.sqlite"
    with DnsHistory(path) as history:
        for i in range(300):
            history.record(obs(f"h{i}.test", f"10.0.{i // 200}.{i % 200}"), 1000 + i, next_check=0)
        for i in range(300):
            history.record(obs(f"h{i}.test", A), 2000 + i, next_check=0)
        for i in range(300):
            www = f"www.h{i}.test"
            history.record(obs(www, A, canonical=f"h{i}.test", chain=[www]), 3000 + i, next_check=0)
        assert history.at("www.h7.test", 2500) is None and history.at("h7.test", 2500).addresses == (A,)
    db = sqlite3.connect(path)
    if analyze:  # an operator's ANALYZE must not turn the plans into scans
        db.execute("ANALYZE")
    for sql, params in ((_CURRENT, {"name": "h7.test"}), (AT_QUERY, {"name": "h7.test", "when": 1500.0})):
        plan = [detail for *_, detail in db.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        tables = [step for step in plan if not step.startswith("USE TEMP B-TREE")]
        assert len(tables) == 2, plan
        assert all(step.startswith("SEARCH") and " USING INDEX " in step for step in tables), plan
        assert not any("SCAN" in step for step in plan), plan
    db.close()


def test_a_host_shared_by_many_names_reads_only_its_addresses_when_recording(tmp_path):
    path = tmp_path / "dns.sqlite"
    with DnsHistory(path) as history:
        for i in range(200):
            history.record(cname(f"shop{i}.test", "shops.platform.test", A, C), 1000 + i, next_check=0)
        history.record(cname("shop0.test", "shops.platform.test", C, B), 2000, next_check=0)
        assert history.current("shop7.test").addresses == (C, B)
        assert len(history.current("shop7.test").aliases) == 200
    db = sqlite3.connect(path)
    plan = [detail for *_, detail in db.execute(f"EXPLAIN QUERY PLAN {_HOST_ADDRESSES}", (1,))]
    assert plan == ["SEARCH dns USING INDEX dns_address_now (id=?)"]
    # The index's SQL test and is_address agree on every kind of value stored.
    values = ["example.org", "host1", "a1.b2", "1a.test", A, C, "::1", "::ffff:10.0.0.1", "10.0.0.1"]
    db.executemany(
        "INSERT INTO dns (id, value, type, entered, source) VALUES (9, ?, 'alias', 0, 'x')",
        [(v,) for v in values],
    )
    stored = {v for (v,) in db.execute(f"SELECT value FROM dns WHERE id = 9 AND {_ADDRESS}")}
    assert stored == {v for v in values if is_address(v)} == {A, C, "::1", "::ffff:10.0.0.1", "10.0.0.1"}
    db.close()


def test_rows_are_plain_values(db):
    db.record(obs("example.org", A), 1000, next_check=0)
    assert db.history("example.org")[0] == DnsRow(1, 1, "example.org", "canonical", 1000.0, None, "dns")
