"""Tests for archiver.web.scriptneed: the `auto` rule on written pages, on the demo web (the
modern pages need scripts, no other page does), and on any input (never raises, bounded cost)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.scriptneed import MAX_READ, MIN_TEXT, needs_scripts
from demoweb import DemoWeb, Reply, WebSpec
from tests.support.fuzzing import CHARSETS, assert_cost_bounded, corpus, encoded, examples, html_documents
from tests.support.repo import ROOT
from tests.unit.web.test_extract_fuzz import _PATHOLOGICAL_HTML, _benign_html

AGENT = "archiver/0.1 (+http://archiver.test/)"
PROSE = b"<p>" + b"A paragraph of ordinary words that a reader reads. " * 12 + b"</p>\n"
SCRIPT = b'<script src="/js/app.js"></script>\n'


def page(body: bytes, head: bytes = b"") -> bytes:
    return b"<!DOCTYPE html><html><head><title>T</title>" + head + b"</head><body>" + body + b"</body></html>"


@pytest.mark.parametrize(("body", "reason"), [
    (page(b'<div id="app"></div>' + SCRIPT + PROSE), "empty app root #app"),
    (page(b'<div id="root">\n  <!-- rendered here -->\n</div>' + SCRIPT), "empty app root #root"),
    (page(b'<div id="__next"></div>', SCRIPT), "empty app root #__next"),
    (page(b"<app-root></app-root>" + PROSE, b'<script type="module" src="/main.js"></script>'),
     "empty app root <app-root>"),
    (page(b"<noscript>You need to enable JavaScript to run this app.</noscript>" + SCRIPT + PROSE),
     "noscript asks for JavaScript"),
    (page(b"<noscript><p>JavaScript is required.</p></noscript>" + PROSE + SCRIPT),
     "noscript asks for JavaScript"),
    (page(b'<main id="content"><p>Loading...</p></main>', SCRIPT),
     "text built by scripts: 10 characters of text, 1 scripts"),
    (page(b"<p>" + b"word " * 100 + b"</p><script>" + b"var x = 1;\n" * 2000 + b"</script>"),
     "text built by scripts: 400 characters of text, 1 scripts"),
    (page(PROSE + b'<img data-src="/img/a.png" class="lazy" alt="">' + SCRIPT),
     "images set by scripts: <img data-src> without src"),
])
def test_pages_that_need_scripts(body: bytes, reason: str) -> None:
    assert needs_scripts(body, "text/html; charset=utf-8") == reason


@pytest.mark.parametrize("body", [
    page(PROSE),  # no script at all
    page(b'<div id="app"></div>'),  # an empty app root, but nothing would fill it
    page(b"<p>Short.</p>"),  # little text, no script
    page(PROSE + b"<script>window.dataLayer = []; dataLayer.push({event: 'view'});</script>"),
    page(PROSE + b'<noscript><img src="/pixel.gif" alt=""></noscript>' + SCRIPT),
    page(b'<div id="app"><h1>Served</h1>' + PROSE + b"</div>" + SCRIPT),
    page(PROSE + b'<img src="/a.png" data-src="/a-large.png" alt="">' + SCRIPT),
    page(b"<p>Short.</p>" + b'<script type="application/ld+json">{"@type": "Article"}</script>'),
    page(b"<p>Short.</p><template><script>1</script></template>"),
])
def test_pages_that_show_their_content_without_scripts(body: bytes) -> None:
    assert needs_scripts(body, "text/html") is None


def test_only_html_is_judged() -> None:
    shell = page(b'<div id="app"></div>' + SCRIPT)
    for kind in (None, "text/html", "application/xhtml+xml"):
        assert needs_scripts(shell, kind) == "empty app root #app"
    for kind in ("text/plain", "application/json", "text/css", "image/svg+xml"):
        assert needs_scripts(shell, kind) is None


def _get(web: DemoWeb, url: str) -> Reply:
    parts = urlsplit(url)
    return web.respond(parts.hostname or "", parts.path + ("?" + parts.query if parts.query else ""))


def _html_pages(web: DemoWeb, urls: set[str] | list[str]) -> dict[str, str | None]:
    """Each HTML page among ``urls`` and what the rule says of it."""
    out = {}
    for url in sorted(urls):
        reply = _get(web, url)
        ctype = dict(reply.headers).get("Content-Type", "")
        if reply.status == 200 and ctype.startswith("text/html"):
            out[url] = needs_scripts(reply.body, ctype)
    return out


def auto_figure(web: DemoWeb) -> tuple[int, int]:
    """(pages the rule renders, HTML pages) over every HTML page of ``web`` a crawler can reach
    (an HTTP crawl's truth, and the pages the modern site's scripts link)."""
    judged = _html_pages(web, web.expected(AGENT) | set(web.modern_pages()) | set(web.modern_static_pages()))
    return sum(reason is not None for reason in judged.values()), len(judged)


def test_every_modern_page_needs_scripts() -> None:
    web = DemoWeb(WebSpec(modern=True))
    judged = _html_pages(web, web.modern_pages())
    assert len(judged) == 9 and all(judged.values()), judged


def test_no_page_of_the_default_web_nor_a_static_modern_page_needs_scripts() -> None:
    web = DemoWeb(WebSpec(modern=True))
    judged = _html_pages(web, web.expected(AGENT) | set(web.modern_static_pages()))
    static = {url: reason for url, reason in judged.items() if url not in web.modern_pages()}
    assert len(static) > 300 and not any(static.values()), {u: r for u, r in static.items() if r}
    # The demo web's own pages carry a script each (/js/app.js): the rule weighs their text.
    assert sum(b"<script" in _get(web, url).body for url in static) > 200


def test_how_often_auto_renders_on_the_demo_web() -> None:
    """The rule renders the modern pages and nothing else, and docs/capture.md gives the figure."""
    web = DemoWeb(WebSpec(modern=True))
    fired, pages = auto_figure(web)
    assert fired == len(web.modern_pages()) and pages > 400
    assert f"{fired} of the {pages} HTML pages" in (ROOT / "docs" / "capture.md").read_text()


# -- any input -------------------------------------------------------------------------------


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=3000), CHARSETS, st.sampled_from([None, "text/html", "application/xhtml+xml"]))
def test_any_bytes_give_a_reason_or_none(body: bytes, charset: str | None, kind: str | None) -> None:
    reason = needs_scripts(body, f"{kind}; charset={charset}" if kind and charset else kind)
    assert reason is None or (isinstance(reason, str) and 0 < len(reason) < 100)


@settings(max_examples=examples(40), deadline=None)
@given(encoded(html_documents()), CHARSETS)
def test_near_valid_html_gives_a_reason_or_none(body: bytes, charset: str | None) -> None:
    reason = needs_scripts(body, f"text/html; charset={charset}" if charset else "text/html")
    assert reason is None or isinstance(reason, str)


@pytest.mark.parametrize("name", sorted(_PATHOLOGICAL_HTML))
def test_pathological_html_costs_what_a_benign_page_of_its_size_does(name: str) -> None:
    body = _PATHOLOGICAL_HTML[name]
    needs_scripts(body, "text/html")
    assert_cost_bounded(lambda b: needs_scripts(b, "text/html"), body, _benign_html(len(body)),
                        factor=20, label=name)


def test_a_huge_page_costs_what_its_first_megabyte_does() -> None:
    huge = page(b'<div id="app"></div>' + PROSE * (40 * MAX_READ // len(PROSE)) + SCRIPT)
    assert len(huge) > 40 * MAX_READ
    assert needs_scripts(huge, "text/html") is None  # its script lies past what is read
    assert_cost_bounded(lambda b: needs_scripts(b, "text/html"), huge, huge[:MAX_READ], factor=3,
                        label="40 MiB page")


@pytest.mark.parametrize("path", corpus("html"), ids=lambda p: p.name)
def test_html_corpus(path: Path) -> None:
    body = path.read_bytes()
    assert_cost_bounded(lambda b: needs_scripts(b, "text/html"), body, _benign_html(len(body)), factor=20,
                        label=path.name)


def test_min_text_is_the_bound() -> None:
    assert needs_scripts(page(b"<p>" + b"x" * (MIN_TEXT - 1) + b"</p>", SCRIPT), "text/html") is not None
    assert needs_scripts(page(b"<p>" + b"x" * MIN_TEXT + b"</p>", SCRIPT), "text/html") is None
