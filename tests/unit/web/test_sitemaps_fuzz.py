"""Fuzz tests for archiver.web.sitemaps: any body reads without raising, and what it gives is sane."""

from __future__ import annotations

import gzip
import math
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.sitemaps import MAX_SITEMAPS, MAX_URLS, Sitemap, SitemapWalk, parse_lastmod, read_sitemap
from archiver.web.urls import normalize
from tests.support.fuzzing import examples

SITEMAP = "http://example.org/maps/sitemap.xml"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"

# --- a small grammar of XML-ish sitemaps ---------------------------------------------------------

_URLS = st.sampled_from(
    ["http://example.org/maps/a", "https://example.org/maps/b", "http://example.org/other", "/maps/rel",
     "HTTP://EXAMPLE.ORG/maps/%7e?q=1&amp;r=2", "mailto:x@example.org", "http://[::1/", "", "  \n",
     "http://example.org/maps/é", "&amp;", "&lt;", "&#x41;", "&#0;", "&undefined;", "]]>", "<![CDATA[http://example.org/maps/c]]>",
     "http://other.org/maps/d", "http://example.org/maps/" + "x" * 9000]
)  # fmt: skip
_DATES = st.sampled_from(
    ["2024", "2024-02", "2024-02-29", "2024-02-29T10:20Z", "2024-02-29T10:20:30.5+02:00", "2023-02-29",
     "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "", "x", "2024-01-01T24:00Z"]
)  # fmt: skip
_NAMESPACES = st.sampled_from(["", f' xmlns="{NS}"', ' xmlns="urn:other"', f' xmlns:s="{NS}"'])
_EXTRAS = st.sampled_from(
    ["", "<changefreq>daily</changefreq>", '<xhtml:link rel="alternate" href="http://example.org/x"/>',
     "<image:image><image:loc>http://example.org/maps/i.png</image:loc></image:image>", "<!-- c -->",
     "<?pi x?>", "<loc>http://example.org/maps/second</loc>", "<url><loc>http://example.org/maps/in</loc></url>",
     "<lastmod>2020</lastmod>", "<", "&", "</url>", "<!DOCTYPE x>", "\x00", "\ufeff"]
)  # fmt: skip


@st.composite
def _entry(draw: st.DrawFn) -> str:
    tag = draw(st.sampled_from(["url", "sitemap", "s:url", "other", "URL"]))
    parts = [f"<loc>{draw(_URLS)}</loc>"]
    if draw(st.booleans()):
        parts.append(f"<lastmod>{draw(_DATES)}</lastmod>")
    parts += draw(st.lists(_EXTRAS, max_size=3))
    parts = draw(st.permutations(parts))
    return f"<{tag}>{''.join(parts)}</{tag}>"


_PROLOGS = st.sampled_from(
    ["", '<?xml version="1.0" encoding="UTF-8"?>\n', "\ufeff", "  \n",
     '<?xml version="1.0" encoding="ISO-8859-1"?>', "<!DOCTYPE urlset>"]
)  # fmt: skip


@st.composite
def _xml(draw: st.DrawFn) -> bytes:
    root = draw(st.sampled_from(["urlset", "sitemapindex", "s:urlset", "rss", "html"]))
    prolog = draw(_PROLOGS)
    extensions = ' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1" xmlns:xhtml="http://www.w3.org/1999/xhtml"'
    text = (f"{prolog}<{root}{draw(_NAMESPACES)}{extensions if draw(st.booleans()) else ''}>"
            + "\n".join(draw(st.lists(_entry(), max_size=8))) + f"</{root}>")  # fmt: skip
    data = text.encode("utf-8")
    if draw(st.booleans()):  # cut anywhere: a broken or short file
        data = data[: draw(st.integers(0, len(data)))]
    return data


_TEXT = st.lists(st.one_of(_URLS, st.text(max_size=20)), max_size=10).map(
    lambda lines: "\n".join(lines).encode()
)
_BODIES = st.one_of(
    _xml(),
    _TEXT,
    st.binary(max_size=500),
    _xml().map(gzip.compress),
    _TEXT.map(lambda body: gzip.compress(gzip.compress(body))),
    st.tuples(_xml().map(gzip.compress), st.binary(max_size=20)).map(lambda pair: pair[0] + pair[1]),
    st.tuples(_xml().map(gzip.compress), st.integers(0, 200)).map(lambda pair: pair[0][: pair[1]]),
)


def _check(sitemap: Sitemap) -> None:
    """What every read gives: absolute http(s) URLs in normal form, sane lastmods, the limits."""
    assert sitemap.kind in ("urlset", "index", "text", "unknown")
    assert len(sitemap.entries) <= MAX_URLS
    assert sitemap.error is None or isinstance(sitemap.error, str)
    for entry in sitemap.entries:
        assert entry.url.startswith(("http://", "https://"))
        assert normalize(entry.url) == entry.url
        assert entry.lastmod is None or math.isfinite(entry.lastmod)
    if sitemap.kind == "unknown":
        assert sitemap.entries == [] and sitemap.error is not None


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=3000))
def test_any_bytes_read_without_raising(body: bytes) -> None:
    _check(read_sitemap(body, SITEMAP))


@settings(max_examples=examples(400), deadline=None)
@given(_BODIES, st.sampled_from([SITEMAP, "http://example.org/", "not a url", ""]),
       st.sampled_from([None, "http://example.org", "http://other.org"]))  # fmt: skip
def test_sitemap_like_bodies_read_without_raising(body: bytes, url: str, robots_origin: str | None) -> None:
    sitemap = read_sitemap(body, url, robots_origin)
    _check(sitemap)
    if normalize(url) is None and robots_origin is None:
        assert sitemap.entries == []


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_entry(), max_size=8))
def test_well_formed_urlsets_keep_every_allowed_url(entries: list[str]) -> None:
    """A whole urlset in the protocol's namespace: every entry is kept, refused or foreign."""
    body = f'<urlset xmlns="{NS}" xmlns:s="{NS}">{"".join(entries)}</urlset>'.encode()
    sitemap = read_sitemap(body, SITEMAP)
    _check(sitemap)
    if sitemap.error is None:
        assert sitemap.kind == "urlset"
        counted = len(sitemap.entries) + sitemap.refused + sitemap.foreign
        assert counted == sum(entry.startswith(("<url>", "<s:url>")) for entry in entries)


# --- lastmod -----------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_a_lastmod_or_none(text: str) -> None:
    value = parse_lastmod(text)
    assert value is None or math.isfinite(value)


@settings(max_examples=examples(300), deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
       st.integers(-23 * 60 - 59, 23 * 60 + 59), st.sampled_from(["T", " "]))  # fmt: skip
def test_a_written_datetime_reads_back(moment: datetime, offset: int, separator: str) -> None:
    moment = moment.replace(microsecond=0)
    sign = "+" if offset >= 0 else "-"
    zone = f"{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    text = moment.strftime(f"%Y-%m-%d{separator}%H:%M:%S").rjust(19, "0") + zone
    expected = (moment.replace(tzinfo=UTC) - timedelta(minutes=offset)) - datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_lastmod(text) == expected.total_seconds()


# --- the walk ------------------------------------------------------------------------------------

_SITEMAP_URLS = st.sampled_from([f"http://example.org/s{i}.xml" for i in range(6)] + ["http://example.org/sitemap.xml"])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_SITEMAP_URLS, max_size=4),
       st.dictionaries(_SITEMAP_URLS, st.lists(_SITEMAP_URLS, max_size=5), max_size=7))  # fmt: skip
def test_the_walk_hands_each_sitemap_out_once(robots: list[str], indexes: dict[str, list[str]]) -> None:
    """Whatever indexes list, each URL comes once, and only roots' children are followed."""
    walk = SitemapWalk("http://example.org", robots)
    roots = set(robots) | {"http://example.org/sitemap.xml"}
    handed: list[str] = []
    while (url := walk.next_url()) is not None:
        handed.append(url)
        children = indexes.get(url, [])
        walk.read(url, ("<sitemapindex>" + "".join(f"<sitemap><loc>{c}</loc></sitemap>" for c in children)
                        + "</sitemapindex>").encode())  # fmt: skip
    assert len(handed) == len(set(handed)) <= MAX_SITEMAPS
    reachable = roots | {child for root in roots for child in indexes.get(root, [])}
    assert set(handed) == reachable
