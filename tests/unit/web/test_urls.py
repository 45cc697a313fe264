"""Tests for archiver.web.urls: resolution, normalisation, origins, seeds, path segments."""

import random
import re

import pytest

from archiver.web.urls import (
    normalize,
    origin,
    origin_parts,
    path_segments,
    rejection,
    site_of_seed,
    split_origin,
)

RFC_BASE = "http://a/b/c/d;p?q"

# RFC 3986 §5.4.1 (normal) and §5.4.2 (abnormal), fragments dropped, "g:h" refused (not http).
RFC_EXAMPLES = [
    ("g:h", None),
    ("g", "http://a/b/c/g"),
    ("./g", "http://a/b/c/g"),
    ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"),
    ("//g", "http://g/"),
    ("?y", "http://a/b/c/d;p?y"),
    ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q"),
    ("g#s", "http://a/b/c/g"),
    ("g?y#s", "http://a/b/c/g?y"),
    (";x", "http://a/b/c/;x"),
    ("g;x", "http://a/b/c/g;x"),
    ("g;x?y#s", "http://a/b/c/g;x?y"),
    ("", "http://a/b/c/d;p?q"),
    (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"),
    ("..", "http://a/b/"),
    ("../", "http://a/b/"),
    ("../g", "http://a/b/g"),
    ("../..", "http://a/"),
    ("../../", "http://a/"),
    ("../../g", "http://a/g"),
    ("../../../g", "http://a/g"),
    ("../../../../g", "http://a/g"),
    ("/./g", "http://a/g"),
    ("/../g", "http://a/g"),
    ("g.", "http://a/b/c/g."),
    (".g", "http://a/b/c/.g"),
    ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"),
    ("./../g", "http://a/b/g"),
    ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"),
    ("g/../h", "http://a/b/c/h"),
    ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"),
    ("g?y/./x", "http://a/b/c/g?y/./x"),
    ("g?y/../x", "http://a/b/c/g?y/../x"),
    ("g#s/./x", "http://a/b/c/g"),
    ("g#s/../x", "http://a/b/c/g"),
    # §5.4.2 leaves "http:g" to the parser; browsers (WHATWG) resolve it, and so do we.
    ("http:g", "http://a/b/c/g"),
]


@pytest.mark.parametrize(("ref", "expected"), RFC_EXAMPLES)
def test_rfc3986_examples(ref, expected):
    assert normalize(ref, RFC_BASE) == expected


BASE = "https://www.example.com/news/2024/article.html?id=7"

CASES = [
    # case, default ports, empty path, userinfo, trailing dot
    ("HTTP://WWW.Example.COM", None, "http://www.example.com/"),
    ("http://example.com:80/a", None, "http://example.com/a"),
    ("https://example.com:443/a", None, "https://example.com/a"),
    ("https://example.com:80/a", None, "https://example.com:80/a"),
    ("http://example.com:443/", None, "http://example.com:443/"),
    ("http://example.com:08080/", None, "http://example.com:8080/"),
    ("http://example.com:/", None, "http://example.com/"),
    ("http://user:secret@example.com/", None, "http://example.com/"),
    ("http://a@b@example.com/", None, "http://example.com/"),
    ("http://example.com./x", None, "http://example.com/x"),
    ("http://my_host.example.com/", None, "http://my_host.example.com/"),
    # IDNA
    ("http://Bücher.example/", None, "http://xn--bcher-kva.example/"),
    ("http://BÜCHER.example/", None, "http://xn--bcher-kva.example/"),
    ("http://faß.de/", None, "http://xn--fa-hia.de/"),
    ("http://例え.テスト/", None, "http://xn--r8jz45g.xn--zckzah/"),
    # fullwidth "EXAMPLE" and full stop map to ASCII (UTS #46)
    ("http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\uff0ecom/", None, "http://example.com/"),
    ("http://i❤.ws/", None, "http://xn--i-7iq.ws/"),
    ("http://xn--bcher-kva.example/", None, "http://xn--bcher-kva.example/"),
    ("http://ex%41mple.com/", None, "http://example.com/"),
    # IP literals
    ("http://127.0.0.1:8080/x", None, "http://127.0.0.1:8080/x"),
    ("http://0x7f.1/", None, "http://127.0.0.1/"),
    ("http://2130706433/", None, "http://127.0.0.1/"),
    ("http://0177.0.0.1/", None, "http://127.0.0.1/"),
    ("http://[::1]/", None, "http://[::1]/"),
    ("http://[2001:DB8:0:0:0:0:0:1]:8080/", None, "http://[2001:db8::1]:8080/"),
    ("https://[::1]:443/", None, "https://[::1]/"),
    # percent-encoding
    ("http://a/%7euser/%41%2d%2E%5f", None, "http://a/~user/A-._"),
    ("http://a/x%2fy%2F", None, "http://a/x%2Fy%2F"),
    ("http://a/%e2%82%ac?q=%e2%82%ac", None, "http://a/%E2%82%AC?q=%E2%82%AC"),
    ("http://a/€ ö?q=ä b", None, "http://a/%E2%82%AC%20%C3%B6?q=%C3%A4%20b"),
    ('http://a/<x>"y"{z}|^`', None, "http://a/%3Cx%3E%22y%22%7Bz%7D%7C%5E%60"),
    ("http://a/%zz%", None, "http://a/%25zz%25"),
    ("http://a/%%61b", None, "http://a/%25ab"),
    ("http://a/%2e%2E/b/%2e/c", None, "http://a/b/c"),
    ("http://a/?a=1&b=%2a&c=%7e&d='", None, "http://a/?a=1&b=%2A&c=~&d='"),
    ("http://a/p?b=2&a=1", None, "http://a/p?b=2&a=1"),
    ("http://a/p?", None, "http://a/p?"),
    ("http://a/p?#f", None, "http://a/p?"),
    ("http://a/\ud800", None, "http://a/%EF%BF%BD"),
    # whitespace, controls, backslashes, slashes
    ("  \x00http://a/b\x1f ", None, "http://a/b"),
    ("http://a/b\tc\nd\re", None, "http://a/bcde"),
    ("http:\\\\a\\b\\c?x\\y", None, "http://a/b/c?x%5Cy"),
    ("http:/a/b", None, "http://a/b"),
    ("http:///a/b", None, "http://a/b"),
    ("http:a", None, "http://a/"),
    # fragments
    ("http://a/b#frag", None, "http://a/b"),
    ("#top", BASE, BASE),
    ("#", BASE, BASE),
    # relative references against a base with a query
    ("other.html", BASE, "https://www.example.com/news/2024/other.html"),
    ("  other.html  ", BASE, "https://www.example.com/news/2024/other.html"),
    ("../../index.html", BASE, "https://www.example.com/index.html"),
    ("../../../../../x", BASE, "https://www.example.com/x"),
    ("./a/../b/./c", BASE, "https://www.example.com/news/2024/b/c"),
    ("/search?q=a b&x=1", BASE, "https://www.example.com/search?q=a%20b&x=1"),
    ("?page=2", BASE, "https://www.example.com/news/2024/article.html?page=2"),
    ("?", BASE, "https://www.example.com/news/2024/article.html?"),
    ("", BASE, BASE),
    ("//cdn.example.net/x.js", BASE, "https://cdn.example.net/x.js"),
    ("\\\\cdn.example.net\\x.js", BASE, "https://cdn.example.net/x.js"),
    ("http://other.org", BASE, "http://other.org/"),
    ("http:/root", "http://a/b/c", "http://a/root"),
    ("https:g", "http://a/b/c", "https://g/"),
    ("http:", "http://a/b?q", "http://a/b?q"),
    ("Über uns/", BASE, "https://www.example.com/news/2024/%C3%9Cber%20uns/"),
    ("a:b", BASE, None),
    ("1a:b", BASE, "https://www.example.com/news/2024/1a:b"),
    ("./a:b", BASE, "https://www.example.com/news/2024/a:b"),
    # refused: other schemes
    ("mailto:someone@example.com", BASE, None),
    ("javascript:void(0)", BASE, None),
    ("JavaScript:alert(1)", BASE, None),
    ("data:text/html,hi", BASE, None),
    ("tel:+15555555", BASE, None),
    ("ftp://ftp.example.com/f", BASE, None),
    ("about:blank", BASE, None),
    ("c:\\windows", BASE, None),
    # refused: garbage, bad hosts, bad ports, no base
    ("http://", None, None),
    ("http:///", None, None),
    ("https://:8080/", None, None),
    ("http://user@/", None, None),
    ("http://a b.com/", None, None),
    ("http://a..b.com/", None, None),
    ("http://.a.com/", None, None),
    ("http://a.com../", None, None),
    ("http://a<b>.com/", None, None),
    ("http://a%00b.com/", None, None),
    ("http://a%ffb.com/", None, None),
    ("http://" + "a" * 64 + ".com/", None, None),
    ("http://" + "a." * 127 + "com/", None, None),
    ("http://example.123/", None, None),
    ("http://1.2.3.256/", None, None),
    ("http://1.2.3.4.5/", None, None),
    ("http://0x100000000/", None, None),
    ("http://[::1/", None, None),
    ("http://[::1]x/", None, None),
    ("http://[::g]/", None, None),
    ("http://[fe80::1%25eth0]/", None, None),
    ("http://a:b/", None, None),
    ("http://a:65536/", None, None),
    ("http://a:0/", None, None),
    ("http://a:-1/", None, None),
    ("http://a:\uff18\uff10/", None, None),  # fullwidth "80"
    ("http://a:1:2/", None, None),
    ("http://xn--a.😀😀\x00/", None, None),
    ("relative/path", None, None),
    ("//host/path", None, None),
    ("", None, None),
    ("   ", None, None),
]


@pytest.mark.parametrize(("url", "base", "expected"), CASES)
def test_normalize_table(url, base, expected):
    assert normalize(url, base) == expected


@pytest.mark.parametrize(("url", "base", "expected"), [c for c in CASES if c[2] is not None])
def test_normalize_is_idempotent_on_table(url, base, expected):
    assert normalize(expected) == expected
    assert normalize(expected, "http://z/y") == expected


_FRAGMENTS = [
    "http://", "https:", "HTTP:", "//", "/", "\\", "..", ".", "./", "../", "%", "%2e", "%2E",
    "%2f", "%41", "%61", "%7E", "%c3", "%e2%82%ac", "%zz", "%%", "%25", "a", "B", "ä", "日本",
    "😀", "\ud800", "?", "#", "@", ":", "[", "]", "::1", "[::1]", "80", "443", "8080", "0x7f",
    "1", "255", " ", "\t", "\n", "\x00", "xn--", "Bücher", "example.com", "EXAMPLE.com.", "-",
    "_", "~", ";", "=", "&", "'", '"', "<", ">", "{", "|", "^", "`", "mailto:", "javascript:", "g",
]  # fmt: skip
_BASES = [None, RFC_BASE, "https://xn--bcher-kva.example:8443/a/b/?x=%2F", "http://[::1]/"]
# Normal form: only characters allowed raw, and escapes with upper-case hex of reserved bytes.
_ESCAPE = r"%(?!2[DE]|3[0-9]|[46][1-9A-F]|[57][0-9A]|5F|7E)[0-9A-F]{2}"
_ALLOWED = re.compile(
    rf"https?://[a-z0-9_\-.\[\]:]+/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|{_ESCAPE})*\Z"
)


def _random_url(rng: random.Random) -> str:
    return "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 12)))


def test_fuzz_idempotent_and_well_formed():
    rng = random.Random(20240501)
    accepted = 0
    for _ in range(10000):
        url = _random_url(rng)
        if rng.random() < 0.5:
            url = rng.choice(["http://", "https://"]) + url
        base = rng.choice(_BASES)
        result = normalize(url, base)
        if result is None:
            continue
        accepted += 1
        assert normalize(result) == result, (url, base)
        assert normalize(result, RFC_BASE) == result, (url, base)
        assert _ALLOWED.match(result), (url, base, result)
        assert "/./" not in result.split("?")[0] and "/../" not in result.split("?")[0]
        head, tail = split_origin(result)
        assert head == origin(result) and head + tail == result and tail.startswith("/")
        scheme, host, port = origin_parts(head)
        assert scheme in ("http", "https") and host and 0 < port < 65536
    assert accepted > 2000  # the generator must exercise the accepting paths too


def test_long_inputs():
    # Linear-time matching: an exponential regex would not finish on these.
    path = "/x" * 50000
    assert normalize("http://a" + path + "%zz ") == "http://a" + path + "%25zz"
    assert normalize("http://a" + path + "%41%e2%82%ac") == "http://a" + path + "A%E2%82%AC"
    assert normalize("../" * 50000 + "b", RFC_BASE) == "http://a/b"
    assert normalize("http://" + "a" * 100000 + "/") is None


def test_origin_and_split_origin():
    assert origin("http://a.com/x?y") == "http://a.com"
    assert origin("https://a.com:8443/") == "https://a.com:8443"
    assert origin("http://[::1]:8080/p") == "http://[::1]:8080"
    assert origin("http://b/") == "http://b"
    assert split_origin("http://a.com/x/y?q=/z") == ("http://a.com", "/x/y?q=/z")
    assert split_origin("https://b/") == ("https://b", "/")
    assert split_origin("https://b/?") == ("https://b", "/?")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("http://a.com", ("http", "a.com", 80)),
        ("https://a.com", ("https", "a.com", 443)),
        ("http://a.com:8080", ("http", "a.com", 8080)),
        ("https://127.0.0.1:4443", ("https", "127.0.0.1", 4443)),
        ("http://[::1]", ("http", "::1", 80)),
        ("https://[2001:db8::1]:8443", ("https", "2001:db8::1", 8443)),
    ],
)
def test_origin_parts(value, expected):
    assert origin_parts(value) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("example.com", "http://example.com/"),
        ("  Example.COM  \n", "http://example.com/"),
        ("example.com:8080", "http://example.com:8080/"),
        ("example.com:80", "http://example.com/"),
        ("example.com/start?x=1", "http://example.com/start?x=1"),
        ("127.0.0.1:8000", "http://127.0.0.1:8000/"),
        ("[::1]:8000", "http://[::1]:8000/"),
        ("bücher.example", "http://xn--bcher-kva.example/"),
        ("https://example.com/a/../b", "https://example.com/b"),
        ("HTTPS://Example.com:443", "https://example.com/"),
        ("", None),
        ("   ", None),
        ("# a comment", None),
        ("ftp://example.com/", None),
        ("mailto:a@example.com", None),
        ("javascript:alert(1)", None),
        ("user@example.com", None),
        ("example.com:http", None),
        ("exa mple.com", None),
    ],
)
def test_site_of_seed(line, expected):
    assert site_of_seed(line) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a/", []),
        ("http://a/?x=/y/z", []),
        ("http://a/x", ["x"]),
        ("http://a/x/", ["x"]),
        ("http://a/x/y/x/y?q=1", ["x", "y", "x", "y"]),
        ("http://a/x//y", ["x", "", "y"]),
        ("http://a/b%20c/%E2%82%AC/%2F", ["b c", "€", "/"]),
        ("http://a/%FF", ["\ufffd"]),
        ("https://[::1]:8443/p/q", ["p", "q"]),
    ],
)
def test_path_segments(url, expected):
    assert path_segments(url) == expected


@pytest.mark.parametrize("url", ["http://-1.2.3.4/", "http://+1.2.3.4/x", "http://1_0.1.1.1/"])
def test_signed_or_underscored_ipv4_parts_never_raise(url):
    result = normalize(url)
    assert result is None or result.startswith("http://")


def test_is_normal_accepts_only_fixed_points_of_normalize():
    import random

    from archiver.web.urls import is_normal
    rng = random.Random(5)
    pieces = ["http://", "https://", "a", "B", "0", "1.2.3.4", "xn--bcher-kva", "-", "_", ".", "..",
              "/", "//", "/./", "/../", "/.", "?", "#", "%7e", "%2F", ":80", ":8080", "'", "[",
              "|", " ", "é", "~", "=", "&", "@", "a.test", "www.example.org", "x" * 64]
    accepted = 0
    for _ in range(60_000):
        url = "".join(rng.choice(pieces) for _ in range(rng.randint(2, 9)))
        if rng.random() < 0.5:
            url = rng.choice(["http://", "https://"]) + rng.choice(["a.test", "b.example.org"]) + url
        if is_normal(url):
            accepted += 1
            assert normalize(url) == url, url
    assert accepted > 500                               # the check is not vacuous
    for url in ["http://a.test/", "https://www.example.org/a/b.html?x=1&y='2'", "http://a_b.test/.x"]:
        assert is_normal(url) and normalize(url) == url
    for url in ["http://a.test:8080/", "http://1.2.3.4/", "http://a.test/%7E", "http://a.test/./x",
                "http://A.test/", "http://a.test", "http://a.test/x/..", "http://a.test/x/..?q"]:
        assert not is_normal(url)


@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        # issue 11: a query holding a URL skipped percent-encoding (the shadowed _NORMAL regex)
        ("/q?http://example.org/é", "http://a.test/", "http://a.test/q?http://example.org/%C3%A9"),
        ("/p?http://example.org/a b", "http://a.test/", "http://a.test/p?http://example.org/a%20b"),
        ("http://a.test/r?https://x.org/%zz\x01x", None, "http://a.test/r?https://x.org/%25zz%01x"),
        ("/s?u=http://x.org/ü&next=/a b", "http://a.test/", "http://a.test/s?u=http://x.org/%C3%BC&next=/a%20b"),
    ],
)
def test_queries_holding_urls_are_encoded(url, base, expected):
    assert normalize(url, base) == expected


BASE_FOR_REJECTIONS = "http://a.test/dir/page.html"


@pytest.mark.parametrize(
    ("url", "base", "reason"),
    [
        ("", None, "empty"),
        ("  \t\n", None, "empty"),
        ("#top", None, "empty"),
        ("mailto:someone@example.com", BASE_FOR_REJECTIONS, "scheme"),
        ("javascript:void(0)", BASE_FOR_REJECTIONS, "scheme"),
        ("data:text/html,hi", BASE_FOR_REJECTIONS, "scheme"),
        ("tel:+15555555", BASE_FOR_REJECTIONS, "scheme"),
        ("ftp://ftp.example.com/f", None, "scheme"),
        ("c:\\windows", BASE_FOR_REJECTIONS, "scheme"),
        ("relative/path", None, "relative-without-base"),
        ("?q=1", None, "relative-without-base"),
        ("//host/path", None, "relative-without-base"),
        ("page.html", "not a url", "base"),
        ("//host/path", "ftp://x/", "base"),
        ("http://", None, "host"),
        ("http://a b.com/", None, "host"),
        ("http://a..b.com/", None, "host"),
        ("http://1.2.3.256/", None, "host"),
        ("http://[::1/", None, "host"),
        ("http://[fe80::1%25eth0]/", None, "host"),
        ("//[::g]/x", BASE_FOR_REJECTIONS, "host"),
        ("http://a:65536/", None, "port"),
        ("http://a:0/", None, "port"),
        ("http://a:8o/", None, "port"),
        ("https://a:\uff18\uff10/", None, "port"),
        ("//a:-1/", BASE_FOR_REJECTIONS, "port"),
    ],
)
def test_rejection_reasons(url, base, reason):
    from archiver.web.urls import REJECTIONS, rejection

    assert normalize(url, base) is None
    assert rejection(url, base) == reason
    assert reason in REJECTIONS


@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        ("x", "HTTP://A.com/a b/c", "http://a.com/a%20b/x"),
        ("", "http://a.com/é?q=ü", "http://a.com/%C3%A9?q=%C3%BC"),
        ("#frag", "http://user@a.com:80/p", "http://a.com/p"),
        ("?y", "http://a.com/../p?x", "http://a.com/p?y"),
        ("x", "relative/base", None),
    ],
)
def test_a_base_that_is_not_normalised_is_normalised_first(url, base, expected):
    assert normalize(url, base) == expected


def test_rejection_of_an_accepted_link_is_empty():
    from archiver.web.urls import rejection

    assert rejection("/ok", BASE_FOR_REJECTIONS) == ""
    assert rejection("http://a.test/é") == ""


def test_a_gate_that_lets_everything_through_costs_the_link_not_a_non_uri(monkeypatch):
    # Simulate the issue-11 slip (a fast-path gate that matches raw text): the final URI check
    # must refuse the result rather than hand out a non-ASCII URL.
    from archiver.web import urls

    anything = re.compile(r".*", re.DOTALL)
    monkeypatch.setattr(urls, "_PLAIN", anything)
    monkeypatch.setattr(urls, "_NORMAL_TEXT", anything)
    assert normalize("/q?http://example.org/é", "http://a.test/") is None
    assert urls.rejection("/q?http://example.org/é", "http://a.test/") == "not-uri"
    assert normalize("/plain?x=1", "http://a.test/") == "http://a.test/plain?x=1"


def test_a_port_of_thousands_of_digits_is_a_bad_port_not_an_exception():
    # int() raises past 4300 digits: found by the fuzz tests of the replay rewriter (a <base>).
    for port in ("1" * 5000, "9" * 4301, "0" * 5000 + "65536"):
        assert normalize(f"http://a.b:{port}/") is None
        assert rejection(f"http://a.b:{port}/", None) == "port"
    assert normalize("http://a.b:" + "0" * 5000 + "80/") == "http://a.b/"   # leading zeros are fine
    assert normalize("http://a.b:" + "0" * 5000 + "8080/") == "http://a.b:8080/"


def test_a_scheme_relative_link_takes_the_normalised_bases_scheme():
    # Found by the property tests: the raw base's "HTTP" was taken for the scheme.
    assert normalize("//127.0.0.1", "HTTP://127.0.0.1#") == "http://127.0.0.1/"
    assert normalize("//a.b/x", "HTTPS://c.d/") == "https://a.b/x"
    assert rejection("//127.0.0.1%", "HTTP://127.0.0.1#") == "host"
