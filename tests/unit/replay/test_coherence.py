"""Temporal coherence's pure parts: the embeds the rewriter reports (and that reporting them changes
nothing it writes), redirects followed as replay follows them, skews and the spread, the query
parameter, the banner that shows them (escaped), and the replay.max_skew setting."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.config import ConfigError, ReplayConfig, load
from archiver.replay import pages
from archiver.replay.coherence import (
    EMBED_LIMIT,
    Served,
    assess,
    distinct,
    follow,
    skew,
    split_parameter,
)
from archiver.replay.rewrite import (
    FRAME,
    IFRAME,
    IMAGE,
    OBJECT,
    SCRIPT,
    STYLE,
    Embed,
    prepare_html,
    prepare_html_text,
    rewrite_html,
)
from archiver.store.catalogkeys import surt_key
from archiver.store.models import Capture
from archiver.web.timestamps import from_datetime, to_datetime

PAGE = "http://site.test/dir/page.html"
TS = "20260301120000"
DOC = """<!DOCTYPE html><html><head><base href="/dir/">
<link rel="stylesheet" href="site.css"><link rel="canonical" href="/canonical">
<link rel="icon" href="/favicon.ico"><script src="app.js"></script>
<style>body { background: url(bg.png) } @import "more.css";</style>
<meta http-equiv="refresh" content="5; url=/next.html"></head>
<body background="paper.png"><a href="other.html">next</a><form action="/search"></form>
<img src="logo.png" srcset="a.png 1x, b.png 2x"><img src="logo.png#again"><iframe src="frame.html"></iframe>
<frameset><frame src="f.html"></frameset><video src="v.mp4" poster="p.jpg"><source src="s.webm"></video>
<object data="o.swf"></object><embed src="e.swf"><div style="background: url('d.png')"></div>
<img src="data:image/png;base64,AAAA"><img src="#frag"><img src="mailto:x@y.z"></body></html>"""


def u(path: str) -> str:
    return f"http://site.test{path}"


def test_the_rewriter_reports_what_the_page_loads_not_where_it_leads():
    embeds = prepare_html_text(DOC, url=PAGE, timestamp=TS, prefix="").embeds
    assert embeds == [
        Embed(u("/dir/site.css"), STYLE), Embed(u("/favicon.ico"), IMAGE), Embed(u("/dir/app.js"), SCRIPT),
        Embed(u("/dir/bg.png"), IMAGE), Embed(u("/dir/more.css"), STYLE), Embed(u("/dir/paper.png"), IMAGE),
        Embed(u("/dir/logo.png"), IMAGE), Embed(u("/dir/a.png"), IMAGE), Embed(u("/dir/b.png"), IMAGE),
        Embed(u("/dir/logo.png"), IMAGE), Embed(u("/dir/frame.html"), IFRAME), Embed(u("/dir/f.html"), FRAME),
        Embed(u("/dir/v.mp4"), OBJECT), Embed(u("/dir/p.jpg"), IMAGE), Embed(u("/dir/s.webm"), OBJECT),
        Embed(u("/dir/o.swf"), OBJECT), Embed(u("/dir/e.swf"), OBJECT), Embed(u("/dir/d.png"), IMAGE),
    ]  # fmt: skip
    assert len(distinct(embeds)) == len(embeds) - 1  # logo.png twice (a fragment is no other URL)
    assert distinct(embeds)[6] == Embed(u("/dir/logo.png"), IMAGE)


tags = st.sampled_from(['<img src="{}">', '<a href="{}">', '<script src="{}"></script>', "<p>{}</p>",
                        '<link rel=stylesheet href="{}">', "<style>p {{ background: url({}) }}</style>",
                        '<iframe src="{}"></iframe>'])  # fmt: skip
paths = st.text("ab/.?=&#%<>\"' ", max_size=8)


@given(st.lists(st.tuples(tags, paths), max_size=10), st.sampled_from([None, "<div id=b>banner</div>"]))
def test_reporting_embeds_changes_nothing_the_rewriter_writes(parts, banner):
    doc = "<!DOCTYPE html><body>" + "".join(tag.format(path) for tag, path in parts)
    prepared = prepare_html(doc.encode(), url=PAGE, timestamp=TS, prefix="/p")
    written_before = rewrite_html(doc.encode(), url=PAGE, timestamp=TS, prefix="/p", banner=banner)
    assert prepared.to_bytes(banner) == written_before
    written = re.findall(rf"/p/web/{TS}(im_|cs_|js_|if_)/", prepared.render())
    assert written == [e.modifier for e in prepared.embeds]
    assert all(e.modifier in (IMAGE, STYLE, SCRIPT, IFRAME) for e in prepared.embeds)


def test_a_frameset_has_no_place_for_a_banner_but_reports_its_frames():
    frames = '<frameset><frame src="a.html"></frameset>'
    prepared = prepare_html_text(frames, url=PAGE, timestamp=TS, prefix="")
    assert prepared.banner_at is None and prepared.embeds == [Embed(u("/dir/a.html"), FRAME)]
    assert prepared.render("<div>banner</div>") == prepared.render()


# --- following redirects -----------------------------------------------------------------------


def cap(url: str, ts: str, redirect: str | None = None) -> Capture:
    status = 302 if redirect else 200
    return Capture(surt_key(url), ts, url, status, "text/html", "sha1:X", redirect, "f", 0, 1)


class Catalog:
    """A lookup over fixed captures: the closest one to ``at`` (ties to the earlier); calls counted."""

    def __init__(self, *captures: Capture) -> None:
        self.captures = captures
        self.calls: list[tuple[str, str]] = []

    def __call__(self, url: str, at: str) -> Capture | None:
        self.calls.append((url, at))
        mine = [c for c in self.captures if c.url == url]
        return min(mine, key=lambda c: (abs(skew(at, c.timestamp)), c.timestamp), default=None)


def test_follow_serves_the_closest_capture():
    catalog = Catalog(cap(u("/a.png"), "20260101000000"), cap(u("/a.png"), "20260305000000"))
    served = follow(Embed(u("/a.png"), IMAGE), TS, catalog)
    assert served == Served(Embed(u("/a.png"), IMAGE), catalog.captures[1], ())


def test_follow_asks_for_a_redirects_target_at_the_redirects_date():
    redirect = cap(u("/old.png"), "20260301000000", u("/new.png"))
    catalog = Catalog(redirect, cap(u("/new.png"), "20250101000000"), cap(u("/new.png"), "20260228000000"))
    served = follow(Embed(u("/old.png"), IMAGE), TS, catalog)
    assert served.capture == catalog.captures[2] and served.via == (u("/new.png"),)
    assert catalog.calls == [(u("/old.png"), TS), (u("/new.png"), "20260301000000")]


def test_follow_stops_a_redirect_loop_at_the_limit():
    catalog = Catalog(cap(u("/a"), TS, u("/b")), cap(u("/b"), TS, u("/a")))
    served = follow(Embed(u("/a"), IMAGE), TS, catalog, limit=5)
    assert len(catalog.calls) == 6 and len(served.via) == 5 and served.capture is not None


def test_follow_reports_what_is_not_archived():
    catalog = Catalog(cap(u("/a"), TS, u("/gone")))
    assert follow(Embed(u("/nothing"), IMAGE), TS, catalog).capture is None
    served = follow(Embed(u("/a"), IMAGE), TS, catalog)
    assert served.capture is None and served.via == (u("/gone"),)


# --- skews and the spread ----------------------------------------------------------------------


def test_skew_spread_and_flags():
    embeds = [Embed(u(f"/{n}"), IMAGE) for n in range(4)]
    served = [
        Served(embeds[0], cap(u("/0"), "20260301120500")),  # 5 minutes later
        Served(embeds[1], cap(u("/1"), "20260201000000")),  # 28.5 days earlier
        Served(embeds[2], cap(u("/2"), "20260302120000")),  # exactly one day: not beyond
        Served(embeds[3], None),
    ]
    report = assess(PAGE, TS, served, found=10, max_skew=86400)
    assert [e.skew for e in report.embeds] == [300, -(28 * 86400 + 12 * 3600), 86400, None]
    assert [e.exceeds for e in report.embeds] == [False, True, False, False]
    assert [e.url for e in report.skewed] == [u("/1")] and [e.url for e in report.missing] == [u("/3")]
    assert (report.earliest, report.latest) == ("20260201000000", "20260302120000")
    assert report.spread == 28 * 86400 + 12 * 3600 + 86400
    assert (report.found, report.checked, report.complete) == (10, 4, False)
    as_json = report.to_json()
    assert as_json["embeds"][1] == {"url": u("/1"), "kind": "image", "timestamp": "20260201000000",
                                    "skew": -(28 * 86400 + 12 * 3600), "exceeds_max_skew": True,
                                    "served_url": None}  # fmt: skip
    assert as_json["embeds"][3]["timestamp"] is None and as_json["embeds"][3]["skew"] is None
    assert as_json["timestamp"] == TS and as_json["max_skew"] == 86400 and as_json["complete"] is False


def test_a_page_without_embeds_spreads_over_nothing():
    report = assess(PAGE, TS, [], found=0, max_skew=0)
    assert (report.earliest, report.latest, report.spread, report.complete) == (TS, TS, 0, True)


@given(st.lists(st.integers(-10**8, 10**8), max_size=20), st.integers(0, 10**7))
def test_the_spread_holds_every_embed_and_the_page(offsets, max_skew):
    page = to_datetime(TS)
    served = [Served(Embed(u(f"/{n}"), IMAGE), cap(u(f"/{n}"), from_datetime(page + timedelta(seconds=s))))
              for n, s in enumerate(offsets)]
    report = assess(PAGE, TS, served, found=len(served), max_skew=max_skew)
    assert [e.skew for e in report.embeds] == offsets
    assert report.spread == max([0, *offsets]) - min([0, *offsets])
    assert len(report.skewed) == sum(abs(s) > max_skew for s in offsets)


# --- the query parameter -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rest", "split"),
    [(f"{TS}/http://a.org/", (f"{TS}/http://a.org/", None)),
     (f"{TS}/http://a.org/?coherence=json", (f"{TS}/http://a.org/", "json")),
     (f"{TS}/http://a.org/?q=1&coherence=json", (f"{TS}/http://a.org/?q=1", "json")),
     (f"{TS}/http://a.org/?coherence=json&q=1", (f"{TS}/http://a.org/?coherence=json&q=1", None)),
     (f"{TS}/http://a.org/?coherence", (f"{TS}/http://a.org/", "")),
     (f"{TS}/http://a.org/?coherence=xml", (f"{TS}/http://a.org/", "xml")),
     (f"{TS}/http://a.org/?xcoherence=json", (f"{TS}/http://a.org/?xcoherence=json", None))],
)  # fmt: skip
def test_split_parameter(rest, split):
    assert split_parameter(rest) == split


# --- the banner --------------------------------------------------------------------------------


def banner(report) -> str:
    return pages.banner(prefix="http://app", content="", url=PAGE, timestamp=TS, prev=None, next=None,
                        count=1, coherence=report)


def test_the_banner_shows_the_spread_and_lists_the_flagged_embeds_escaped():
    hostile = 'http://site.test/"><script>alert(1)</script>'
    served = [Served(Embed(u("/ok.png"), IMAGE), cap(u("/ok.png"), "20260301120010")),
              Served(Embed(u("/old.css"), STYLE), cap(u("/old.css"), "20250301120000")),
              Served(Embed(hostile, SCRIPT), None)]  # fmt: skip
    text = banner(assess(PAGE, TS, served, found=3, max_skew=86400))
    assert "\n" not in text and text.count("</div>") == 1 and text.endswith("</div>")
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    spread = "assembled from captures of <time>2025-03-01 12:00:00</time> to <time>2026-03-01 12:00:10</time>"
    assert spread in text
    assert "1 embed captured more than 1 day from the page, 1 embed not in the archive" in text
    assert 'href="/web/20250301120000/http://site.test/old.css"' in text and "365 days earlier" in text
    assert "ok.png" not in text  # within max_skew: not listed
    assert "<details" in text and " open>" in text  # three or fewer: open
    assert f'href="/web/{TS}/{PAGE}?coherence=json"' in text


def test_the_banner_collapses_a_long_list_and_says_what_it_did_not_check():
    served = [Served(Embed(u(f"/{n}.png"), IMAGE), None) for n in range(EMBED_LIMIT)]
    text = banner(assess(PAGE, TS, served, found=EMBED_LIMIT + 7, max_skew=86400))
    assert f"{EMBED_LIMIT} embeds not in the archive" in text and " open>" not in text
    assert f"dates of the first {EMBED_LIMIT} of {EMBED_LIMIT + 7} embeds checked" in text


def test_the_banner_says_nothing_of_a_page_without_embeds():
    text = banner(assess(PAGE, TS, [], found=0, max_skew=86400))
    assert "assembled" not in text and text == banner(None)


def test_a_query_on_the_page_keeps_the_json_link_in_the_query():
    text = pages.banner(prefix="", content="", url=u("/q?a=1"), timestamp=TS, prev=None, next=None, count=1,
                        coherence=assess(u("/q?a=1"), TS, [Served(Embed(u("/x"), IMAGE), None)], found=1,
                                         max_skew=0))  # fmt: skip
    assert f'href="/web/{TS}/http://site.test/q?a=1&amp;coherence=json"' in text


@pytest.mark.parametrize(("seconds", "text"), [(0, "0 s"), (59, "59 s"), (60, "1 min"), (-7200, "2 h"),
                                               (86400, "1 day"), (86400 * 400, "400 days")])  # fmt: skip
def test_duration(seconds, text):
    assert pages.duration(seconds) == text


# --- replay.max_skew ---------------------------------------------------------------------------


def test_max_skew_defaults_to_a_day_and_is_a_whole_number_of_seconds(tmp_path: Path):
    assert ReplayConfig().max_skew == 86400
    path = tmp_path / "archiver.toml"
    path.write_text("[replay]\nmax_skew = 0\n")
    assert load(path).replay.max_skew == 0
    for value, message in (("-1", "must not be negative"), ("1.5", "expected an integer"),
                           ('"1d"', "expected an integer")):  # fmt: skip
        path.write_text(f"[replay]\nmax_skew = {value}\n")
        with pytest.raises(ConfigError, match=f"replay.max_skew: {message}"):
            load(path)
