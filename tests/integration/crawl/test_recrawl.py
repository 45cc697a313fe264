"""A recrawl: every site visited again, with conditional requests where the first capture had a
validator; unchanged payloads stored as revisit records (server-not-modified for a 304,
identical-payload-digest for the same payload again)."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from archiver.store.bundles import NOT_MODIFIED_PROFILE, REVISIT_PROFILE
from archiver.store.embedded.catalog import Catalog
from demoweb.server import validators
from tests.support.crawls import warc_files, warcio_check
from tests.support.replayarchive import TwoDates, copy_of


@pytest.fixture(scope="module")
def archive(two_dates_crawled: TwoDates, tmp_path_factory):
    return copy_of(two_dates_crawled, tmp_path_factory.mktemp("recrawl"))


def target(url: str) -> tuple[str, str]:
    """The host and request target of ``url``, as the demo web's ``respond`` takes them."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else "")


def served(web, url: str) -> bytes:
    return web.respond(*target(url)).body


def test_second_crawl_is_later_and_covers_the_first(archive):
    assert max(c.timestamp for c in archive.first) < min(c.timestamp for c in archive.second)
    # robots500.demo never finished (its robots.txt fails): it is retried, not recrawled.
    first_urls = {c.url for c in archive.first if "//robots500." not in c.url}
    second_urls = {c.url for c in archive.second}
    assert first_urls <= second_urls                   # every URL of a finished site fetched again
    assert any(u.endswith("/news/v1.html") for u in second_urls - first_urls)
    # robots.txt is fetched whole (never conditionally: its rules need a body), and obeyed: the
    # URLs of both versions of the web, and only those.
    assert second_urls <= archive.web0.expected("archiver") | archive.web1.expected("archiver")


def test_unchanged_payloads_are_revisits_and_changed_ones_responses(archive):
    first = {c.url: c for c in archive.first}
    kinds = {"not-modified": 0, "same-digest": 0, "changed": 0}
    for capture in archive.second:
        before = first.get(capture.url)
        if before is None or before.status != 200:
            continue
        same = served(archive.web0, capture.url) == served(archive.web1, capture.url)
        assert capture.rectype == ("revisit" if same else "response"), capture.url
        assert (capture.digest == before.digest) == same
        # What the demo web serves with a validator is asked for conditionally (robots.txt never:
        # its rules need a body): 304 if unchanged.
        validated = (validators(archive.web0.respond(*target(capture.url)))
                     and not capture.url.endswith("/robots.txt"))
        if same:
            assert capture.status == (304 if validated else 200), capture.url
        kinds["changed" if not same else "not-modified" if validated else "same-digest"] += 1
    assert all(kinds.values()), kinds


def test_revisit_records_point_at_their_original(archive):
    originals = {(c.url, c.timestamp): c for c in archive.first if c.rectype == "response"}
    found = {REVISIT_PROFILE: 0, NOT_MODIFIED_PROFILE: 0}
    for path in warc_files(archive.root):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "revisit":
                    continue
                h = record.rec_headers
                status = record.http_headers.get_statuscode()
                profile = h.get_header("WARC-Profile")
                assert profile == (NOT_MODIFIED_PROFILE if status == "304" else REVISIT_PROFILE)
                assert record.content_stream().read() == b""       # the head only
                stamp = "".join(ch for ch in h.get_header("WARC-Refers-To-Date") if ch.isdigit())
                original = originals[(h.get_header("WARC-Refers-To-Target-URI"), stamp)]
                assert h.get_header("WARC-Payload-Digest") == original.digest
                found[profile] += 1
    # The second crawl's, and any of the first (a retried robots.txt answering the same again).
    assert sum(found.values()) == sum(
        c.rectype == "revisit" for c in [*archive.first, *archive.second])
    assert all(found.values()), found


def test_warc_files_check_and_reindex_equals_live(archive, tmp_path):
    assert warcio_check(warc_files(archive.root)).returncode == 0
    with Catalog(archive.root / "catalog", archive.config.catalog.shards) as catalog:
        live = [c.to_json() for c in catalog.iter_all()]
    cfg = str(archive.config.path)
    done = subprocess.run([sys.executable, "-m", "archiver", "catalog", "reindex", "--config", cfg],
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    with Catalog(archive.root / "catalog", archive.config.catalog.shards) as catalog:
        assert [c.to_json() for c in catalog.iter_all()] == live
