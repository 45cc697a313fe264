"""Building the full-text index from the catalog (archiver.store.fulltextindex) over real bundles, a
SQLite catalog and the FTS5 index: what is taken, what a revisit joins, what is extracted once."""

from __future__ import annotations

import dataclasses
import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter
from archiver.store.catalog_maintenance import WarcFiles
from archiver.store.embedded.catalog import Catalog
from archiver.store.embedded.fulltext import FtsIndex
from archiver.store.fulltextindex import IndexTotals, build_index, indexable
from archiver.store.models import Capture
from archiver.store.warcindex import index_warc
from archiver.web.textquery import parse_query

DATE = datetime(2026, 11, 22, 3, 15, tzinfo=UTC)
REQUEST = b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"
HTML = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
PAGE = b"<title>Alpha</title><p>The harbour at dawn.</p>"


@dataclasses.dataclass
class Archive:
    catalog: Catalog
    warcs: WarcFiles
    index: FtsIndex
    entries: list[Capture]

    def build(self, **kwargs) -> IndexTotals:
        return build_index(self.catalog, self.warcs, self.index, **kwargs)

    def search(self, text: str, at: str | None = None) -> dict[str, list[str]]:
        return {hit.url: hit.timestamps for hit in self.index.search(parse_query(text), at=at)}


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    """Pages, images, revisits of both profiles and of another URL's payload, an error page, a
    page without text, one second apart."""
    warcs = tmp_path / "warcs"
    with BundleWriter(warcs, WarcConfig()) as writer:
        at = (DATE + timedelta(seconds=n) for n in range(100))

        def page(url: str, head: bytes, body: bytes) -> str:
            return writer.write_exchange(url=url, ip=None, date=next(at), request=REQUEST,
                                         response_head=head, response_body=body).payload_digest

        def revisit(url: str, digest: str, refers_to: str, *, not_modified: bool = False) -> None:
            head = b"HTTP/1.1 304 Not Modified\r\n\r\n" if not_modified else HTML
            writer.write_revisit(url=url, ip=None, date=next(at), request=REQUEST, response_head=head,
                                 payload_digest=digest, refers_to_url=refers_to, refers_to_date=DATE,
                                 not_modified=not_modified)

        alpha = page("http://a.test/", HTML, PAGE)
        image = page("http://a.test/i.png", b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n", b"\x89PNG")
        page("http://b.test/", HTML.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n"),
             gzip.compress(b"<title>Beta</title><p>Mountain harbour</p>"))
        revisit("http://a.test/", alpha, "http://a.test/")
        revisit("http://a.test/", alpha, "http://a.test/", not_modified=True)
        page("http://c.test/copy", HTML, PAGE)  # another URL, the same payload
        revisit("http://0.test/", alpha, "http://a.test/")  # sorts before a.test: waits for it
        revisit("http://a.test/i.png", image, "http://a.test/i.png")
        page("http://e.test/gone", b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n\r\n",
             b"<p>harbour not found</p>")
        page("http://f.test/", HTML, b"<script>var harbour = 1</script>")
    bundles = sorted(warcs.glob("*.warc.gz"))
    entries = [entry for path in bundles for entry in index_warc(path)]
    catalog = Catalog(tmp_path / "catalog", 4)
    catalog.add(entries)
    return Archive(catalog, WarcFiles(warcs), FtsIndex(tmp_path / "search" / "fulltext.sqlite"), entries)


def stamp(n: int) -> str:
    return (DATE + timedelta(seconds=n)).strftime("%Y%m%d%H%M%S")


def test_pages_and_revisits_are_taken_and_each_payload_extracted_once(archive):
    totals = archive.build()
    assert (totals.examined, totals.extracted, totals.copied, totals.broken) == (10, 3, 2, 0)
    assert (totals.taken, totals.without_text) == (6, 2)  # the image's revisit and f.test
    assert archive.search("harbour") == {
        "http://a.test/": [stamp(0), stamp(3), stamp(4)], "http://b.test/": [stamp(2)],
        "http://c.test/copy": [stamp(5)], "http://0.test/": [stamp(6)]}
    assert archive.search("mountain") == {"http://b.test/": [stamp(2)]}
    assert archive.index.counts() == (4, 6)


def test_a_second_run_with_nothing_new_extracts_nothing(archive, tmp_path):
    archive.build()
    again = archive.build()
    assert (again.examined, again.taken, again.without_text, again.extracted) == (10, 0, 0, 0)
    assert again.copied == 0
    with BundleWriter(tmp_path / "warcs", WarcConfig()) as writer:  # the same page, a week later
        writer.write_exchange(url="http://a.test/", ip=None, date=DATE + timedelta(days=7), request=REQUEST,
                              response_head=HTML, response_body=PAGE)
    archive.catalog.add(entry for path in sorted((tmp_path / "warcs").glob("*.warc.gz"))
                        for entry in index_warc(path))
    third = archive.build()
    assert (third.examined, third.taken, third.extracted, third.copied) == (11, 1, 0, 0)
    week = (DATE + timedelta(days=7)).strftime("%Y%m%d%H%M%S")
    assert archive.search("dawn")["http://a.test/"] == [stamp(0), stamp(3), stamp(4), week]
    assert archive.search("dawn", at=stamp(3))["http://a.test/"] == [stamp(0), stamp(3)]


def test_an_unreadable_record_costs_that_record_and_is_tried_again(archive):
    archive.catalog.add([dataclasses.replace(archive.entries[0], filename="gone.warc.gz", url="http://g.test/",
                                             urlkey="test,g)/", digest="sha1:GONE")])
    failed: list[str] = []
    first = archive.build(broken=lambda capture, error: failed.append(capture.url))
    assert (first.broken, first.extracted, first.taken) == (1, 3, 6) and failed == ["http://g.test/"]
    assert "http://a.test/" in archive.search("dawn")
    second = archive.build()
    assert (second.broken, second.extracted, second.taken) == (1, 0, 0)


def test_batches_and_progress(archive):
    seen: list[int] = []
    totals = archive.build(batch=2, progress=lambda t: seen.append(t.examined))
    assert seen and seen == sorted(seen) and totals.taken == 6
    assert archive.search("dawn")["http://0.test/"] == [stamp(6)]


def test_what_the_index_takes():
    def entry(**fields) -> Capture:
        base = Capture("test,a)/", stamp(0), "http://a.test/", 200, "text/html", "sha1:X", None, "w", 0, 1)
        return dataclasses.replace(base, **fields)

    assert indexable(entry()) and indexable(entry(mime="application/xhtml+xml"))
    assert indexable(entry(mime="TEXT/HTML"))
    assert not indexable(entry(status=404)) and not indexable(entry(mime="text/css"))
    assert not indexable(entry(status=None))
    assert indexable(entry(rectype="revisit", mime="warc/revisit", status=304))
    assert not indexable(entry(rectype="revisit", mime="warc/revisit", status=404))
    assert not indexable(entry(labels='{"gatekeeper":"challenge"}'))
    assert not indexable(entry(rectype="revisit", mime="warc/revisit", labels='{"session-lost":"s1"}'))
    assert indexable(entry(labels='{"session":"s1"}'))
