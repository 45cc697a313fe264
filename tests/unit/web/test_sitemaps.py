"""Tests for archiver.web.sitemaps: the sitemap formats, lastmod, limits, hostile files, the walk."""

from __future__ import annotations

import gzip
import tracemalloc

import pytest

from archiver.web.sitemaps import (
    MAX_BYTES,
    MAX_ELEMENTS,
    MAX_LINES,
    MAX_LOC_CHARS,
    MAX_SITEMAPS,
    MAX_URLS,
    Sitemap,
    SitemapEntry,
    SitemapWalk,
    allowed,
    parse_lastmod,
    read_sitemap,
)
from tests.support.fuzzing import assert_cost_bounded

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
SITEMAP = "http://example.org/sitemap.xml"


def urlset(*entries: str, ns: str = f' xmlns="{NS}"') -> bytes:
    """A urlset of <url> entries, each a loc or a (loc, lastmod) written 'loc|lastmod'."""
    urls = []
    for entry in entries:
        loc, _, lastmod = entry.partition("|")
        date = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
        urls.append(f"<url><loc>{loc}</loc>{date}</url>")
    lines = "\n".join(urls)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset{ns}>\n{lines}\n</urlset>\n'.encode()


def index(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<sitemapindex xmlns="{NS}">{items}</sitemapindex>'.encode()


def urls(sitemap: Sitemap) -> list[str]:
    return [entry.url for entry in sitemap.entries]


# --- formats -----------------------------------------------------------------------------------


def test_a_urlset_gives_its_pages_with_lastmod() -> None:
    body = urlset("http://example.org/a|2024-01-02", "http://example.org/b?x=1&amp;y=2")
    sitemap = read_sitemap(body, SITEMAP)
    assert sitemap == Sitemap(
        "urlset",
        [
            SitemapEntry("http://example.org/a", 1704153600.0),
            SitemapEntry("http://example.org/b?x=1&y=2", None),
        ],
    )
    assert sitemap.pages == sitemap.entries


def test_urls_are_normalised_and_stripped() -> None:
    body = urlset("\n   HTTP://Example.ORG:80/a/../b#frag\n  ")
    assert urls(read_sitemap(body, SITEMAP)) == ["http://example.org/b"]


def test_an_index_gives_its_sitemaps_not_pages() -> None:
    sitemap = read_sitemap(index("http://example.org/s1.xml", "http://example.org/s2.xml.gz"), SITEMAP)
    assert sitemap.kind == "index"
    assert urls(sitemap) == ["http://example.org/s1.xml", "http://example.org/s2.xml.gz"]
    assert sitemap.pages == []


def test_no_namespace_and_googles_old_namespace_are_read() -> None:
    for ns in ("", ' xmlns="http://www.google.com/schemas/sitemap/0.84"'):
        assert urls(read_sitemap(urlset("http://example.org/a", ns=ns), SITEMAP)) == ["http://example.org/a"]


def test_a_foreign_namespace_is_not_a_sitemap() -> None:
    sitemap = read_sitemap(urlset("http://example.org/a", ns=' xmlns="http://example.com/other"'), SITEMAP)
    assert sitemap.kind == "unknown"
    assert sitemap.entries == []
    assert sitemap.error is not None and "root element" in sitemap.error


def test_extensions_are_skipped_without_failing() -> None:
    body = f"""<?xml version="1.0"?>
<urlset xmlns="{NS}" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9" xmlns:xhtml="http://www.w3.org/1999/xhtml">
  <url>
    <loc>http://example.org/a</loc>
    <xhtml:link rel="alternate" hreflang="de" href="http://example.org/de/a"/>
    <image:image><image:loc>http://example.org/img.png</image:loc></image:image>
    <news:news><news:publication><news:name>N</news:name></news:publication>
      <news:publication_date>2024-01-01</news:publication_date></news:news>
    <lastmod>2024-01-01</lastmod><changefreq>daily</changefreq><priority>0.5</priority>
  </url>
</urlset>""".encode()
    sitemap = read_sitemap(body, SITEMAP)
    assert sitemap.entries == [SitemapEntry("http://example.org/a", 1704067200.0)]
    assert sitemap.error is None


def test_a_loc_outside_an_entry_or_in_an_extension_element_is_no_entry() -> None:
    body = (f'<urlset xmlns="{NS}" xmlns:i="http://www.google.com/schemas/sitemap-image/1.1">'
            "<loc>http://example.org/stray</loc><i:url><loc>http://example.org/ext</loc></i:url>"
            "<url><x><loc>http://example.org/deep</loc></x><loc>http://example.org/ok</loc></url>"
            "<sitemap><loc>http://example.org/s.xml</loc></sitemap></urlset>").encode()  # fmt: skip
    assert urls(read_sitemap(body, SITEMAP)) == ["http://example.org/ok"]


def test_a_text_sitemap_gives_one_url_a_line() -> None:
    body = "\ufeffhttp://example.org/a\r\n\n  http://example.org/b  \nnot a url\nhttp://example.org/é\n".encode()
    sitemap = read_sitemap(body, "http://example.org/sitemap.txt")
    assert sitemap.kind == "text"
    assert urls(sitemap) == ["http://example.org/a", "http://example.org/b", "http://example.org/%C3%A9"]
    assert sitemap.refused == 1
    assert sitemap.error is None


def test_a_text_line_not_utf8_is_refused() -> None:
    sitemap = read_sitemap(b"http://example.org/\xff\nhttp://example.org/b\n", "http://example.org/s.txt")
    assert urls(sitemap) == ["http://example.org/b"]
    assert sitemap.refused == 1


def test_urls_that_are_not_absolute_http_are_refused() -> None:
    body = urlset("/relative", "mailto:a@example.org", "ftp://example.org/f", "javascript:x()", "",
                  "http://example.org/ok", "http://[bad/")  # fmt: skip
    sitemap = read_sitemap(body, SITEMAP)
    assert urls(sitemap) == ["http://example.org/ok"]
    assert sitemap.refused == 6


def test_an_overlong_loc_is_refused_unread() -> None:
    long = "http://example.org/" + "a" * MAX_LOC_CHARS
    for body in (urlset(long, "http://example.org/ok"), f"{long}\nhttp://example.org/ok\n".encode()):
        sitemap = read_sitemap(body, SITEMAP)
        assert urls(sitemap) == ["http://example.org/ok"]
        assert sitemap.refused == 1


def test_an_empty_body_is_no_sitemap() -> None:
    for body in (b"", b"  \n\t", b"\xef\xbb\xbf"):
        sitemap = read_sitemap(body, SITEMAP)
        assert (sitemap.kind, sitemap.entries, sitemap.error) == ("unknown", [], "empty")


# --- gzip --------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [SITEMAP, "http://example.org/sitemap.xml.gz", "http://example.org/s.txt"])
def test_gzip_is_recognised_by_its_magic_bytes_whatever_the_url(url: str) -> None:
    body = urlset("http://example.org/a")
    assert read_sitemap(gzip.compress(body), url) == read_sitemap(body, url)
    assert urls(read_sitemap(gzip.compress(b"http://example.org/t\n"), url)) == ["http://example.org/t"]


def test_two_gzip_layers_a_gz_file_sent_with_content_encoding_gzip() -> None:
    body = urlset("http://example.org/a")
    assert urls(read_sitemap(gzip.compress(gzip.compress(body)), SITEMAP)) == ["http://example.org/a"]


def test_gzip_members_one_after_the_other_are_one_file() -> None:
    body = urlset("http://example.org/a", "http://example.org/b")
    cut = body.index(b"<url>", body.index(b"</url>"))
    sitemap = read_sitemap(gzip.compress(body[:cut]) + gzip.compress(body[cut:]), SITEMAP)
    assert urls(sitemap) == ["http://example.org/a", "http://example.org/b"]
    assert sitemap.error is None


def test_a_cut_gzip_keeps_what_came_before_and_says_so() -> None:
    body = urlset(*(f"http://example.org/{i}" for i in range(2000)))
    packed = gzip.compress(body)
    sitemap = read_sitemap(packed[: len(packed) // 2], SITEMAP)
    assert 0 < len(sitemap.entries) < 2000
    assert urls(sitemap) == [f"http://example.org/{i}" for i in range(len(sitemap.entries))]
    assert sitemap.error == "gzip: the stream ends early"


def test_a_gzip_failing_its_check_is_read_and_says_so() -> None:
    """zlib sees damage only where the deflate stream breaks or at the CRC in the trailer; the
    step it fails in is lost (zlib gives no output with its error), what came before is read."""
    body = urlset(*(f"http://example.org/{i}" for i in range(2000)))
    packed = bytearray(gzip.compress(body))
    packed[-8] ^= 0xFF  # the CRC-32
    sitemap = read_sitemap(bytes(packed), SITEMAP)
    assert 0 < len(sitemap.entries) < 2000
    assert urls(sitemap) == [f"http://example.org/{i}" for i in range(len(sitemap.entries))]
    assert sitemap.error is not None and "incorrect data check" in sitemap.error


def test_a_broken_gzip_header_is_an_error() -> None:
    sitemap = read_sitemap(b"\x1f\x8b\x09" + gzip.compress(b"http://example.org/a\n")[3:], SITEMAP)
    assert (sitemap.kind, sitemap.entries) == ("unknown", [])
    assert sitemap.error is not None and sitemap.error.startswith("gzip: ")


# --- lastmod -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("2024", 1704067200.0),
        ("2024-02", 1706745600.0),
        ("2024-02-29", 1709164800.0),
        ("2024-02-29T10:20Z", 1709202000.0),
        ("2024-02-29T10:20:30Z", 1709202030.0),
        ("2024-02-29T10:20:30.75Z", 1709202030.0),
        ("2024-02-29T10:20:30+02:00", 1709194830.0),
        ("2024-02-29T10:20:30-05:30", 1709221830.0),
        ("2024-02-29T10:20:30+0200", 1709194830.0),
        ("2024-02-29T10:20:30", 1709202030.0),  # no TZD: UTC
        ("2024-02-29 10:20:30z", 1709202030.0),
        ("  2024-02-29\n", 1709164800.0),
        ("9999-12-31T23:59:59-23:59", 253402387139.0),  # past datetime's range in UTC
    ],
)
def test_lastmod_w3c_datetime_forms(text: str, epoch: float) -> None:
    assert parse_lastmod(text) == epoch


@pytest.mark.parametrize(
    "text",
    ["", "yesterday", "24", "2024-2-29", "2023-02-29", "2024-13-01", "2024-00-10", "2024-01-32",
     "2024-01-01T25:00Z", "2024-01-01T10:60Z", "2024-01-01T10Z", "2024-01-01T10:20:30+24:00",
     "2024-01-01T10:20:30+02:61", "0000-01-01", "2024-01-01T10:20:30Zjunk", "\uff12\uff10\uff12\uff14",
     "Mon, 01 Jan 2024"],
)  # fmt: skip
def test_malformed_lastmod_is_none(text: str) -> None:
    assert parse_lastmod(text) is None


def test_a_malformed_lastmod_costs_the_lastmod_not_the_url() -> None:
    body = urlset("http://example.org/a|not a date", "http://example.org/b|2024-13-45", "http://example.org/c|2024")
    assert read_sitemap(body, SITEMAP).entries == [
        SitemapEntry("http://example.org/a", None),
        SitemapEntry("http://example.org/b", None),
        SitemapEntry("http://example.org/c", 1704067200.0),
    ]


def test_an_index_keeps_its_childrens_lastmod() -> None:
    body = (f'<sitemapindex xmlns="{NS}"><sitemap><loc>http://example.org/s1.xml</loc>'
            "<lastmod>2024-01-01</lastmod></sitemap></sitemapindex>").encode()  # fmt: skip
    assert read_sitemap(body, SITEMAP).entries == [SitemapEntry("http://example.org/s1.xml", 1704067200.0)]


# --- limits ------------------------------------------------------------------------------------


def test_the_50001st_url_is_not_kept() -> None:
    body = urlset(*(f"http://example.org/{i}" for i in range(MAX_URLS + 1)))
    sitemap = read_sitemap(body, SITEMAP)
    assert len(sitemap.entries) == MAX_URLS
    assert sitemap.entries[-1].url == f"http://example.org/{MAX_URLS - 1}"
    assert sitemap.truncated
    assert sitemap.error is None


def test_exactly_50000_urls_is_a_whole_file() -> None:
    sitemap = read_sitemap(urlset(*(f"http://example.org/{i}" for i in range(MAX_URLS))), SITEMAP)
    assert len(sitemap.entries) == MAX_URLS
    assert not sitemap.truncated


def test_refused_entries_count_towards_the_url_limit() -> None:
    body = "".join(["junk\n"] * MAX_URLS + ["http://example.org/late\n"]).encode()
    sitemap = read_sitemap(body, "http://example.org/s.txt")
    assert sitemap.entries == []
    assert sitemap.refused == MAX_URLS
    assert sitemap.truncated


def test_a_text_sitemap_over_the_url_limit_is_truncated() -> None:
    body = "".join(f"http://example.org/{i}\n" for i in range(MAX_URLS + 5)).encode()
    sitemap = read_sitemap(body, "http://example.org/s.txt")
    assert len(sitemap.entries) == MAX_URLS
    assert sitemap.truncated


def _filled_urlset(size: int, filler: bytes) -> bytes:
    """A urlset with one page, then `filler` repeated up to `size` bytes (never closed)."""
    head = urlset("http://example.org/first").removesuffix(b"\n</urlset>\n")
    return head + filler * ((size - len(head)) // len(filler) + 1)


def test_a_body_over_50mb_is_truncated_keeping_what_came_before() -> None:
    body = _filled_urlset(MAX_BYTES + 10, b" ")
    sitemap = read_sitemap(body, SITEMAP)
    assert urls(sitemap) == ["http://example.org/first"]
    assert sitemap.truncated
    assert sitemap.error is None


def test_a_body_of_exactly_50mb_is_whole() -> None:
    head = urlset("http://example.org/first")
    sitemap = read_sitemap(head + b" " * (MAX_BYTES - len(head)), SITEMAP)
    assert urls(sitemap) == ["http://example.org/first"]
    assert not sitemap.truncated
    assert sitemap.error is None


def test_a_url_cut_by_the_byte_limit_is_not_kept() -> None:
    text = b"http://example.org/first\n" + b"\n" * (MAX_BYTES - 30) + b"http://example.org/longer-than-the-rest\n"
    sitemap = read_sitemap(text, "http://example.org/s.txt")
    assert urls(sitemap) == ["http://example.org/first"]
    assert sitemap.truncated


def test_a_gzip_bomb_stops_at_50mb_in_bounded_time() -> None:
    """A few hundred KB inflating to 200 MB: read as far as the cap, in the time the same 50 MB
    take uncompressed, not the time of inflating it all."""
    bomb = gzip.compress(_filled_urlset(4 * MAX_BYTES, b"          <!-- -->\n"), 9)
    assert len(bomb) < 1024 * 1024
    sitemap = read_sitemap(bomb, SITEMAP)
    assert urls(sitemap) == ["http://example.org/first"]
    assert sitemap.truncated
    plain = _filled_urlset(MAX_BYTES, b"          <!-- -->\n")
    assert_cost_bounded(lambda body: read_sitemap(body, SITEMAP), bomb, plain, factor=3, label="gzip bomb")


def test_a_gzip_bomb_is_inflated_in_small_steps() -> None:
    """Memory stays at a step's worth: 64 KiB of gzip may inflate to 64 MiB in one call without
    a bound on each call's output."""
    bomb = gzip.compress(_filled_urlset(4 * MAX_BYTES, b" "), 9)
    tracemalloc.start()
    try:
        sitemap = read_sitemap(bomb, SITEMAP)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sitemap.truncated
    assert peak < 4 * 1024 * 1024, peak


def test_a_gzip_bomb_in_a_gzip_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(gzip.compress(_filled_urlset(4 * MAX_BYTES, b" ")), 9)
    assert len(bomb) < 1024 * 1024
    sitemap = read_sitemap(bomb, SITEMAP)
    assert urls(sitemap) == ["http://example.org/first"]
    assert sitemap.truncated


def test_an_inner_gzip_layer_cut_by_the_limit_is_truncated_not_broken() -> None:
    stored = gzip.compress(_filled_urlset(MAX_BYTES + 1024 * 1024, b" "), 0)  # over 50 MB itself
    sitemap = read_sitemap(gzip.compress(stored, 1), SITEMAP)
    assert urls(sitemap) == ["http://example.org/first"]
    assert sitemap.truncated
    assert sitemap.error is None


def test_tiny_elements_stop_at_the_element_limit() -> None:
    sitemap = read_sitemap(_filled_urlset(MAX_ELEMENTS * 5, b"<a/>"), SITEMAP)
    assert urls(sitemap) == ["http://example.org/first"]
    assert sitemap.truncated


def test_blank_lines_stop_at_the_line_limit() -> None:
    body = b"http://example.org/first\n" + b" \n" * MAX_LINES + b"http://example.org/after\n"
    sitemap = read_sitemap(body, "http://example.org/s.txt")
    assert urls(sitemap) == ["http://example.org/first"]
    assert sitemap.truncated


# --- hostile XML -------------------------------------------------------------------------------

_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE urlset [\n<!ENTITY a "http://example.org/aaaaaaaaaa">\n'
    + b"".join(b'<!ENTITY %c "&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;&%c;">\n' % ((98 + i,) + (97 + i,) * 10)
               for i in range(9))
    + b"]>\n<urlset><url><loc>&j;</loc></url></urlset>"
)  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        _LAUGHS,
        b'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "http://example.org/evil.dtd"><urlset/>',
        b'<!DOCTYPE urlset [<!ENTITY e SYSTEM "file:///etc/passwd">]><urlset><url><loc>&e;</loc></url></urlset>',
        b'<!DOCTYPE urlset [<!ENTITY % p SYSTEM "http://example.org/p.dtd"> %p;]><urlset/>',
        b"<!DOCTYPE html><html><body>Not found</body></html>",
    ],
    ids=["billion laughs", "external DTD", "external entity", "parameter entity", "html"],
)
def test_a_doctype_is_refused(body: bytes) -> None:
    sitemap = read_sitemap(body, SITEMAP)
    assert sitemap.kind == "unknown"
    assert sitemap.entries == []
    assert sitemap.error == "XML: a DOCTYPE (no DTD is read in a sitemap)"


def test_a_doctype_after_entries_is_refused_too() -> None:
    # Not well-formed XML anyway (a DOCTYPE goes before the root), so expat's own error says so.
    body = urlset("http://example.org/a").replace(b"</urlset>", b"<!DOCTYPE x></urlset>")
    sitemap = read_sitemap(body, SITEMAP)
    assert sitemap.entries == [SitemapEntry("http://example.org/a", None)]
    assert sitemap.error is not None


def test_an_undefined_entity_is_an_error_not_a_lookup() -> None:
    body = urlset("http://example.org/a", "&ext;", "http://example.org/b")
    sitemap = read_sitemap(body, SITEMAP)
    assert urls(sitemap) == ["http://example.org/a"]
    assert sitemap.error is not None and "undefined entity" in sitemap.error


def test_broken_xml_keeps_what_came_before() -> None:
    body = urlset("http://example.org/a", "http://example.org/b", "http://example.org/c")
    broken = body.replace(b"<loc>http://example.org/c", b"<loc>http://example.org/c<</oops>")
    sitemap = read_sitemap(broken, SITEMAP)
    assert urls(sitemap) == ["http://example.org/a", "http://example.org/b"]
    assert sitemap.kind == "urlset"
    assert sitemap.error is not None and sitemap.error.startswith("XML: ")


def test_a_file_cut_short_keeps_its_whole_entries() -> None:
    body = urlset("http://example.org/a", "http://example.org/b")
    cut = body.index(b"http://example.org/b") + 10
    sitemap = read_sitemap(body[:cut], SITEMAP)
    assert urls(sitemap) == ["http://example.org/a"]
    assert sitemap.error is not None and sitemap.error.startswith("XML: ")


# --- which URLs a sitemap may list ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("sitemap_url", "url", "robots_origin", "expected"),
    [
        ("http://a.org/sitemap.xml", "http://a.org/any/page", None, True),
        ("http://a.org/shop/sitemap.xml", "http://a.org/shop/item", None, True),
        ("http://a.org/shop/sitemap.xml", "http://a.org/shop", None, False),
        ("http://a.org/shop/sitemap.xml", "http://a.org/blog/post", None, False),
        ("http://a.org/shop/sitemap.php?page=2", "http://a.org/shop/item", None, True),
        ("http://a.org/s.php?dir=/blog/", "http://a.org/blog/x", None, True),  # the directory is "/"
        ("http://a.org/sitemap.xml", "https://a.org/page", None, False),
        ("http://a.org/sitemap.xml", "http://www.a.org/page", None, False),
        ("http://a.org/sitemap.xml", "http://a.org:8080/page", None, False),
        ("http://a.org/sitemap.xml", "http://a.org.evil.com/page", None, False),
        ("http://cdn.b.org/maps/a.xml", "http://a.org/page", "http://a.org", True),  # cross-submit
        ("http://cdn.b.org/maps/a.xml", "http://c.org/page", "http://a.org", False),
        ("http://cdn.b.org/maps/a.xml", "http://cdn.b.org/maps/x", "http://a.org", True),
        ("http://a.org/shop/sitemap.xml", "http://a.org/blog/post", "http://a.org", True),
    ],
)
def test_allowed_urls_are_under_the_sitemap_or_of_the_robots_origin(
    sitemap_url: str, url: str, robots_origin: str | None, expected: bool
) -> None:
    assert allowed(sitemap_url, url, robots_origin) is expected


@pytest.mark.parametrize(
    ("index_url", "url", "robots_origin", "expected"),
    [
        ("http://a.org/maps/index.xml", "http://a.org/sitemap-posts.xml", None, True),
        ("http://a.org/maps/index.xml", "https://a.org/maps/1.xml", None, False),
        ("http://a.org/maps/index.xml", "http://b.a.org/maps/1.xml", None, False),
        ("http://cdn.b.org/index.xml", "http://a.org/x/1.xml", "http://a.org", True),
        ("http://cdn.b.org/index.xml", "http://c.org/1.xml", "http://a.org", False),
    ],
)
def test_an_index_lists_sitemaps_anywhere_on_its_origin(
    index_url: str, url: str, robots_origin: str | None, expected: bool
) -> None:
    assert allowed(index_url, url, robots_origin, index=True) is expected


def test_an_index_reads_its_children_by_the_index_rule() -> None:
    body = index("http://example.org/elsewhere/1.xml", "http://other.org/2.xml")
    sitemap = read_sitemap(body, "http://example.org/maps/index.xml")
    assert urls(sitemap) == ["http://example.org/elsewhere/1.xml"]
    assert sitemap.foreign == 1


def test_foreign_urls_are_counted_not_kept() -> None:
    body = urlset("http://example.org/shop/a", "http://example.org/blog/b", "http://other.org/shop/c")
    sitemap = read_sitemap(body, "http://example.org/shop/sitemap.xml")
    assert urls(sitemap) == ["http://example.org/shop/a"]
    assert sitemap.foreign == 2
    crossed = read_sitemap(body, "http://cdn.example.net/sitemap.xml", "http://example.org")
    assert urls(crossed) == ["http://example.org/shop/a", "http://example.org/blog/b"]
    assert crossed.foreign == 1


def test_a_sitemap_url_that_is_not_one_may_list_only_the_robots_origin() -> None:
    body = urlset("http://example.org/a", "http://other.org/b")
    assert urls(read_sitemap(body, "not a url")) == []
    assert urls(read_sitemap(body, "not a url", "http://example.org")) == ["http://example.org/a"]


# --- the walk ------------------------------------------------------------------------------------

ORIGIN = "http://example.org"


def drain(walk: SitemapWalk, bodies: dict[str, bytes]) -> tuple[list[str], list[str]]:
    """Fetch every URL the walk hands out from `bodies` (missing: a failed fetch); return the
    sitemap URLs handed out and the pages read."""
    fetched: list[str] = []
    pages: list[str] = []
    while (url := walk.next_url()) is not None:
        fetched.append(url)
        if url in bodies:
            pages += [entry.url for entry in walk.read(url, bodies[url]).pages]
    return fetched, pages


def test_the_walk_starts_from_robots_and_sitemap_xml_once_each() -> None:
    walk = SitemapWalk(ORIGIN, ["http://example.org/a.xml", "  /b.xml ", "mailto:x", "http://example.org/a.xml"])
    fetched, _ = drain(walk, {})
    assert fetched == ["http://example.org/a.xml", "http://example.org/b.xml", "http://example.org/sitemap.xml"]
    walk = SitemapWalk(ORIGIN, ["http://example.org/sitemap.xml"])
    assert drain(walk, {})[0] == ["http://example.org/sitemap.xml"]


def test_the_walk_follows_an_index_one_level_only() -> None:
    bodies = {
        "http://example.org/sitemap.xml": index("http://example.org/s1.xml.gz", "http://example.org/nested.xml"),
        "http://example.org/s1.xml.gz": gzip.compress(urlset("http://example.org/p1", "http://example.org/p2")),
        "http://example.org/nested.xml": index("http://example.org/s2.xml"),
        "http://example.org/s2.xml": urlset("http://example.org/deep"),
    }
    walk = SitemapWalk(ORIGIN, [])
    fetched, pages = drain(walk, bodies)
    assert fetched == ["http://example.org/sitemap.xml", "http://example.org/s1.xml.gz", "http://example.org/nested.xml"]
    assert pages == ["http://example.org/p1", "http://example.org/p2"]
    assert walk.too_deep == 1


def test_the_walk_never_hands_a_sitemap_out_twice() -> None:
    bodies = {
        "http://example.org/sitemap.xml": index(
            "http://example.org/a.xml", "http://example.org/sitemap.xml", "http://example.org/a.xml"
        ),
        "http://example.org/a.xml": urlset("http://example.org/p"),
    }
    fetched, pages = drain(SitemapWalk(ORIGIN, ["http://example.org/a.xml"]), bodies)
    assert fetched == ["http://example.org/a.xml", "http://example.org/sitemap.xml"]
    assert pages == ["http://example.org/p"]


def test_the_walk_hands_out_at_most_max_sitemaps() -> None:
    children = [f"http://example.org/s{i}.xml" for i in range(MAX_SITEMAPS + 10)]
    walk = SitemapWalk(ORIGIN, [])
    fetched, _ = drain(walk, {"http://example.org/sitemap.xml": index(*children)})
    assert len(fetched) == MAX_SITEMAPS
    assert walk.over_limit == 11
    assert walk.next_url() is None


def test_a_robots_sitemap_elsewhere_and_its_children_may_list_the_site() -> None:
    bodies = {
        "http://cdn.example.net/index.xml": index("http://cdn.example.net/maps/1.xml"),
        "http://cdn.example.net/maps/1.xml": urlset("http://example.org/p", "http://example.net/q"),
        "http://example.org/sitemap.xml": index("http://cdn.example.net/maps/2.xml"),
    }
    walk = SitemapWalk(ORIGIN, ["http://cdn.example.net/index.xml"])
    fetched, pages = drain(walk, bodies)
    # /sitemap.xml was not named by robots.txt: it may not list another host's sitemap.
    assert fetched == ["http://cdn.example.net/index.xml", "http://example.org/sitemap.xml",
                       "http://cdn.example.net/maps/1.xml"]  # fmt: skip
    assert pages == ["http://example.org/p"]
