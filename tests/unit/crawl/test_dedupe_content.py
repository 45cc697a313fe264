"""A revisit compares only with content (archiver.crawl.dedupe): a gatekeeper's answer, a login's
exchange or a capture after a session was lost is not the URL's capture, in a real catalog."""

from __future__ import annotations

import trio

from archiver.crawl.bodies import BodyWork
from archiver.crawl.dedupe import NOT_CONTENT_ROWS, Dedupe
from archiver.crawl.http import FetchResult
from archiver.store.bundles import payload_digest
from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture, labels_text

URL = "http://example.org/page"
PAGE = b"<html><p>The page.</p></html>"
CHALLENGE = b"<html><title>Just a moment...</title></html>"


def capture(second: int, status: int, body: bytes, **labels: str) -> Capture:
    return Capture(surt_key(URL), f"2026010100{second // 60:02d}{second % 60:02d}", URL, status,
                   "text/html", payload_digest(body), None, "a.warc.gz", second * 1000, 900,
                   labels=labels_text(labels))


def earlier(tmp_path, captures: list[Capture]) -> list[Capture]:
    with Catalog(tmp_path / "catalog", 1) as catalog:
        catalog.add(captures)
        dedupe = Dedupe(catalog, None, BodyWork())
        return trio.run(dedupe.earlier, URL)


def test_a_revisit_after_a_challenge_compares_with_the_page_not_the_challenge(tmp_path) -> None:
    page = capture(0, 200, PAGE)
    found = earlier(tmp_path, [page, capture(1, 403, CHALLENGE, gatekeeper="challenge"),
                               capture(2, 200, CHALLENGE, gatekeeper="challenge")])
    assert found == [page]

    async def revisit() -> tuple[object, object]:
        with Catalog(tmp_path / "catalog", 1, readonly=True) as catalog:
            dedupe = Dedupe(catalog, None, BodyWork())
            asking = await dedupe.ask(found, dedupe="url", conditional=True)
            same = FetchResult(URL, "127.0.0.1", 0.0, status=200, body=PAGE)
            record, _ = await dedupe.record(same, asking, dedupe="url")
            return asking.base, record.original

    # The page fetched again unchanged is a revisit of the page's response.
    assert trio.run(revisit) == (page, page)


def test_the_gone_history_does_not_count_what_is_not_content(tmp_path) -> None:
    page, gone = capture(0, 200, PAGE), capture(1, 404, b"gone")
    found = earlier(tmp_path, [page, gone, capture(2, 429, b"slow down", gatekeeper="rate-limit"),
                               capture(3, 200, b"login form", login="s1"),
                               capture(4, 200, b"login form", **{"session-lost": "s1"})])
    assert found == [page, gone]


def test_a_session_capture_is_content(tmp_path) -> None:
    inside = capture(1, 200, b"members", session="s1")
    assert earlier(tmp_path, [capture(0, 200, PAGE), inside]) == [inside]


def test_the_walk_passes_over_a_bounded_number_of_not_content_captures(tmp_path) -> None:
    page = capture(0, 200, PAGE)
    challenges = [capture(1 + n, 403, CHALLENGE, gatekeeper="challenge") for n in range(NOT_CONTENT_ROWS)]
    assert earlier(tmp_path / "within", [page, *challenges]) == [page]
    one_more = capture(1 + NOT_CONTENT_ROWS, 403, CHALLENGE, gatekeeper="challenge")
    assert earlier(tmp_path / "past", [page, *challenges, one_more]) == []
