"""The modern demo pages in plain Chromium (no archiving): the requests they are built to make
happen, as the demo server's log sees them. This is the judge a browser capture is held to; it
also shows that a plain browser fetches what robots.txt disallows (/private/tracker.js) and never
asks for robots.txt, so a crawl that does neither is archiver's doing."""

from __future__ import annotations

import re
import struct

from demoweb import DemoWeb
from demoweb.modern import ITEM_PAGES, MODERN_REQUESTS, SRCSET_WIDTHS, VIDEO_SOURCES
from tests.support.browsercrawls import SPEC
from tests.support.plainchromium import VIEWPORT, PlainLoad, plain_loads


def _paths(web: DemoWeb, loads: dict[str, PlainLoad]) -> dict[str, list[str]]:
    """Each load's requests by its page's target, as targets of the modern host, or "//assets" +
    target on the assets host."""
    modern, assets = web.origin("modern.demo"), web.origin("assets.demo")
    def short(url: str) -> str:
        return url.replace(assets, "//assets").removeprefix(modern)

    return {short(url): [short(seen) for seen in load.requests] for url, load in loads.items()}


def _size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def test_plain_chromium_makes_every_request_the_pages_are_built_to_make(
        modern_plain_loads: tuple[DemoWeb, dict[str, PlainLoad]]) -> None:
    web, by_path = modern_plain_loads  # the loads the capture tests are judged by
    origin = web.origin("modern.demo")
    loads = {origin + path: load for path, load in by_path.items()}
    paths = _paths(web, loads)
    for page, targets in MODERN_REQUESTS.items():
        seen = paths[page]
        assert seen[0] == page, (page, seen)  # the page itself first
        for target in targets:
            found = [s for s in seen if s.startswith(target.removesuffix("*"))] if target.endswith("*") else [
                s for s in seen if s == target]
            assert found, (page, target, seen)
        assert not any(s.endswith("/robots.txt") for s in seen), seen
    # The app's shell first, then its menu, then its first route's page (pushed at load).
    app = paths["/app/"]
    assert app.index("/app/") < app.index("/api/menu.json") < app.index("/api/pages/intro.json")
    # The infinite list ends at its last page; one srcset width and one video source chosen.
    assert f"/api/items?page={ITEM_PAGES + 1}" not in paths["/scroll.html"]
    assert len([s for s in paths["/srcset.html"] if s.startswith("/img/s-")]) == 1
    assert {s for s in paths["/srcset.html"] if s.startswith("/img/s-")} <= {
        f"/img/s-{w}.png" for w in SRCSET_WIDTHS}
    assert len([s for s in paths["/video.html"] if s in VIDEO_SOURCES]) == 1
    # Cache busters: the current time in milliseconds.
    assert any(re.fullmatch(r"/api/news\.json\?_=\d{13}", s) for s in paths["/xhr.html"])
    assert any(re.fullmatch(r"/api/jsonp\.js\?callback=jQuery3600_\d{13}", s) for s in paths["/xhr.html"])
    # Plain Chromium reads no robots.txt: it fetches the disallowed tracker; the page renders.
    assert sorted(paths["/blocked.html"]) == ["/blocked.html", "/js/render.js", "/private/tracker.js"]
    assert "written by an allowed script" in loads[origin + "/blocked.html"].text
    # What the scripts built is on the page.
    assert "Article 3" in loads[origin + "/fetch.html"].text
    assert f"Item {ITEM_PAGES * 10}" in loads[origin + "/scroll.html"].text
    assert "from the assets host" in loads[origin + "/cdn.html"].text
    for loaded in loads.values():
        assert _size(loaded.screenshot) == VIEWPORT


async def test_without_scrolling_and_playing_the_pages_hold_back(tmp_path):
    """What the behaviours bring: with no scroll and no play, the list stops at its first page,
    the images below the fold stay unloaded, and the video fetches nothing; a static page makes
    no request but itself."""
    chosen = ("/scroll.html", "/lazy.html", "/video.html", "/about.html")
    web, loads = await plain_loads(
        SPEC, tmp_path, lambda web: [web.origin("modern.demo") + p for p in chosen], scroll=False, play=False
    )
    paths = _paths(web, loads)
    assert paths["/scroll.html"] == ["/scroll.html", "/api/items?page=1"]
    assert "/img/lazy-3.png" not in paths["/lazy.html"] and "/img/lazy-4.png" not in paths["/lazy.html"]
    assert paths["/video.html"] == ["/video.html"]
    assert paths["/about.html"] == ["/about.html"]
