"""Card catalog: SQLite shards on disk, closest/captures/list answers, CDXJ compatibility."""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from io import BytesIO
from pathlib import Path

import pytest
from cdxj_indexer.main import write_cdx_index
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.store.catalogkeys import shard_of, surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture, CatalogError
from archiver.web.timestamps import parse_date


def cap(url: str, ts: str, *, filename: str = "A-1.warc.gz", offset: int = 0, **fields: object) -> Capture:
    values: dict[str, object] = {
        "status": 200,
        "mime": "text/html",
        "digest": "sha1:" + "A" * 32,
        "redirect": None,
        "length": 1234,
    }
    values.update(fields)
    return Capture(urlkey=surt_key(url), timestamp=ts, url=url, filename=filename, offset=offset, **values)


def stamps(captures: object) -> list[str]:
    return [c.timestamp for c in captures]


def urls(captures: object) -> list[str]:
    return [c.url for c in captures]


def host_in_shard(shard: int, shards: int) -> str:
    """A host name whose key lands in ``shard``."""
    for n in range(10_000):
        name = f"other{n}.test"
        if shard_of(surt_key(name), shards) == shard:
            return name
    raise AssertionError("no host found")


PAGE = "http://example.org/page"


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    c = Catalog(tmp_path / "catalog", 1000)
    c.add(
        [
            cap(PAGE, "20200101000000", offset=1),
            cap(PAGE, "20200101000010", offset=2),
            cap(PAGE, "20200131000000", offset=3),
            cap(PAGE, "20200201000000", offset=4),
            cap("https://www.example.org/page", "20210615120000", offset=5),  # same key: www and scheme fold
            cap("http://example.org/other", "20200101000005", offset=6),
        ]
    )
    yield c
    c.close()


def test_shard_files_are_made_on_first_write_with_zero_padded_names(tmp_path: Path) -> None:
    small = Catalog(tmp_path / "small", 10)
    assert sorted(p.name for p in (tmp_path / "small").iterdir()) == ["catalog.json"]
    small.add([cap(PAGE, "20200101000000")])
    assert (tmp_path / "small" / f"{shard_of(surt_key(PAGE), 10):03d}.sqlite").exists()
    big = Catalog(tmp_path / "big", 5000)
    big.add([cap(PAGE, "20200101000000")])
    assert (tmp_path / "big" / f"{shard_of(surt_key(PAGE), 5000):04d}.sqlite").exists()
    for c in (small, big):
        conn = sqlite3.connect(c._path(shard_of(surt_key(PAGE), c.shards)))
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()
        c.close()


# -- closest


def test_closest_before_first_after_last_and_exact(catalog: Catalog) -> None:
    assert catalog.closest(PAGE, "19960101000000").timestamp == "20200101000000"
    assert catalog.closest(PAGE, "20260101000000").timestamp == "20210615120000"
    hit = catalog.closest(PAGE, "20200131000000")
    assert hit is not None and (hit.timestamp, hit.offset) == ("20200131000000", 3)
    # Found through another spelling of the URL: the SURT key is the same.
    assert catalog.closest("https://WWW.example.org/page", "20210601000000").offset == 5


def test_closest_tie_goes_to_the_earlier_capture(catalog: Catalog) -> None:
    assert catalog.closest(PAGE, "20200101000005").timestamp == "20200101000000"
    assert catalog.closest(PAGE, "20200101000006").timestamp == "20200101000010"
    # 12 h from each side across a month end: the gap is measured in time, not in digits.
    assert catalog.closest(PAGE, "20200131120000").timestamp == "20200131000000"
    assert catalog.closest(PAGE, "20200131120001").timestamp == "20200201000000"


def test_closest_of_a_url_never_captured_is_none(catalog: Catalog, tmp_path: Path) -> None:
    assert catalog.closest("http://example.org/never", "20200101000000") is None
    assert catalog.closest("http://nowhere.example/", "20200101000000") is None
    with pytest.raises(ValueError):
        catalog.closest(PAGE, "2020")
    empty = Catalog(tmp_path / "empty", 1000)
    assert empty.closest(PAGE, "20200101000000") is None
    assert list((tmp_path / "empty").iterdir()) == [tmp_path / "empty" / "catalog.json"]


def test_closest_is_two_index_seeks_never_a_scan(catalog: Catalog) -> None:
    # Enough captures of one URL that a scan would be the planner's alternative.
    catalog.add(cap(PAGE, f"2019{n:010d}", offset=100 + n) for n in range(500))
    conn = catalog._conn(shard_of(surt_key(PAGE), catalog.shards), create=False)
    assert conn is not None
    conn.execute("ANALYZE")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    assert catalog.closest(PAGE, "20200115000000") is not None
    conn.set_trace_callback(None)
    assert len(statements) == 2
    for sql in statements:
        plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert re.search(r"SEARCH captures USING PRIMARY KEY \(urlkey=\? AND ts[<>]\?\)", plan), plan
        assert "SCAN" not in plan and "TEMP B-TREE" not in plan, plan


# -- captures


def test_captures_in_time_order_with_inclusive_bounds_and_limit(catalog: Catalog) -> None:
    everything = ["20200101000000", "20200101000010", "20200131000000", "20200201000000", "20210615120000"]
    assert stamps(catalog.captures(PAGE)) == everything
    assert stamps(catalog.captures(PAGE, from_="20200101000010", to="20200201000000")) == everything[1:4]
    assert stamps(catalog.captures(PAGE, from_=parse_date("2020-02"), to=parse_date("2020", upper=True))) == [
        "20200201000000"
    ]
    assert stamps(catalog.captures(PAGE, limit=2)) == everything[:2]
    assert catalog.captures("http://example.org/never") == []
    assert catalog.captures("http://nowhere.example/") == []
    with pytest.raises(ValueError):
        catalog.captures(PAGE, to="2020")


# -- listings


def test_list_exact_and_prefix(tmp_path: Path) -> None:
    c = Catalog(tmp_path / "c", 1000)
    folder = ["/dir/", "/dir/a", "/dir/sub/b", "/dir/?q=1"]
    beside = ["/dir2", "/directory/x"]
    c.add(cap(f"http://example.org{p}", "20200101000000", offset=n) for n, p in enumerate(folder + beside))
    assert urls(c.list("http://example.org/dir/a", "exact")) == ["http://example.org/dir/a"]
    # A folder URL: the folder page itself (SURT drops its trailing slash) and what is under it.
    assert sorted(urls(c.list("example.org/dir/", "prefix"))) == sorted(
        f"http://example.org{p}" for p in folder
    )
    # Without the slash it is a plain key prefix, as in pywb.
    assert len(list(c.list("example.org/dir", "prefix"))) == 6
    assert len(list(c.list("example.org/", "prefix"))) == 6
    assert len(list(c.list("example.org/dir", "prefix", limit=2))) == 2
    assert list(c.list("example.org/nothing", "prefix")) == []


def test_list_host_keeps_other_hosts_of_the_same_shard_out(tmp_path: Path) -> None:
    shards = 1000
    c = Catalog(tmp_path / "c", shards)
    neighbour = host_in_shard(shard_of(surt_key("example.org"), shards), shards)
    c.add(
        [
            cap("http://example.org/a", "20200101000000"),
            cap("https://www.example.org/b", "20200101000000"),
            cap("http://sub.example.org/c", "20200101000000"),
            cap("http://example.org:8080/d", "20200101000000"),
            cap(f"http://{neighbour}/e", "20200101000000"),
        ]
    )
    assert shard_of(surt_key(neighbour), shards) == shard_of(surt_key("example.org"), shards)
    found = list(c.list("http://www.example.org/whatever", "host"))
    assert urls(found) == ["http://example.org/a", "https://www.example.org/b"]
    assert urls(c.list(f"{neighbour}", "host")) == [f"http://{neighbour}/e"]
    assert urls(c.list("example.org:8080", "host")) == ["http://example.org:8080/d"]


def test_list_domain_spans_shards_and_merges_in_key_order(tmp_path: Path) -> None:
    shards = 7
    c = Catalog(tmp_path / "c", shards)
    inside = [
        "http://example.org/",
        "http://www.example.org/z",
        "http://sub.example.org/",
        "http://a.b.example.org/x",
        "http://example.org:8080/p",
        "http://deep.sub.example.org:81/q",
    ]
    outside = ["http://examples.org/", "http://notexample.org/", "http://example.com/", "http://org/"]
    captures = [
        cap(u, f"2020010{n % 3 + 1}000000", offset=n) for n, u in enumerate(inside + outside + inside)
    ]
    random.Random(5).shuffle(captures)
    c.add(captures)
    assert len({shard_of(surt_key(u), shards) for u in inside}) >= 3  # the domain really spans shards
    found = list(c.list("https://www.example.org/any/page", "domain"))
    assert sorted(set(urls(found))) == sorted(inside)
    assert len(found) == 2 * len(inside)
    keys = [(x.urlkey, x.timestamp) for x in found]
    assert keys == sorted(keys)
    assert len(list(c.list("example.org", "domain", limit=3))) == 3
    assert urls(c.list("example.com", "domain")) == ["http://example.com/"]


def test_list_refuses_unknown_match_and_bad_url_at_once(catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="unknown match"):
        catalog.list(PAGE, "fuzzy")
    with pytest.raises(ValueError, match="not a usable URL"):
        catalog.list("dns:example.org", "host")


# -- whole catalog


def test_iter_all_is_sorted_across_shards_and_pages(tmp_path: Path) -> None:
    rng = random.Random(7)
    hosts = [f"h{n}.example" for n in range(40)]
    captures = {
        cap(
            f"http://{rng.choice(hosts)}/p{rng.randrange(30)}",
            f"20{rng.randrange(10, 26)}0101000000",
            offset=n,
        )
        for n in range(900)
    }
    # A one-connection LRU: each page of the merge reopens its shard, under a paused iterator.
    c = Catalog(tmp_path / "c", 5, max_open=1)
    assert c.add(list(captures)) == len(captures)
    assert len(list((tmp_path / "c").glob("*.sqlite"))) == 5  # > 100 rows each: several pages per shard
    got = list(c.iter_all())
    assert len(got) == len(captures) == c.count()
    assert set(got) == captures
    keys = [(x.urlkey, x.timestamp) for x in got]
    assert keys == sorted(keys)
    assert len(c._conns) == 1


def test_duplicates_are_ignored(catalog: Catalog) -> None:
    before = catalog.count()
    assert catalog.add([cap(PAGE, "20200101000000", offset=1)]) == 0
    assert catalog.add([cap(PAGE, "20200101000000", offset=1), cap(PAGE, "20200101000000", offset=99)]) == 1
    # Same URL and second, another file: a distinct capture.
    assert catalog.add([cap(PAGE, "20200101000000", offset=1, filename="B-2.warc.gz")]) == 1
    assert catalog.count() == before + 2


def test_remove_file_drops_its_entries_only(tmp_path: Path) -> None:
    c = Catalog(tmp_path / "c", 16)
    c.add(cap(f"http://h{n}.example/", "20200101000000", filename="A.warc.gz", offset=n) for n in range(50))
    c.add(cap(f"http://h{n}.example/", "20210101000000", filename="B.warc.gz", offset=n) for n in range(50))
    assert c.remove_file("A.warc.gz") == 50
    assert c.remove_file("A.warc.gz") == 0
    assert c.count() == 50
    assert {x.filename for x in c.iter_all()} == {"B.warc.gz"}
    assert c.closest("http://h3.example/", "20000101000000").timestamp == "20210101000000"
    assert (
        c.add(
            cap(f"http://h{n}.example/", "20200101000000", filename="A.warc.gz", offset=n) for n in range(50)
        )
        == 50
    )


def test_shard_count_mismatch_and_read_only_misuse_are_refused(tmp_path: Path) -> None:
    Catalog(tmp_path / "c", 16).add([cap(PAGE, "20200101000000")])
    with pytest.raises(CatalogError, match=r"has 16 shards.*reindex"):
        Catalog(tmp_path / "c", 1000)
    with pytest.raises(CatalogError, match=r"has 16 shards.*reindex"):
        Catalog(tmp_path / "c", 1000, readonly=True)
    with pytest.raises(CatalogError, match="no catalog"):
        Catalog(tmp_path / "missing", 16, readonly=True)
    assert not (tmp_path / "missing").exists()
    reader = Catalog(tmp_path / "c", 16, readonly=True)
    with pytest.raises(CatalogError, match="read-only"):
        reader.add([cap(PAGE, "20210101000000")])
    with pytest.raises(CatalogError, match="read-only"):
        reader.remove_file("A-1.warc.gz")
    assert reader.count() == 1


def test_a_reader_sees_what_a_writer_adds_even_in_new_shards(tmp_path: Path) -> None:
    writer = Catalog(tmp_path / "c", 64)
    writer.add([cap(PAGE, "20200101000000")])
    with Catalog(tmp_path / "c", 64, readonly=True) as reader:
        assert reader.closest("http://elsewhere.example/", "20200101000000") is None
        assert reader.closest(PAGE, "20200101000000") is not None
        writer.add([cap("http://elsewhere.example/", "20200101000000"), cap(PAGE, "20220101000000")])
        assert reader.closest("http://elsewhere.example/", "20200101000000") is not None
        assert stamps(reader.captures(PAGE)) == ["20200101000000", "20220101000000"]
    writer.close()


def test_a_shard_held_open_keeps_its_write_ahead_log_small(tmp_path: Path) -> None:
    """A daemon holds its shards open for good: the WAL beside one is cut back at each
    checkpoint, never left at its largest (SQLite's 4 MiB by default)."""
    with Catalog(tmp_path / "c", 1) as writer:
        for batch in range(600):  # about 5 MiB of WAL frames: a page or more per commit
            writer.add([cap(PAGE, f"2020{batch:06d}{n:04d}", offset=n) for n in range(40)])
            if batch % 50 == 49:
                wal = writer._path(0).with_name(writer._path(0).name + "-wal")
                assert wal.stat().st_size <= 1.25 * 2**20, batch
        assert len(writer.captures(PAGE)) == 600 * 40


# -- CDXJ


def test_cdxj_round_trip_and_json_types() -> None:
    captures = [
        cap(PAGE, "20200101000000", offset=7, length=300),
        cap(
            "http://example.org/old",
            "20200101000001",
            status=301,
            mime="-",
            redirect="http://example.org/new",
        ),
        cap(PAGE, "20200102000000", mime="warc/revisit", rectype="revisit"),
        cap("http://example.org/x", "20200101000002", status=None),
    ]
    for c in captures:
        assert Capture.from_cdxj(c.to_cdxj()) == c
    assert json.loads(captures[1].to_cdxj().split(" ", 2)[2]) == {
        "url": "http://example.org/old",
        "status": "301",
        "digest": "sha1:" + "A" * 32,
        "length": "1234",
        "offset": "0",
        "filename": "A-1.warc.gz",
        "redirect": "http://example.org/new",
    }
    assert captures[0].to_json() == {
        "urlkey": "org,example)/page",
        "timestamp": "20200101000000",
        "url": PAGE,
        "mime": "text/html",
        "status": 200,
        "digest": "sha1:" + "A" * 32,
        "length": 300,
        "offset": 7,
        "filename": "A-1.warc.gz",
        "rectype": "response",
    }
    assert captures[1].to_json()["redirect"] == "http://example.org/new"
    with pytest.raises(ValueError, match="not a CDXJ capture line"):
        Capture.from_cdxj("org,example)/ 20200101000000 {not json")
    with pytest.raises(ValueError, match="not a CDXJ capture line"):
        Capture.from_cdxj('org,example)/ 20200101000000 {"url": "http://example.org/"}')


def _write_warc(path: Path) -> None:
    with open(path, "wb") as f:
        writer = WARCWriter(f, gzip=True)

        def response(url: str, status: str, headers: list[tuple[str, str]], body: bytes, date: str) -> None:
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            record = writer.create_warc_record(
                url,
                "response",
                payload=BytesIO(body),
                http_headers=http,
                warc_headers_dict={"WARC-Date": date},
            )
            writer.write_record(record)

        response(
            "http://www.example.org/a?b=2&a=1",
            "200 OK",
            [("Content-Type", "text/html; charset=utf-8")],
            b"<p>hello</p>",
            "2026-11-22T03:15:00Z",
        )
        response(
            "https://example.org/old",
            "301 Moved Permanently",
            [("Location", "https://example.org/new")],
            b"",
            "2026-11-22T03:15:01.250Z",
        )
        response("http://example.org/data", "200 OK", [], b"\x00\x01", "2026-11-22T03:15:02Z")
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        revisit = writer.create_revisit_record(
            "http://www.example.org/a?b=2&a=1",
            digest="sha1:" + "B" * 32,
            refers_to_uri="http://www.example.org/a?b=2&a=1",
            refers_to_date="2026-11-22T03:15:00Z",
            http_headers=http,
        )
        revisit.rec_headers.replace_header("WARC-Date", "2026-11-23T00:00:00Z")
        writer.write_record(revisit)


def _captures_of(path: Path) -> list[Capture]:
    """Captures built from the WARC's own fields, independently of cdxj-indexer."""
    out = []
    with open(path, "rb") as f:
        it = ArchiveIterator(f)
        for record in it:
            headers = record.http_headers
            content_type = headers.get_header("Content-Type")
            rectype = record.rec_type
            url = record.rec_headers.get_header("WARC-Target-URI")
            status = int(headers.get_statuscode())
            record.content_stream().read()
            out.append(
                Capture(
                    urlkey=surt_key(url),
                    timestamp=parse_date(record.rec_headers.get_header("WARC-Date")),
                    url=url,
                    status=status,
                    mime="warc/revisit"
                    if rectype == "revisit"
                    else (content_type or "-").split(";")[0].strip(),
                    digest=record.rec_headers.get_header("WARC-Payload-Digest"),
                    redirect=headers.get_header("Location") if 300 <= status < 400 else None,
                    filename=path.name,
                    offset=it.get_record_offset(),
                    length=it.get_record_length(),
                    rectype=rectype,
                )
            )
    return out


def test_to_cdxj_matches_cdxj_indexer(tmp_path: Path) -> None:
    warc = tmp_path / "ARCHIVER-20261122031500-0-00000.warc.gz"
    _write_warc(warc)
    index = tmp_path / "index.cdxj"
    write_cdx_index(str(index), [str(warc)], {})
    theirs = index.read_text().splitlines()
    ours = _captures_of(warc)
    assert len(theirs) == len(ours) == 4
    assert {c.rectype for c in ours} == {"response", "revisit"}
    for line, capture in zip(theirs, ours, strict=True):
        mine = capture.to_cdxj()
        assert mine.split(" ", 2)[:2] == line.split(" ", 2)[:2]
        expected = json.loads(line.split(" ", 2)[2])
        if capture.redirect is None:
            assert mine == line  # byte for byte: same field order, same string values
            assert Capture.from_cdxj(line) == capture
        else:
            expected["redirect"] = capture.redirect  # our one addition, for 3xx only
            assert Capture.from_cdxj(line) == replace(capture, redirect=None)
        assert json.loads(mine.split(" ", 2)[2]) == expected
    # Stored and read back, the entries give the same lines.
    c = Catalog(tmp_path / "c", 10)
    assert c.add(ours) == 4
    assert [x.to_cdxj() for x in c.iter_all()] == sorted(x.to_cdxj() for x in ours)
