"""Fuzz tests for archiver.web.cookies: any Set-Cookie value, browser cookie or persisted text is
taken or refused without an exception, and over any sequence of responses:

- the Cookie header is always a valid RFC 9110 field value (h11 accepts it);
- a cookie goes only to the host that set it or to hosts sharing its registrable domain (checked
  with tldextract's own registered domain, not the jar's matching), only to hosts that
  domain-match its domain (its host alone if host-only), and a Secure one only over https;
- JSON persistence and the browser's round trip keep the header of every URL.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import h11
import tldextract
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.cookies import REFUSALS, Cookie, CookieJar
from tests.support.fuzzing import examples

NOW = 1_700_000_000.0
HOSTS = (
    "example.com", "www.example.com", "a.www.example.com", "wwwexample.com", "example.org",
    "com", "co.uk", "bbc.co.uk", "www.bbc.co.uk", "github.io", "me.github.io", "you.github.io",
    "localhost", "a.test", "b.test", "127.0.0.1", "[::1]", "xn--bcher-kva.de",
)  # fmt: skip
PATHS = ("", "/", "/a", "/a/", "/a/b", "/ab", "/a/b/c", "/A", "/a?b/c")
_URLS = st.builds(lambda s, h, p: f"{s}://{h}{p}", st.sampled_from(["http", "https"]),
                  st.sampled_from(HOSTS), st.sampled_from(PATHS))
_DATES = ("Wed, 01 Jan 2031 00:00:00 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Nov 14 2023 23:00:00",
          "99 Jan 1 0:0:0", "garbage")
_ATTRIBUTES = st.one_of(
    st.sampled_from(["Secure", "HttpOnly", "secure", "Path", "Domain", "SameSite=None",
                     "SameSite=Lax", "SameSite=Strict", "SameSite=x", "Max-Age=", "Max-Age=-1",
                     "Max-Age=0", "Max-Age=30", "Max-Age=99999999999", "Max-Age=1e3", "x=y"]),
    st.sampled_from(HOSTS).map(lambda h: "Domain=" + h.strip("[]")),
    st.sampled_from(HOSTS).map(lambda h: "Domain=." + h.upper()),
    st.sampled_from(PATHS).map(lambda p: "Path=" + p),
    st.sampled_from(_DATES).map(lambda d: "Expires=" + d),
    st.text(max_size=12),
)
_NAMES = st.sampled_from(["a", "b", "SID", "__Secure-a", "__Host-a", "__host-b", "", " a "]) | st.text(
    max_size=6)
_SPACES = st.sampled_from(["", " ", "\t", "  "])


@st.composite
def _set_cookie(draw: st.DrawFn, value: str) -> str:
    """A near-valid Set-Cookie value whose cookie value is `value`."""
    name = draw(_NAMES)
    pair = f"{name}={value}" if name or draw(st.booleans()) else value
    attributes = draw(st.lists(_ATTRIBUTES, max_size=5))
    return pair + "".join(draw(_SPACES) + ";" + draw(_SPACES) + a for a in attributes)


# (url, set-cookie values, seconds later): one response each
_RESPONSES = st.lists(
    st.tuples(_URLS, st.lists(st.booleans(), min_size=1, max_size=4), st.integers(0, 100)),
    min_size=1, max_size=8,
)


def _receive_all(draw: st.DrawFn, jar: CookieJar) -> tuple[dict[str, tuple[str, bool]], float]:
    """Feed the jar drawn responses whose cookie values are unique tokens; return each token's
    (setting host, Secure attribute given) and the time after the last response."""
    origins: dict[str, tuple[str, bool]] = {}
    now = NOW
    for url, cookies, later in draw(_RESPONSES):
        now += later
        values = []
        for _ in cookies:
            token = f"v{len(origins)}x"
            text = draw(_set_cookie(token))
            origins[token] = (url.split("/")[2], bool(re.search(r";\s*secure\s*(;|$)", text, re.I)))
            values.append(text)
        for refusal in jar.receive(url, values, now):
            assert refusal.reason in REFUSALS
    return origins, now


_FIELD_VALUE = re.compile(r"[\x21-\x7e](?:[ \t]*[\x21-\x7e])*")  # RFC 9110 §5.5, ASCII only


def _check_header(header: str | None) -> None:
    if header is None:
        return
    assert _FIELD_VALUE.fullmatch(header), header
    h11.Request(method="GET", target="/", headers=[("Host", "h"), ("Cookie", header)])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.text(max_size=60) | st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
                max_size=6), st.text(max_size=30) | _URLS, _URLS)
def test_any_set_cookie_text_is_taken_or_refused_and_the_header_stays_valid(
        values: list[str], url: str, request: str) -> None:
    jar = CookieJar()
    for refusal in jar.receive(url, values, NOW):
        assert refusal.reason in REFUSALS
        assert refusal.name.isprintable() and refusal.name.isascii()
    _check_header(jar.header(request, NOW))
    _check_header(jar.header(url, NOW))


_SITES = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)


def _same_site(request_host: str, setting_host: str) -> bool:
    """The hosts are one, or share a registrable domain by the public suffix list."""
    if request_host == setting_host:
        return True
    registered = _SITES(request_host).top_domain_under_public_suffix
    return bool(registered) and registered == _SITES(setting_host).top_domain_under_public_suffix


@settings(max_examples=examples(150), deadline=None)
@given(st.data())
def test_a_cookie_goes_only_to_its_site_and_a_secure_one_only_over_https(data: st.DataObject
                                                                          ) -> None:
    jar = CookieJar()
    origins, now = _receive_all(data.draw, jar)
    for request in data.draw(st.lists(_URLS, min_size=1, max_size=6)):
        stored = {c.value: c for c in jar.cookies(now)}
        header = jar.header(request, now)
        _check_header(header)
        host = request.split("/")[2].strip("[]")
        for token in re.findall(r"v[0-9]+x", header or ""):
            setting_host, secure = origins[token]
            assert _same_site(host, setting_host.strip("[]")), (token, request)
            assert request.startswith("https:") or not secure
            cookie = stored[token]
            assert host == cookie.domain or (
                not cookie.host_only and host.endswith("." + cookie.domain)), (token, request)


def _headers(jar: CookieJar, now: float) -> list[str | None]:
    return [jar.header(f"{scheme}://{host}{path}", now)
            for scheme in ("http", "https") for host in HOSTS for path in ("/", "/a/b", "/ab")]


@settings(max_examples=examples(80), deadline=None)
@given(st.data())
def test_json_persistence_keeps_every_header(data: st.DataObject) -> None:
    jar = CookieJar()
    _, now = _receive_all(data.draw, jar)
    later = now + data.draw(st.sampled_from([0, 29, 31, 10**8]))
    again, reason = CookieJar.from_json(jar.to_json(later), later)
    assert reason is None
    assert again.cookies(later) == jar.cookies(later)
    assert _headers(again, later) == _headers(jar, later)


def _without_times(cookie: Cookie) -> tuple[Any, ...]:
    return (cookie.name, cookie.value, cookie.domain, cookie.host_only, cookie.path,
            cookie.secure, cookie.http_only, cookie.same_site, cookie.expires)


def _page_for(param: dict[str, Any]) -> str:
    """A page whose host could have set the cookie a CookieParam describes."""
    domain = param["domain"].lstrip(".")
    return f"https://[{domain}]/" if ":" in domain else f"https://{domain}/"


@settings(max_examples=examples(80), deadline=None)
@given(st.data())
def test_the_browser_round_trip_keeps_every_cookie_and_header(data: st.DataObject) -> None:
    jar = CookieJar()
    _, now = _receive_all(data.draw, jar)
    back = CookieJar()
    for param in jar.browser_cookies(now):
        assert back.receive_browser(_page_for(param), [param], now) == []
    assert [_without_times(c) for c in back.cookies(now)] == [
        _without_times(c) for c in jar.cookies(now)]
    assert _headers(back, now) == _headers(jar, now)


_JSON_PIECES = st.sampled_from([
    '{"cookie-jar": 1, "cookies": [', "]}", "{", "}", "[", "]", ",", '"name"', '"a"', ":", "1",
    "null", "true", "1e999", '"domain": "com"', '"host_only": false', "NaN", "-Infinity", '"\\ud800"',
])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_JSON_PIECES | st.text(max_size=5), max_size=20).map("".join))
def test_any_persisted_text_gives_a_jar(text: str) -> None:
    jar, reason = CookieJar.from_json(text, NOW)
    assert reason in (None, "not-json", "not-a-jar", "bad-entry")
    _check_header(jar.header("https://example.com/", NOW))


_BROWSER_VALUES: list[Callable[[], Any]] = [
    lambda: None, lambda: 1, lambda: "x", lambda: "", lambda: True, lambda: -1, lambda: 1e300,
    lambda: float("nan"), lambda: [], lambda: {}, lambda: ".example.com", lambda: "/",
]
_BROWSER_KEYS = ("name", "value", "domain", "path", "url", "expires", "session", "secure",
                 "httpOnly", "sameSite", "size")


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(_BROWSER_KEYS),
                                st.sampled_from(_BROWSER_VALUES).map(lambda make: make())
                                | st.text(max_size=8) | _URLS, max_size=8), max_size=5)
       | st.lists(st.integers() | st.text(max_size=3), max_size=3), _URLS)
def test_any_browser_cookie_is_taken_or_refused(cookies: list[Any], page: str) -> None:
    jar = CookieJar()
    for refusal in jar.receive_browser(page, cookies, NOW):
        assert refusal.reason in REFUSALS
    _check_header(jar.header(page, NOW))
