"""The card catalog's contract (``store.interfaces.CatalogStore``), run against every backend:
the SQLite shards under a folder and the PostgreSQL catalog on a real server. Only the interface
is used, so both must answer alike."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archiver.store.catalogkeys import TALLY_ROWS, shard_of, surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.interfaces import CatalogStore
from archiver.store.models import Capture, CatalogError
from archiver.store.postgres.catalog import PgCatalog

OpenCatalog = Callable[..., CatalogStore]
PAGE = "http://example.org/page"


@pytest.fixture(params=["sqlite", "postgresql"])
def open_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenCatalog]:
    """Opens catalogs (``shards``, ``readonly``) on one store; all closed after the test."""
    opened: list[CatalogStore] = []
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_store_url")

        def make(shards: int = 1000, *, readonly: bool = False, digests: bool = False
                 ) -> CatalogStore:
            opened.append(PgCatalog(url, shards, readonly=readonly, digests=digests))
            return opened[-1]
    else:

        def make(shards: int = 1000, *, readonly: bool = False, digests: bool = False
                 ) -> CatalogStore:
            opened.append(Catalog(tmp_path / "catalog", shards, readonly=readonly, digests=digests))
            return opened[-1]

    yield make
    for catalog in opened:
        catalog.close()


def cap(url: str, ts: str, *, filename: str = "A-1.warc.gz", offset: int = 0, **fields: object) -> Capture:
    values: dict[str, object] = {
        "status": 200, "mime": "text/html", "digest": "sha1:" + "A" * 32, "redirect": None, "length": 1234,
    }
    values.update(fields)
    return Capture(urlkey=surt_key(url), timestamp=ts, url=url, filename=filename, offset=offset, **values)


def stamps(captures: object) -> list[str]:
    return [c.timestamp for c in captures]  # type: ignore[attr-defined]


def urls(captures: object) -> list[str]:
    return [c.url for c in captures]  # type: ignore[attr-defined]


def host_in_shard(shard: int, shards: int) -> str:
    for n in range(10_000):
        name = f"other{n}.test"
        if shard_of(surt_key(name), shards) == shard:
            return name
    raise AssertionError("no host found")


@pytest.fixture
def catalog(open_catalog: OpenCatalog) -> CatalogStore:
    c = open_catalog()
    c.add([
        cap(PAGE, "20200101000000", offset=1),
        cap(PAGE, "20200101000010", offset=2),
        cap(PAGE, "20200131000000", offset=3),
        cap(PAGE, "20200201000000", offset=4),
        cap("https://www.example.org/page", "20210615120000", offset=5),  # same key: www and scheme fold
        cap("http://example.org/other", "20200101000005", offset=6),
    ])
    return c


def test_closest_before_first_after_last_and_exact(catalog: CatalogStore) -> None:
    assert catalog.closest(PAGE, "19960101000000").timestamp == "20200101000000"
    assert catalog.closest(PAGE, "20260101000000").timestamp == "20210615120000"
    hit = catalog.closest(PAGE, "20200131000000")
    assert hit is not None and (hit.timestamp, hit.offset) == ("20200131000000", 3)
    found = catalog.closest("https://WWW.example.org/page", "20210601000000")
    assert found is not None and found.offset == 5


def test_closest_tie_goes_to_the_earlier_and_gaps_are_measured_in_time(catalog: CatalogStore) -> None:
    assert catalog.closest(PAGE, "20200101000005").timestamp == "20200101000000"
    assert catalog.closest(PAGE, "20200101000006").timestamp == "20200101000010"
    assert catalog.closest(PAGE, "20200131120000").timestamp == "20200131000000"
    assert catalog.closest(PAGE, "20200131120001").timestamp == "20200201000000"


def test_closest_of_a_url_never_captured_is_none(catalog: CatalogStore, open_catalog: OpenCatalog) -> None:
    assert catalog.closest("http://example.org/never", "20200101000000") is None
    assert catalog.closest("http://nowhere.example/", "20200101000000") is None
    with pytest.raises(ValueError):
        catalog.closest(PAGE, "2020")
    with pytest.raises(ValueError, match="not a usable URL"):
        catalog.closest("dns:example.org", "20200101000000")


def test_captures_of_one_second_are_told_apart_by_file_and_offset(open_catalog: OpenCatalog) -> None:
    c = open_catalog()
    same = [cap(PAGE, "20200101000000", filename=f, offset=o) for f, o in
            [("B.warc.gz", 7), ("A.warc.gz", 900), ("A.warc.gz", 5)]]
    assert c.add(same) == 3
    assert sorted((x.filename, x.offset) for x in c.captures(PAGE)) == [
        ("A.warc.gz", 5), ("A.warc.gz", 900), ("B.warc.gz", 7)]
    hit = c.closest(PAGE, "20200101000000")
    assert hit is not None and hit.timestamp == "20200101000000"


def test_captures_in_time_order_with_inclusive_bounds_and_limit(catalog: CatalogStore) -> None:
    everything = ["20200101000000", "20200101000010", "20200131000000", "20200201000000", "20210615120000"]
    assert stamps(catalog.captures(PAGE)) == everything
    assert stamps(catalog.captures(PAGE, from_="20200101000010", to="20200201000000")) == everything[1:4]
    assert stamps(catalog.captures(PAGE, limit=2)) == everything[:2]
    assert stamps(catalog.captures(PAGE, limit=0)) == []
    assert catalog.captures("http://example.org/never") == []
    with pytest.raises(ValueError):
        catalog.captures(PAGE, to="2020")


def test_every_field_and_revisits_come_back_as_stored(open_catalog: OpenCatalog) -> None:
    c = open_catalog()
    stored = [
        cap(PAGE, "20200101000000", status=None, mime="-", redirect=None, length=1, offset=0),
        cap(PAGE, "20200102000000", status=301, redirect="http://example.org/moved", offset=2**40),
        cap(PAGE, "20200103000000", mime="warc/revisit", rectype="revisit", length=300, offset=3),
    ]
    c.add(stored)
    assert c.captures(PAGE) == stored
    assert [x.rectype for x in c.list(PAGE, "exact")] == ["response", "response", "revisit"]


def test_unicode_urls_are_keys_like_any_other(open_catalog: OpenCatalog) -> None:
    c = open_catalog(7)
    pages = ["http://example.org/café", "http://example.org/caf", "http://example.org/日本語?q=ü",
             "http://example.org/cafz", "http://bücher.example/ä", "http://example.org/😀"]
    c.add(cap(u, "20200101000000", offset=n) for n, u in enumerate(pages))
    for n, u in enumerate(pages):
        hit = c.closest(u, "20200101000000")
        assert hit is not None and (hit.url, hit.offset) == (u, n)
    keys = [x.urlkey for x in c.iter_all()]
    assert keys == sorted(keys) and len(keys) == len(pages)  # code point order, in every store
    on_example = sorted(p for p in pages if "bücher" not in p)
    assert sorted(urls(c.list("http://example.org/", "prefix"))) == on_example


def test_list_exact_and_prefix(open_catalog: OpenCatalog) -> None:
    c = open_catalog()
    folder = ["/dir/", "/dir/a", "/dir/sub/b", "/dir/?q=1"]
    beside = ["/dir2", "/directory/x"]
    c.add(cap(f"http://example.org{p}", "20200101000000", offset=n) for n, p in enumerate(folder + beside))
    assert urls(c.list("http://example.org/dir/a", "exact")) == ["http://example.org/dir/a"]
    in_folder = sorted(f"http://example.org{p}" for p in folder)
    assert sorted(urls(c.list("example.org/dir/", "prefix"))) == in_folder
    assert len(list(c.list("example.org/dir", "prefix"))) == 6
    assert len(list(c.list("example.org/dir", "prefix", limit=2))) == 2
    assert list(c.list("example.org/nothing", "prefix")) == []


def test_list_host_keeps_other_hosts_of_the_same_shard_out(open_catalog: OpenCatalog) -> None:
    shards = 1000
    c = open_catalog(shards)
    neighbour = host_in_shard(shard_of(surt_key("example.org"), shards), shards)
    c.add([
        cap("http://example.org/a", "20200101000000"),
        cap("https://www.example.org/b", "20200101000000"),
        cap("http://sub.example.org/c", "20200101000000"),
        cap("http://example.org:8080/d", "20200101000000"),
        cap(f"http://{neighbour}/e", "20200101000000"),
    ])
    assert urls(c.list("http://www.example.org/whatever", "host")) == [
        "http://example.org/a", "https://www.example.org/b"]
    assert urls(c.list(neighbour, "host")) == [f"http://{neighbour}/e"]
    assert urls(c.list("example.org:8080", "host")) == ["http://example.org:8080/d"]


def test_list_domain_spans_shards_and_merges_in_key_order(open_catalog: OpenCatalog) -> None:
    shards = 7
    c = open_catalog(shards)
    inside = ["http://example.org/", "http://www.example.org/z", "http://sub.example.org/",
              "http://a.b.example.org/x", "http://example.org:8080/p", "http://deep.sub.example.org:81/q"]
    outside = ["http://examples.org/", "http://notexample.org/", "http://example.com/", "http://org/"]
    captures = [cap(u, f"2020010{n % 3 + 1}000000", offset=n)
                for n, u in enumerate(inside + outside + inside)]
    random.Random(5).shuffle(captures)
    c.add(captures)
    assert len({shard_of(surt_key(u), shards) for u in inside}) >= 3
    found = list(c.list("https://www.example.org/any/page", "domain"))
    assert sorted(set(urls(found))) == sorted(inside)
    assert len(found) == 2 * len(inside)
    keys = [(x.urlkey, x.timestamp) for x in found]
    assert keys == sorted(keys)
    assert len(list(c.list("example.org", "domain", limit=3))) == 3
    assert urls(c.list("example.com", "domain")) == ["http://example.com/"]


def test_list_refuses_unknown_match_and_bad_url_at_once(catalog: CatalogStore) -> None:
    with pytest.raises(ValueError, match="unknown match"):
        catalog.list(PAGE, "fuzzy")
    with pytest.raises(ValueError, match="not a usable URL"):
        catalog.list("dns:example.org", "host")


# --- walks, bounded counts and span counts: what replay reads of a URL with many captures ---


def test_a_walk_starts_at_its_timestamp_either_way_nearest_first(catalog: CatalogStore) -> None:
    def walked(at: str, *, forward: bool) -> list[tuple[str, int]]:
        return [(x.timestamp, x.offset) for x in catalog.walk(PAGE, at, forward=forward)]

    everything = [(x.timestamp, x.offset) for x in catalog.captures(PAGE)]
    assert walked("00000000000000", forward=True) == everything
    assert walked("99999999999999", forward=False) == everything[::-1]
    assert walked("20200131000000", forward=True) == everything[2:]   # at or after: its own second
    assert walked("20200131000000", forward=False) == everything[2::-1]  # at or before, latest first
    assert walked("20200115000000", forward=True)[0] == ("20200131000000", 3)
    assert walked("20200115000000", forward=False)[0] == ("20200101000010", 2)
    assert walked("20200100999999", forward=False) == []  # any 14 digits, compared as text
    assert walked("20210615120001", forward=True) == []
    assert list(catalog.walk("http://example.org/never", "20200101000000", forward=True)) == []
    assert list(catalog.walk("http://nowhere.example/", "20200101000000", forward=False)) == []


def test_a_walk_orders_one_second_by_file_and_offset_and_refuses_bad_input_at_once(
        open_catalog: OpenCatalog) -> None:
    c = open_catalog()
    c.add(cap(PAGE, "20200101000000", filename=f, offset=o) for f, o in
          [("B.warc.gz", 7), ("A.warc.gz", 900), ("A.warc.gz", 5)])
    forward = [(x.filename, x.offset) for x in c.walk(PAGE, "20200101000000", forward=True)]
    backward = [(x.filename, x.offset) for x in c.walk(PAGE, "20200101000000", forward=False)]
    assert backward == forward[::-1] and sorted(forward) == sorted(backward)
    # By file id (an order of each store's own), then offset.
    assert [f for f, _ in forward] in (["A.warc.gz"] * 2 + ["B.warc.gz"], ["B.warc.gz"] + ["A.warc.gz"] * 2)
    assert [o for f, o in forward if f == "A.warc.gz"] == [5, 900]
    for at in ("2020", "2020010100000x", "202001010000000"):
        with pytest.raises(ValueError, match="14-digit"):
            c.walk(PAGE, at, forward=True)
    with pytest.raises(ValueError, match="not a usable URL"):
        c.walk("dns:example.org", "20200101000000", forward=False)


def test_long_walks_page_through_without_loss_and_stop_when_asked(open_catalog: OpenCatalog) -> None:
    c = open_catalog(5)
    captures = [cap(PAGE, f"2020{n // 2000 + 1:02d}{n % 2000 // 80 + 1:02d}0000{n % 80:02d}", offset=n)
                for n in range(2500)]
    c.add(captures)
    c.add(cap(f"http://example.org/p{n}", "20200101000000") for n in range(50))  # neighbours
    in_order = [(x.timestamp, x.offset) for x in sorted(captures, key=lambda x: (x.timestamp, x.offset))]
    assert [(x.timestamp, x.offset) for x in c.walk(PAGE, "00000000000000", forward=True)] == in_order
    assert [(x.timestamp, x.offset) for x in c.walk(PAGE, "99999999999999", forward=False)] == in_order[::-1]
    middle = in_order[1234][0]
    walk = c.walk(PAGE, middle, forward=True)
    assert [next(walk).timestamp for _ in range(3)] == [t for t, _ in in_order if t >= middle][:3]


def test_the_payload_holder_is_the_latest_response_with_the_digest_up_to_a_date(
        open_catalog: OpenCatalog) -> None:
    c = open_catalog()
    one, two = "sha1:" + "A" * 32, "sha1:" + "B" * 32
    c.add([cap(PAGE, "20200101000000", offset=1, digest=one),
           cap(PAGE, "20200102000000", offset=2, digest=two),
           cap(PAGE, "20200103000000", offset=3, digest=one),
           cap(PAGE, "20200104000000", offset=4, digest=one, rectype="revisit", mime="warc/revisit"),
           cap("http://example.org/other", "20200105000000", offset=5, digest=one)])
    assert c.payload_holder(PAGE, one, "20200104000000").offset == 3  # not the revisit itself
    assert c.payload_holder(PAGE, one, "20200102235959").offset == 1  # at or before the date
    assert c.payload_holder(PAGE, two, "99999999999999").offset == 2
    assert c.payload_holder(PAGE, one, "20191231000000") is None
    assert c.payload_holder(PAGE, "sha1:" + "C" * 32, "99999999999999") is None
    assert c.payload_holder("http://nowhere.example/", one, "99999999999999") is None
    with pytest.raises(ValueError, match="14-digit"):
        c.payload_holder(PAGE, one, "2020")


def test_count_captures_counts_no_further_than_asked(catalog: CatalogStore) -> None:
    assert catalog.count_captures(PAGE, at_most=100) == 5
    assert catalog.count_captures(PAGE, at_most=3) == 3
    assert catalog.count_captures("http://example.org/other", at_most=100) == 1
    assert catalog.count_captures("http://example.org/never", at_most=100) == 0
    assert catalog.count_captures("http://nowhere.example/", at_most=100) == 0


def test_counts_count_content_only(catalog: CatalogStore) -> None:
    """A capture labelled gatekeeper, login or session-lost is not counted (Capture.is_content),
    one labelled otherwise is; count_captures reads no more than at_most rows of any kind."""
    catalog.add([cap(PAGE, "20200101000020", offset=7, labels='{"gatekeeper":"challenge"}'),
                 cap(PAGE, "20200101000030", offset=8, labels='{"lang":"fr","login":"s1"}'),
                 cap(PAGE, "20200131000001", offset=9, labels='{"session-lost":"s1"}'),
                 cap(PAGE, "20200131000002", offset=10, labels='{"session":"s1"}'),
                 cap(PAGE, "20200131000003", offset=11, labels='{"note":"\\"login\\":"}')])
    assert catalog.count_captures(PAGE, at_most=100) == 7
    assert catalog.count_captures(PAGE, at_most=4) == 2  # of the first four rows, two are content
    assert add_up(catalog.span_counts(PAGE, 8)) == [("20200101", 2), ("20200131", 3), ("20200201", 1),
                                                    ("20210615", 1)]
    assert add_up(catalog.span_counts(PAGE, 14, from_="20200101000011", to="20200101000030")) == []


def test_hosts_lists_each_host_once_by_shard_with_bounded_counts(open_catalog: OpenCatalog) -> None:
    c = open_catalog(7)
    c.add([
        cap("http://a.test/", "20200101000000"), cap("http://a.test/x", "20230101000000", offset=1),
        cap("https://www.a.test/y", "20210101000000", offset=2),  # www folds into a.test's keys
        cap("http://sub.a.test/", "20220101000000", offset=3),  # a host of its own
        cap("http://a.test:8080/", "20240101000000", offset=4),  # and so is another port
        cap("http://b.test/p", "20190101000000", offset=5),
        *(cap(f"http://many.test/{n}", f"2018010100{n:04d}", offset=10 + n) for n in range(30)),
    ])
    listed = list(c.hosts(at_most=10))
    order = [(shard_of(t.host, 7), t.host) for t in listed]
    assert order == sorted(order)  # by shard, then key; each host once
    tally = {t.host: (t.captures, t.latest) for t in listed}
    assert tally == {"test,a": (3, "20230101000000"), "test,a,sub": (1, "20220101000000"),
                     "test,a:8080": (1, "20240101000000"), "test,b": (1, "20190101000000"),
                     "test,many": (10, "20180101000017")}  # the first ten keys: /0, /1, /10 ... /17
    assert {t.host: t.url for t in listed}["test,b"] == "http://b.test/p"
    for n, first in enumerate(listed):  # from any host on: the hosts after it, as listed
        assert list(c.hosts(after=first.host, at_most=10)) == listed[n + 1:]
    assert [t.host for t in open_catalog(7, readonly=True).hosts(at_most=5)] == [t.host for t in listed]


def add_up(pieces: Iterator[tuple[str, int]]) -> list[tuple[str, int]]:
    """Span counts with each span's pieces added up, checking that pieces come together."""
    out: list[tuple[str, int]] = []
    for span, count in pieces:
        assert count > 0
        if out and out[-1][0] == span:
            out[-1] = (span, out[-1][1] + count)
        else:
            assert not out or out[-1][0] < span, (out[-1], span)
            out.append((span, count))
    return out


def test_span_counts_count_each_span_within_the_bounds(catalog: CatalogStore) -> None:
    assert add_up(catalog.span_counts(PAGE, 4)) == [("2020", 4), ("2021", 1)]
    assert add_up(catalog.span_counts(PAGE, 8)) == [("20200101", 2), ("20200131", 1), ("20200201", 1),
                                                    ("20210615", 1)]
    assert add_up(catalog.span_counts(PAGE, 8, from_="20200101000005", to="20200201000000")) == [
        ("20200101", 1), ("20200131", 1), ("20200201", 1)]
    assert add_up(catalog.span_counts(PAGE, 14, to="20200101000010")) == [
        ("20200101000000", 1), ("20200101000010", 1)]
    assert list(catalog.span_counts("http://example.org/never", 4)) == []
    assert list(catalog.span_counts("http://nowhere.example/", 4)) == []
    for digits in (0, 15):
        with pytest.raises(ValueError, match="1 to 14 digits"):
            catalog.span_counts(PAGE, digits)
    with pytest.raises(ValueError, match="14-digit"):
        catalog.span_counts(PAGE, 4, from_="2020")


def test_span_counts_of_many_captures_come_a_chunk_at_a_time_and_add_up(open_catalog: OpenCatalog) -> None:
    c = open_catalog(5)
    total = 2 * TALLY_ROWS + 500
    # A capture a minute from 2020-12-31 on: years 2020 and 2021, days across both.
    c.add(cap(PAGE, f"{datetime(2020, 12, 31, tzinfo=UTC) + timedelta(minutes=n):%Y%m%d%H%M%S}", offset=n)
          for n in range(total))
    pieces = list(c.span_counts(PAGE, 4))
    assert len(pieces) >= 3  # at least one piece per chunk
    assert add_up(iter(pieces)) == [("2020", 1440), ("2021", total - 1440)]
    days = add_up(c.span_counts(PAGE, 8, from_="20210101000000", to="20211231235959"))
    assert days[0] == ("20210101", 1440) and sum(n for _, n in days) == total - 1440
    assert [day for day, _ in days] == sorted(day for day, _ in days)


def test_long_listings_page_through_without_loss(open_catalog: OpenCatalog) -> None:
    c = open_catalog(5)
    captures = {cap(f"http://big.example/p{n % 97}", f"2020{n % 12 + 1:02d}01{n % 24:02d}0000", offset=n)
                for n in range(2500)}
    assert c.add(list(captures)) == len(captures)
    host = list(c.list("http://big.example/", "host"))
    assert set(host) == captures
    keys = [(x.urlkey, x.timestamp) for x in host]
    assert keys == sorted(keys)
    assert list(c.list("http://big.example/", "host", limit=1234)) == host[:1234]


def test_iter_all_and_count_cover_every_shard_in_key_order(open_catalog: OpenCatalog) -> None:
    rng = random.Random(7)
    hosts = [f"h{n}.example" for n in range(40)]
    captures = {cap(f"http://{rng.choice(hosts)}/p{rng.randrange(30)}",
                    f"20{rng.randrange(10, 26)}0101000000", offset=n) for n in range(900)}
    c = open_catalog(5)
    assert c.count() == 0 and list(c.iter_all()) == []
    assert c.add(iter(captures)) == len(captures)
    got = list(c.iter_all())
    assert len(got) == len(captures) == c.count()
    assert set(got) == captures
    keys = [(x.urlkey, x.timestamp) for x in got]
    assert keys == sorted(keys)


def test_adding_the_same_captures_twice_is_harmless(catalog: CatalogStore) -> None:
    before = catalog.count()
    assert catalog.add([cap(PAGE, "20200101000000", offset=1)]) == 0
    assert catalog.add([cap(PAGE, "20200101000000", offset=1), cap(PAGE, "20200101000000", offset=99)]) == 1
    assert catalog.add([cap(PAGE, "20200101000000", offset=42)] * 3) == 1  # repeated within one batch
    assert catalog.add([cap(PAGE, "20200101000000", offset=1, filename="B-2.warc.gz")]) == 1
    assert catalog.add([]) == 0
    assert catalog.count() == before + 3


def test_remove_file_drops_its_entries_only(open_catalog: OpenCatalog) -> None:
    c = open_catalog(16)
    c.add(cap(f"http://h{n}.example/", "20200101000000", filename="A.warc.gz", offset=n) for n in range(50))
    c.add(cap(f"http://h{n}.example/", "20210101000000", filename="B.warc.gz", offset=n) for n in range(50))
    assert c.remove_file("A.warc.gz") == 50
    assert c.remove_file("A.warc.gz") == 0
    assert c.remove_file("never.warc.gz") == 0
    assert c.count() == 50
    assert {x.filename for x in c.iter_all()} == {"B.warc.gz"}
    hit = c.closest("http://h3.example/", "20000101000000")
    assert hit is not None and hit.timestamp == "20210101000000"
    again = (cap(f"http://h{n}.example/", "20200101000000", filename="A.warc.gz", offset=n)
             for n in range(50))
    assert c.add(again) == 50


def test_a_reader_sees_what_a_writer_adds_and_cannot_write(open_catalog: OpenCatalog) -> None:
    writer = open_catalog(64)
    writer.add([cap(PAGE, "20200101000000")])
    reader = open_catalog(64, readonly=True)
    assert reader.closest("http://elsewhere.example/", "20200101000000") is None
    writer.add([cap("http://elsewhere.example/", "20200101000000", filename="new.warc.gz"),
                cap(PAGE, "20220101000000")])
    hit = reader.closest("http://elsewhere.example/", "20200101000000")
    assert hit is not None and hit.filename == "new.warc.gz"
    assert stamps(reader.captures(PAGE)) == ["20200101000000", "20220101000000"]
    with pytest.raises(CatalogError, match="read-only"):
        reader.add([cap(PAGE, "20230101000000")])
    with pytest.raises(CatalogError, match="read-only"):
        reader.remove_file("A-1.warc.gz")
    assert reader.count() == 3


def test_another_shard_count_is_refused(open_catalog: OpenCatalog) -> None:
    open_catalog(16).add([cap(PAGE, "20200101000000")])
    with pytest.raises(CatalogError, match=r"has 16 shards.*reindex"):
        open_catalog(1000)
    with pytest.raises(CatalogError, match=r"has 16 shards.*reindex"):
        open_catalog(1000, readonly=True)


SAME = "sha1:" + "S" * 32


def test_the_digest_index_names_the_earliest_response_with_a_payload(open_catalog):
    catalog = open_catalog(digests=True)
    assert catalog.first_with_digest(SAME) is None
    catalog.add([cap("http://b.test/copy", "20200301000000", offset=2, digest=SAME),
                 cap("http://b.test/copy", "20200401000000", offset=3, digest=SAME, rectype="revisit",
                     mime="warc/revisit")])
    catalog.add([cap("http://a.test/first", "20200101000000", offset=1, digest=SAME),  # earlier
                 cap("http://c.test/later", "20200501000000", offset=4, digest=SAME)])
    found = catalog.first_with_digest(SAME)
    assert found is not None and (found.url, found.timestamp) == ("http://a.test/first",
                                                                  "20200101000000")
    reader = open_catalog(readonly=True)                      # another process reads it too
    assert reader.first_with_digest(SAME) == found
    assert reader.first_with_digest("sha1:" + "X" * 32) is None


def test_only_responses_go_to_the_digest_index_and_only_when_asked(open_catalog):
    plain = open_catalog()
    plain.add([cap("http://a.test/x", "20200101000000", digest=SAME)])
    assert plain.first_with_digest(SAME) is None              # opened without the index
    indexed = open_catalog(digests=True)
    indexed.add([cap("http://a.test/r", "20200101000001", offset=1, digest=SAME,
                     rectype="revisit", mime="warc/revisit")])
    assert indexed.first_with_digest(SAME) is None            # a revisit holds no payload


def test_a_removed_file_leaves_no_original_in_the_digest_index(open_catalog):
    catalog = open_catalog(digests=True)
    catalog.add([cap("http://a.test/x", "20200101000000", filename="B-1.warc.gz", digest=SAME)])
    assert catalog.first_with_digest(SAME) is not None
    assert catalog.remove_file("B-1.warc.gz") == 1
    assert catalog.first_with_digest(SAME) is None
    catalog.add([cap("http://a.test/y", "20200201000000", filename="B-2.warc.gz", digest=SAME)])
    found = catalog.first_with_digest(SAME)
    assert found is not None and found.url == "http://a.test/y"
