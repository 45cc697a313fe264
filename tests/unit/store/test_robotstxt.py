"""robots.txt over time (archiver.store.robotstxt) when a host's robots.txt was revisited for
years unchanged: its history reads each payload once, and what was in force at a date is read
alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from archiver.config import WarcConfig
from archiver.store import robotstxt
from archiver.store.bundles import BundleWriter
from archiver.store.catalog_maintenance import WarcFiles
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.store.warcindex import OpenRecord, index_warc
from archiver.web.timestamps import from_datetime

ORIGIN = "http://a.test"
ROBOTS = ORIGIN + "/robots.txt"
REQUEST = b"GET /robots.txt HTTP/1.1\r\nHost: a.test\r\n\r\n"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"
RULES = b"User-agent: *\nDisallow: /private/\n"
START = datetime(2020, 1, 1, tzinfo=UTC)
VISITS = 2_000  # daily for five years and more


class CountedWarcs(WarcFiles):
    """The WARC folder, counting the records opened."""

    opened = 0

    def open(self, filename: str, offset: int, length: int) -> OpenRecord:
        self.opened += 1
        return super().open(filename, offset, length)


def archive(tmp_path: Path) -> tuple[Catalog, CountedWarcs]:
    """A robots.txt fetched once, then revisited unchanged every day."""
    warcs = tmp_path / "warcs"
    with BundleWriter(warcs, WarcConfig()) as writer:
        first = writer.write_exchange(url=ROBOTS, ip="192.0.2.1", date=START, request=REQUEST,
                                      response_head=HEAD, response_body=RULES)
        for day in range(1, VISITS):
            writer.write_revisit(url=ROBOTS, ip="192.0.2.1", date=START + timedelta(days=day),
                                 request=REQUEST, response_head=HEAD,
                                 payload_digest=first.payload_digest, refers_to_url=ROBOTS,
                                 refers_to_date=START)
    catalog = Catalog(tmp_path / "catalog", 4)
    for path in warcs.iterdir():
        catalog.add(index_warc(path))
    return catalog, CountedWarcs(warcs)


def test_a_history_of_revisits_reads_its_payload_once_and_each_row_once(tmp_path: Path) -> None:
    catalog, warcs = archive(tmp_path)
    read: list[Capture] = []

    def rows(found):
        for capture in found:
            read.append(capture)
            yield capture

    found = robotstxt.history(catalog, warcs, ORIGIN, rows)
    assert len(found) == VISITS and all(r.text == RULES and r.status == 200 for r in found)
    assert [r.changed for r in found] == [True] + [False] * (VISITS - 1)
    assert warcs.opened == 1  # one payload, not one per capture
    assert len(read) <= VISITS + 1  # each row once (the first revisit's walk back finds it cached)


def test_what_was_in_force_is_read_alone_and_agrees_with_the_history(tmp_path: Path) -> None:
    catalog, warcs = archive(tmp_path)
    everything = robotstxt.history(catalog, warcs, ORIGIN)
    for day in (0, 1, 500, VISITS - 1, VISITS + 10):
        at = from_datetime(START + timedelta(days=day, hours=1))
        warcs.opened = 0
        alone = robotstxt.in_force(catalog, warcs, ORIGIN, at)
        assert alone == robotstxt.governing(everything, at)
        assert warcs.opened <= 2  # the capture, and a revisit's original its record names
    assert robotstxt.in_force(catalog, warcs, ORIGIN, "20191231000000") is None
