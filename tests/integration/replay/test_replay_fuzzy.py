"""Fuzzy matching through the replay service, in both modes (``tests.support.storemodes``): a
request that differs from a capture by a script's cache buster is served the capture closest in
time with an X-Archiver-Fuzzy-Match header; one no rule matches is a 404 as without fuzzy
matching; ``replay.fuzzy = false`` and operator rules hold."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from archiver.web.fuzzy import make_rule
from tests.support.httpclient import get
from tests.support.replayarchive import serving
from tests.support.storemodes import ModeArchive, entries_of, write_bundles

# One capture a second from storemodes.DATE, in this order.
PAGES = {
    "http://example.org/api/list.json?_=1764241000000": b'{"items": "first"}',
    "http://example.org/app.js?ver=6.3": b"console.log('app')",
    "http://example.org/page?id=1": b"<p>page one</p>",
    "http://example.org/search?q=owls&utm_source=feed": b"<p>owls</p>",
    "http://example.org/api/list.json?_=1764241000999": b'{"items": "second"}',
}
HEADER = "X-Archiver-Fuzzy-Match"


async def test_a_cache_buster_is_matched_and_marked(mode_archive: ModeArchive, tmp_path: Path) -> None:
    bundles = write_bundles(tmp_path / "new", PAGES)
    entries = entries_of(bundles)
    mode_archive.keep(bundles)
    with mode_archive.stores.catalog() as catalog:
        catalog.add(entries)
    at = {c.url: c.timestamp for c in entries}
    first, second = at["http://example.org/api/list.json?_=1764241000000"], at[
        "http://example.org/api/list.json?_=1764241000999"]
    search = make_rule({"name": "search-tracking", "path": "/search", "keep": ["q"]})
    async with serving(mode_archive.config, fuzzy_rules=(search,)) as running:
        content = running.content
        asked = "http://example.org/api/list.json?_=1764242222222"
        served = await get(content, f"/web/{first}id_/{asked}")
        assert (served.status, served.body, served.header(HEADER)) == (200, b'{"items": "first"}', "epoch-ms")
        # The closest in time wins; a timestamp of another second redirects, marked too.
        served = await get(content, f"/web/{second}id_/{asked}")
        assert (served.status, served.body) == (200, b'{"items": "second"}')
        moved = await get(content, f"/web/2026id_/{asked}")
        assert moved.status == 302 and moved.header(HEADER) == "epoch-ms"
        assert moved.header("Location") == f"/web/{first}id_/{asked}"
        script = await get(content, f"/web/{at['http://example.org/app.js?ver=6.3']}id_/"
                                    "http://example.org/app.js?ver=6.4.2")
        assert (script.status, script.header(HEADER)) == (200, "cache-buster")
        tracked = await get(content, f"/web/{at['http://example.org/search?q=owls&utm_source=feed']}id_/"
                                     "http://example.org/search?utm_source=mail&q=owls")
        assert (tracked.status, tracked.body) == (200, b"<p>owls</p>")
        assert tracked.header(HEADER) == "search-tracking"
        # An exact capture is served as ever, unmarked; a page no rule matches is missing.
        exact = await get(content, f"/web/{first}id_/http://example.org/api/list.json?_=1764241000000")
        assert exact.status == 200 and exact.header(HEADER) is None
        missing = await get(content, f"/web/{at['http://example.org/page?id=1']}id_/http://example.org/page?id=2")
        assert missing.status == 404 and missing.header(HEADER) is None
        other_query = await get(content, f"/web/{first}id_/http://example.org/search?q=mice&utm_source=feed")
        assert other_query.status == 404
        # /cdx answers a URL with no capture of its own with the captures of the URL a rule maps
        # it to (the latest, with no closest), marked; an exact URL or one no rule maps, as ever.
        listed = await get(running.app, f"/cdx?url={quote(asked, safe='')}&output=json")
        rows = [json.loads(line) for line in listed.body.decode().splitlines()]
        assert [(r["url"], r["fuzzy"]) for r in rows] == [
            ("http://example.org/api/list.json?_=1764241000999", "epoch-ms")]
        closest = await get(running.app, f"/cdx?url={quote(asked, safe='')}&closest={first}"
                                         "&fl=url,fuzzy&output=text")
        assert closest.body.decode().split() == [
            "http://example.org/api/list.json?_=1764241000000", "epoch-ms"]
        exact = await get(running.app, "/cdx?output=json&url=" + quote(
            "http://example.org/api/list.json?_=1764241000000", safe=""))
        assert [json.loads(line).get("fuzzy") for line in exact.body.decode().splitlines()] == [None]
        none = await get(running.app, "/cdx?url=" + quote("http://example.org/page?id=2", safe=""))
        assert (none.status, none.body) == (200, b"")
    async with serving(mode_archive.config, fuzzy=False) as running:
        off = await get(running.content, f"/web/{first}id_/{asked}")
        assert off.status == 404 and off.header(HEADER) is None
