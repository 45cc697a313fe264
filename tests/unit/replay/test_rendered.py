"""A rendered page's records in replay's pure parts: the ``urn:screenshot:``/``urn:text:`` URLs a
request names, the screenshots of a capture list found in one catalog query, ``rendered`` in CDX
lines (whose urlkey may hold a space), and why's captured answer."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.replay import lookups
from archiver.replay.cdxquery import marked, parse_query, render, select
from archiver.replay.rewrite import parse_web_path, requested_url
from archiver.replay.scan import Scanner
from archiver.replay.why import Evidence, explain
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.store.warcindex import capture_fields
from tests.support.fuzzing import examples

PAGE = "http://example.org/app/"
START = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
REASON = "crawl.capture = browser"


def capture(url: str, seconds: int, labels: dict[str, str] | None = None, offset: int = 0) -> Capture:
    rectype = "response" if url == PAGE else "resource"
    return capture_fields(url=url, date=START + timedelta(seconds=seconds), status=200,
                          content_type="text/html" if url == PAGE else "image/png", location=None,
                          digest="sha1:X", filename="a.warc.gz", offset=offset or seconds,
                          length=10, rectype=rectype, labels=labels)


def test_requests_name_renderings_of_normalised_pages() -> None:
    assert requested_url("urn:screenshot:HTTP://Example.org:80/app/") == "urn:screenshot:" + PAGE
    assert requested_url("urn:text:example.org/app/") == "urn:text:" + PAGE
    target = parse_web_path("20260501080000id_/urn:screenshot:http://example.org/app/?q=1")
    assert (target.url, target.modifier) == ("urn:screenshot:http://example.org/app/?q=1", "id_")
    for bad in ("urn:foo", "urn:screenshot:", "urn:screenshot:ftp://x/", "urn:text:urn:text:" + PAGE):
        with pytest.raises(ValueError):
            requested_url(bad)


@settings(max_examples=examples(300))
@given(st.sampled_from(["urn:screenshot:", "urn:text:", "urn:", "urn:screenshot:http://"]),
       st.text(max_size=60))
def test_a_rendering_request_is_a_url_or_a_value_error(prefix: str, rest: str) -> None:
    try:
        url = requested_url(prefix + rest)
    except ValueError:
        return
    assert url.startswith(("urn:screenshot:http", "urn:text:http", "http"))
    assert requested_url(url) == url  # normalised once for all


class CountedCatalog:
    """A catalog that counts the queries made of it."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.queries: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.queries.append(name)
        return getattr(self.catalog, name)


@contextmanager
def counted(captures: list[Capture]) -> Iterator[CountedCatalog]:
    with tempfile.TemporaryDirectory() as folder, Catalog(Path(folder), 4) as catalog:
        catalog.add(captures)
        yield CountedCatalog(catalog)


def test_a_capture_lists_screenshots_come_from_one_query() -> None:
    pages = [capture(PAGE, s) for s in range(0, 300, 3)]
    shots = [capture("urn:screenshot:" + PAGE, s) for s in range(0, 300, 9)]
    stray = [capture("urn:screenshot:" + PAGE, 301), capture("urn:screenshot:" + PAGE, 4)]
    with counted(pages + shots + stray) as catalog:
        scanner = Scanner(catalog, slice_rows=7, max_rows=10**6, deadline=60, listings=1)  # type: ignore[arg-type]
        found = trio.run(scanner.collect, partial(lookups.screenshots, url=PAGE, captures=pages[:50]))
        assert catalog.queries == ["captures"]
        assert found == {c.timestamp for c in pages[:50:3]}
        catalog.queries.clear()
        assert trio.run(scanner.look_up, partial(lookups.has_screenshot, url=PAGE, at=pages[3].timestamp))
        assert not trio.run(scanner.look_up, partial(lookups.has_screenshot, url=PAGE, at=pages[1].timestamp))
        assert catalog.queries == ["captures", "captures"]
        assert trio.run(scanner.collect, partial(lookups.screenshots, url="urn:text:" + PAGE,
                                                 captures=pages)) == set()


def test_cdx_lines_carry_rendered_and_keep_spaced_urlkeys_whole() -> None:
    rows = [capture(PAGE, 0, {"rendered": REASON}), capture(PAGE, 5)]
    lines = [render(parse_query([("url", PAGE)]), row) for row in select(parse_query([("url", PAGE)]), rows)]
    assert json.loads(lines[0].split(" ", 2)[2])["rendered"] == REASON
    assert "rendered" not in json.loads(lines[1].split(" ", 2)[2])
    shots = [capture("urn:screenshot:" + PAGE, s) for s in (0, 5, 9)]
    stamps = [c.timestamp for c in shots]
    # The modes that hold lines and read them back (closest, reverse, the last N), and fuzzy's.
    for params, expected in (([("sort", "reverse")], stamps[::-1]),
                             ([("closest", stamps[1])], [stamps[1], stamps[2], stamps[0]]),
                             ([("limit", "-2")], stamps[1:])):
        query = parse_query([("url", "urn:screenshot:" + PAGE), ("output", "json"), *params])
        out = [json.loads(render(query, row)) for row in select(query, shots)]
        assert [r["timestamp"] for r in out] == expected
        assert {(r["urlkey"], r["url"]) for r in out} == {("org,example)/app urn:screenshot",
                                                          "urn:screenshot:" + PAGE)}
    query = parse_query([("url", "urn:screenshot:" + PAGE)])
    line = render(query, marked(next(select(query, shots)), "rule"))
    assert line.startswith(f"org,example)/app urn:screenshot {stamps[0]} {{")
    assert json.loads(line.split(" ", 3)[3])["fuzzy"] == "rule"

def test_why_says_a_capture_was_rendered_and_why() -> None:
    rendered = capture(PAGE, 0, {"rendered": REASON, "lang": "en"})
    plain = dataclasses.replace(capture(PAGE, 5), labels='{"lang":"en"}')
    base = Evidence(PAGE, "http://example.org", rendered.timestamp, [rendered, plain], [], None, None,
                    None, 2048)
    answer = explain(base)
    assert answer.captured and answer.facts["rendered"] == REASON
    assert f"(status 200, a response, rendered in a browser ({REASON}))," in answer.reason
    later = explain(dataclasses.replace(base, at=plain.timestamp))
    assert later.captured and "rendered" not in later.facts and "browser" not in later.reason
