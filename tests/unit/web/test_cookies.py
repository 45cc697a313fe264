"""The cookie jar (archiver.web.cookies): each RFC 6265bis rule it applies, its limits, the public
suffix list read offline, persistence and the browser's shapes."""

from __future__ import annotations

import calendar
import json

import pytest
import requests

from archiver.web import cookies
from archiver.web.cookies import (
    MAX_AGE_SECONDS,
    MAX_COOKIES_PER_DOMAIN,
    CookieJar,
    Refusal,
    is_public_suffix,
    parse_cookie_date,
)

NOW = 1_700_000_000.0
DAY = 86400.0


def jar_with(url: str, *values: str, now: float = NOW) -> CookieJar:
    jar = CookieJar()
    assert jar.receive(url, values, now) == []
    return jar


def reasons(url: str, *values: str, jar: CookieJar | None = None) -> list[str]:
    return [r.reason for r in (jar or CookieJar()).receive(url, values, NOW)]


# --- parsing (§5.6) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("set_cookie", "header"), [
    ("a=1", "a=1"),
    ("  a  =  1 2  ; Path=/", "a=1 2"),  # whitespace around name and value goes, inside stays
    ("a=b=c", "a=b=c"),  # the value runs to the first ";", "=" included
    ("lonely", "lonely"),  # no "=": an empty name, and the header has the value alone
    ("=v", "v"),
    ("a=", "a="),
    ('a="quoted"', 'a="quoted"'),  # quotes are part of the value
    ("a=1; Unknown=zz; Foo; Path", "a=1"),  # unknown and valueless attributes are ignored
    ("a=1; Max-Age=abc", "a=1"),  # a malformed attribute is ignored, not the cookie
    ("a=1; Expires=not a date", "a=1"),
    ("a=1; SameSite=bogus", "a=1"),
    ("a=1; Domain=", "a=1"),  # an empty Domain is ignored: a host-only cookie
])
def test_a_set_cookie_value_parses_as_the_rfc_says(set_cookie: str, header: str) -> None:
    jar = jar_with("http://example.com/", set_cookie)
    assert jar.header("http://example.com/", NOW) == header


@pytest.mark.parametrize(("set_cookie", "reason"), [
    ("", "empty"),
    ("  ;  Path=/", "empty"),
    ("=", "empty"),
    ("a=1\x00", "bad-character"),
    ("a=1; Path=/\x07", "bad-character"),  # a control character anywhere ignores the cookie
    ("a=caf\u00e9", "bad-character"),  # non-ASCII: stricter than the RFC (module docstring)
    ("caf\u00e9=1", "bad-character"),
    ("a" * 4000 + "=" + "b" * 97, "too-large"),
])
def test_a_bad_set_cookie_value_is_refused_with_its_reason(set_cookie: str, reason: str) -> None:
    assert reasons("http://example.com/", set_cookie) == [reason]


def test_name_and_value_may_fill_exactly_the_size_limit() -> None:
    jar = jar_with("http://example.com/", "a" * 4000 + "=" + "b" * 96)
    assert len(jar) == 1


def test_a_too_long_attribute_is_ignored_not_the_cookie() -> None:
    jar = jar_with("http://example.com/dir/page", "a=1; Path=/" + "x" * 1024)
    assert jar.cookies(NOW)[0].path == "/dir"  # the default path: the attribute was ignored


@pytest.mark.parametrize(("text", "when"), [
    ("Sun, 06 Nov 1994 08:49:37 GMT", (1994, 11, 6, 8, 49, 37)),
    ("Sunday, 06-Nov-94 08:49:37 GMT", (1994, 11, 6, 8, 49, 37)),  # RFC 850
    ("Sun Nov  6 08:49:37 1994", (1994, 11, 6, 8, 49, 37)),  # asctime
    ("Wed, 01 Jan 2031 00:00:00 GMT", (2031, 1, 1, 0, 0, 0)),
    ("01 january 69 1:2:3", (2069, 1, 1, 1, 2, 3)),  # two-digit years: 0-69 are 20xx
    ("29 Feb 2024 12:00:00", (2024, 2, 29, 12, 0, 0)),
])
def test_cookie_dates_parse(text: str, when: tuple[int, ...]) -> None:
    assert parse_cookie_date(text) == calendar.timegm(when)


@pytest.mark.parametrize("text", [
    "", "Sun, 06 Nov 1994", "06 Nov 1994 24:00:00", "32 Nov 1994 08:49:37",
    "29 Feb 2023 12:00:00", "06 Nov 1600 08:49:37", "06 Foo 1994 08:49:37",
])
def test_bad_cookie_dates_do_not_parse(text: str) -> None:
    assert parse_cookie_date(text) is None


# --- expiry ------------------------------------------------------------------------------------


def test_max_age_sets_the_expiry_and_wins_over_expires() -> None:
    jar = jar_with("http://example.com/", "a=1; Expires=Wed, 01 Jan 2031 00:00:00 GMT; Max-Age=60",
                   "b=2; Max-Age=60; Expires=Wed, 01 Jan 2031 00:00:00 GMT")
    assert [c.expires for c in jar.cookies(NOW)] == [NOW + 60, NOW + 60]
    assert jar.header("http://example.com/", NOW + 59) == "a=1; b=2"
    assert jar.header("http://example.com/", NOW + 60) is None
    assert len(jar) == 0  # expired cookies are dropped


def test_expires_sets_the_expiry_and_is_capped_at_400_days() -> None:
    jar = jar_with("http://example.com/", "a=1; Expires=Tue, 14 Nov 2023 22:14:00 GMT",
                   "b=1; Expires=Wed, 01 Jan 2031 00:00:00 GMT", "c=1; Max-Age=999999999999")
    assert [c.expires for c in jar.cookies(NOW)] == [
        calendar.timegm((2023, 11, 14, 22, 14, 0)), NOW + MAX_AGE_SECONDS, NOW + MAX_AGE_SECONDS]


@pytest.mark.parametrize("deletion", [
    "a=; Max-Age=0", "a=x; Max-Age=-5", "a=; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
])
def test_a_past_expiry_deletes_the_cookie(deletion: str) -> None:
    jar = jar_with("http://example.com/", "a=1", "b=2")
    assert jar.receive("http://example.com/", [deletion], NOW + 1) == []
    assert jar.header("http://example.com/", NOW + 1) == "b=2"


def test_a_session_cookie_never_expires_in_the_jar() -> None:
    jar = jar_with("http://example.com/", "a=1")
    assert jar.cookies(NOW)[0].expires is None
    assert jar.header("http://example.com/", NOW + 1000 * DAY) == "a=1"


# --- domains (§5.7 steps 8-10) -----------------------------------------------------------------


def test_a_cookie_without_domain_is_host_only() -> None:
    jar = jar_with("http://www.example.com/", "a=1")
    assert jar.header("http://www.example.com/", NOW) == "a=1"
    assert jar.header("http://sub.www.example.com/", NOW) is None
    assert jar.header("http://example.com/", NOW) is None


@pytest.mark.parametrize("domain", ["example.com", ".example.com", "EXAMPLE.com"])
def test_a_domain_cookie_goes_to_the_domain_and_its_subdomains(domain: str) -> None:
    jar = jar_with("http://www.example.com/", f"a=1; Domain={domain}")
    for host in ("example.com", "www.example.com", "a.b.example.com"):
        assert jar.header(f"http://{host}/", NOW) == "a=1"
    for host in ("otherexample.com", "example.com.evil.net", "example.org"):
        assert jar.header(f"http://{host}/", NOW) is None


@pytest.mark.parametrize("attributes", ["Domain=", "Domain=.", "Domain=example.com; Domain=."])
def test_an_empty_domain_makes_a_host_only_cookie(attributes: str) -> None:
    jar = jar_with("http://example.com/", f"a=1; {attributes}")
    assert jar.header("http://www.example.com/", NOW) is None
    assert jar.header("http://example.com/", NOW) == "a=1"


def test_a_domain_equal_to_the_host_makes_a_domain_cookie() -> None:
    jar = jar_with("http://example.com/", "a=1; Domain=example.com")
    assert jar.header("http://www.example.com/", NOW) == "a=1"


@pytest.mark.parametrize(("host", "domain"), [
    ("www.example.com", "other.com"),
    ("www.example.com", "sub.www.example.com"),  # a subdomain of the host is not the host's
    ("example.com", "ample.com"),
    ("127.0.0.1", "0.0.1"),
    ("www.example.com", "exa mple.com"),
    ("www.example.com", "example.com:80"),  # a Domain is a host name, nothing else
    ("www.example.com", "example.com/x"),
    ("www.example.com", "user@example.com"),
    ("www.example.com", "example.com."),
    ("www.xn--bcher-kva.de", "bücher.de:1"),
    ("www.xn--bcher-kva.de", "bücher.de."),
])
def test_a_domain_the_host_does_not_match_is_refused(host: str, domain: str) -> None:
    assert reasons(f"http://{host}/", f"a=1; Domain={domain}") == ["domain-mismatch"]


@pytest.mark.parametrize(("host", "domain"), [
    ("www.example.com", "com"),
    ("www.bbc.co.uk", "co.uk"),
    ("someone.github.io", "github.io"),  # a private suffix
    ("a.test", "test"),  # single label: the list's default rule
])
def test_a_public_suffix_domain_is_refused(host: str, domain: str) -> None:
    assert reasons(f"http://{host}/", f"a=1; Domain={domain}") == ["public-suffix"]
    assert reasons(f"http://{host}/", f"a=1; Domain=.{domain.upper()}") == ["public-suffix"]


@pytest.mark.parametrize("host", ["github.io", "co.uk", "localhost"])
def test_a_public_suffix_domain_equal_to_the_host_makes_a_host_only_cookie(host: str) -> None:
    jar = jar_with(f"http://{host}/", f"a=1; Domain={host}")
    assert jar.cookies(NOW)[0].host_only
    assert jar.header(f"http://{host}/", NOW) == "a=1"
    assert jar.header(f"http://sub.{host}/", NOW) is None


def test_a_domain_equal_to_an_ip_address_makes_a_host_only_cookie() -> None:
    jar = jar_with("http://127.0.0.1:8080/", "a=1; Domain=127.0.0.1")
    assert jar.cookies(NOW)[0].host_only
    assert jar.header("http://127.0.0.1:9/", NOW) == "a=1"  # cookies ignore ports (§8.5)
    assert jar.header("http://1.127.0.0.1/", NOW) is None


def test_a_non_ascii_domain_is_compared_in_its_idna_form() -> None:
    jar = jar_with("http://www.xn--bcher-kva.de/", "a=1; Domain=BÜCHER.de")
    assert jar.header("http://bücher.de/", NOW) == "a=1"


def test_the_public_suffix_list_is_the_bundled_one_read_without_network(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the public suffix list was fetched")

    monkeypatch.setattr(requests.Session, "send", no_network)
    monkeypatch.setattr(requests.Session, "request", no_network)
    cookies._suffixes.cache_clear()
    try:
        assert is_public_suffix("co.uk") and is_public_suffix("github.io")
        assert len(cookies._suffixes().tlds) > 5000
        assert not is_public_suffix("example.co.uk") and not is_public_suffix("me.github.io")
    finally:
        cookies._suffixes.cache_clear()


# --- paths (§5.1.4) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "path"), [
    ("http://example.com/", "/"),
    ("http://example.com/page", "/"),
    ("http://example.com/dir/page", "/dir"),
    ("http://example.com/dir/", "/dir"),
    ("http://example.com/a/b/c?x=/y/z", "/a/b"),  # the query is not the path
])
def test_the_default_path_is_the_request_directory(url: str, path: str) -> None:
    assert jar_with(url, "a=1").cookies(NOW)[0].path == path


@pytest.mark.parametrize("attribute", ["Path=", "Path=relative", "Path"])
def test_a_path_not_starting_with_a_slash_means_the_default_path(attribute: str) -> None:
    assert jar_with("http://example.com/dir/page", f"a=1; {attribute}").cookies(NOW)[0].path == "/dir"


@pytest.mark.parametrize(("path", "sent", "kept"), [
    ("/docs", ["/docs", "/docs/", "/docs/a/b", "/docs?x"], ["/", "/doc", "/docsx", "/Docs"]),
    ("/docs/", ["/docs/", "/docs/a"], ["/docs", "/"]),
    ("/", ["/", "/anything"], []),
])
def test_a_cookie_goes_to_the_paths_its_path_matches(path: str, sent: list[str], kept: list[str]
                                                    ) -> None:
    jar = jar_with("http://example.com/", f"a=1; Path={path}")
    for p in sent:
        assert jar.header(f"http://example.com{p}", NOW) == "a=1", p
    for p in kept:
        assert jar.header(f"http://example.com{p}", NOW) is None, p


# --- Secure, prefixes, SameSite ----------------------------------------------------------------


def test_a_secure_cookie_is_set_over_https_only_and_sent_over_https_only() -> None:
    assert reasons("http://example.com/", "a=1; Secure") == ["secure-from-insecure"]
    jar = jar_with("https://example.com/", "a=1; Secure", "b=2")
    assert jar.header("https://example.com/", NOW) == "a=1; b=2"
    assert jar.header("http://example.com/", NOW) == "b=2"


def test_an_insecure_origin_cannot_overwrite_or_shadow_a_secure_cookie() -> None:
    jar = jar_with("https://www.example.com/", "a=1; Secure; Domain=example.com")
    assert reasons("http://www.example.com/", "a=2", jar=jar) == ["shadows-secure"]
    assert reasons("http://example.com/", "a=2; Path=/deeper", jar=jar) == ["shadows-secure"]
    assert reasons("http://www.example.com/", "b=2", jar=jar) == []  # another name is fine
    assert reasons("https://www.example.com/", "a=3", jar=jar) == []  # a secure origin may
    assert jar.header("https://www.example.com/", NOW) == "a=1; b=2; a=3"


@pytest.mark.parametrize(("url", "set_cookie", "refused"), [
    ("https://example.com/", "__Secure-a=1; Secure", False),
    ("https://example.com/", "__Secure-a=1", True),
    ("https://example.com/", "__secure-a=1", True),  # prefixes are case-insensitive
    ("https://example.com/", "__Host-a=1; Secure; Path=/", False),
    ("https://example.com/", "__Host-a=1; Secure", True),  # the Path attribute is required
    ("https://example.com/", "__Host-a=1; Secure; Path=/x", True),
    ("https://example.com/page", "__Host-a=1; Secure; Path=x", False),  # default path: "/"
    ("https://example.com/dir/page", "__Host-a=1; Secure; Path=x", True),  # "/dir"
    ("https://www.example.com/", "__Host-a=1; Secure; Path=/; Domain=example.com", True),
    ("https://example.com/", "__HOST-a=1; Path=/", True),
    ("https://example.com/", "=__Host-a", True),  # a nameless cookie may not look prefixed
    ("https://example.com/", "__Secure-", True),
])
def test_cookie_prefixes(url: str, set_cookie: str, refused: bool) -> None:
    assert reasons(url, set_cookie) == (["prefix"] if refused else [])


@pytest.mark.parametrize(("attribute", "kept"), [
    ("", "Default"), ("; SameSite=strict", "Strict"), ("; SameSite=LAX", "Lax"),
    ("; SameSite=None; Secure", "None"), ("; SameSite=Lax; SameSite=Strict", "Strict"),
    ("; SameSite=Strict; SameSite=bogus", "Default"),
])
def test_same_site_is_kept_and_filters_no_crawler_request(attribute: str, kept: str) -> None:
    jar = jar_with("https://example.com/", "a=1" + attribute)
    assert jar.cookies(NOW)[0].same_site == kept
    assert jar.header("https://example.com/", NOW) == "a=1"


def test_same_site_none_needs_secure() -> None:
    assert reasons("https://example.com/", "a=1; SameSite=None") == ["samesite-none-insecure"]


def test_a_non_http_url_is_refused_and_gets_no_header() -> None:
    jar = CookieJar()
    assert jar.receive("ftp://example.com/", ["a=1"], NOW) == [Refusal("a", "bad-url")]
    assert jar.receive("not a url", ["b=1"], NOW) == [Refusal("b", "bad-url")]
    assert jar.header("ftp://example.com/", NOW) is None


def test_a_refusal_names_the_cookie_never_its_value() -> None:
    refusals = CookieJar().receive("http://example.com/", ["sid=s3cr3t; Domain=com",
                                                          "s3cr3t; Domain=com"], NOW)
    assert refusals == [Refusal("sid", "public-suffix"), Refusal("", "public-suffix")]


# --- replacement and order ---------------------------------------------------------------------


def test_a_cookie_of_the_same_name_domain_and_path_replaces_the_old_one() -> None:
    jar = jar_with("http://example.com/", "a=1", "b=2")
    assert jar.receive("http://example.com/", ["a=3; HttpOnly"], NOW + 10) == []
    assert len(jar) == 2
    replaced = jar.cookies(NOW + 10)[0]
    assert (replaced.value, replaced.http_only, replaced.created) == ("3", True, NOW)
    assert jar.header("http://example.com/", NOW + 10) == "a=3; b=2"  # keeps its creation time


def test_cookies_of_the_same_name_on_other_paths_or_domains_live_side_by_side() -> None:
    jar = jar_with("http://www.example.com/", "a=1", "a=2; Path=/x", "a=3; Domain=example.com")
    assert len(jar) == 3
    assert jar.header("http://www.example.com/x", NOW) == "a=2; a=1; a=3"


def test_longer_paths_come_first_then_earlier_creation() -> None:
    jar = jar_with("http://example.com/", "late=1", now=NOW + 5)
    jar.receive("http://example.com/", ["early=1", "deep=1; Path=/a/b", "mid=1; Path=/a"], NOW)
    assert jar.header("http://example.com/a/b/c", NOW + 6) == "deep=1; mid=1; early=1; late=1"


# --- limits ------------------------------------------------------------------------------------


def test_a_flood_of_cookies_leaves_at_most_the_caps() -> None:
    jar = CookieJar()
    values = [f"c{i}=v; Domain=example.com" if i % 2 else f"h{i}=v" for i in range(10_000)]
    assert jar.receive("http://www.example.com/", values, NOW) == []
    assert len(jar) == 2 * MAX_COOKIES_PER_DOMAIN  # two domains: example.com, www.example.com
    more = [f"p{i}=v; Path=/{i}" for i in range(1000)]
    for n, host in enumerate(["a", "b", "c", "d", "e"]):
        jar.receive(f"http://{host}.example.com/", more, NOW + n)
    assert len(jar) == cookies.MAX_COOKIES
    assert len(jar.header("http://a.example.com/1", NOW + 9) or "") < 200


def test_a_jar_cap_evicts_the_least_recently_used() -> None:
    jar = CookieJar(max_cookies=3)
    for n in range(3):
        jar.receive(f"http://h{n}.example.com/", ["a=1"], NOW + n)
    assert jar.header("http://h0.example.com/", NOW + 10) == "a=1"  # h0 used last now
    jar.receive("http://h3.example.com/", ["a=1"], NOW + 11)
    assert sorted(c.domain for c in jar.cookies(NOW + 11)) == [
        "h0.example.com", "h2.example.com", "h3.example.com"]


def test_a_full_domain_evicts_insecure_cookies_before_secure_ones() -> None:
    jar = CookieJar()
    secure = [f"s{i}=1; Secure" for i in range(MAX_COOKIES_PER_DOMAIN - 1)]
    jar.receive("https://example.com/", secure, NOW)
    jar.receive("https://example.com/", ["plain=1"], NOW + 1)
    jar.receive("https://example.com/", ["newer=1; Secure"], NOW + 2)
    names = {c.name for c in jar.cookies(NOW + 2)}
    assert "plain" not in names and names >= {"s0", "newer"}


def test_a_jar_holds_at_least_one_cookie() -> None:
    with pytest.raises(ValueError, match="at least one"):
        CookieJar(max_cookies=0)


def test_expired_cookies_go_before_live_ones() -> None:
    jar = CookieJar(max_cookies=2)
    jar.receive("http://example.com/", ["old=1; Max-Age=5", "keep=1"], NOW)
    jar.receive("http://example.com/", ["new=1"], NOW + 10)
    assert jar.header("http://example.com/", NOW + 10) == "keep=1; new=1"


# --- persistence -------------------------------------------------------------------------------


def test_the_jar_survives_json_with_session_cookies_and_without_expired_ones() -> None:
    jar = jar_with("https://www.example.com/", "s=1", "p=2; Max-Age=100; Secure; HttpOnly",
                   "d=3; Domain=example.com; Path=/x; SameSite=Strict", "gone=1; Max-Age=10")
    text = jar.to_json(NOW + 20)
    again, reason = CookieJar.from_json(text, NOW + 20)
    assert reason is None
    assert again.cookies(NOW + 20) == jar.cookies(NOW + 20)
    assert {c.name for c in again.cookies(NOW + 20)} == {"s", "p", "d"}
    assert again.header("https://www.example.com/x", NOW + 20) == "d=3; s=1; p=2"


@pytest.mark.parametrize(("text", "reason"), [
    ("", "not-json"), ("{", "not-json"), ("[" * 100_000, "not-json"), ("\x00", "not-json"),
    ("[]", "not-a-jar"), ('{"cookies": []}', "not-a-jar"), ('{"cookie-jar": 2, "cookies": []}',
                                                           "not-a-jar"),
    ('{"cookie-jar": 1, "cookies": {}}', "not-a-jar"),
    ('{"cookie-jar": 1, "cookies": [1, "x", null, {}]}', "bad-entry"),
])
def test_corrupt_or_foreign_json_gives_an_empty_jar_and_a_reason(text: str, reason: str) -> None:
    jar, why = CookieJar.from_json(text, NOW)
    assert (len(jar), why) == (0, reason)


def entry(**changes: object) -> dict[str, object]:
    good = {"name": "a", "value": "1", "domain": "example.com", "host_only": True, "path": "/",
            "secure": False, "http_only": False, "same_site": "Default", "expires": None,
            "created": NOW, "last_access": NOW}
    return {**good, **changes}


@pytest.mark.parametrize("bad", [
    {"name": 1}, {"host_only": 1}, {"expires": "soon"}, {"created": float("nan")},
    {"created": True}, {"same_site": "lax"}, {"domain": "Example.com"}, {"domain": ".example.com"},
    {"domain": "com", "host_only": False}, {"path": "x"}, {"value": "a;b=c"}, {"name": "a=b"},
    {"value": " padded"}, {"name": "__Host-x"}, {"extra": 1},
])
def test_a_bad_persisted_cookie_is_skipped_and_the_others_kept(bad: dict[str, object]) -> None:
    text = json.dumps({"cookie-jar": 1, "cookies": [entry(name="ok"), entry(**bad)]})
    jar, reason = CookieJar.from_json(text, NOW)
    assert reason == "bad-entry"
    assert [c.name for c in jar.cookies(NOW)] == ["ok"]


# --- the browser -------------------------------------------------------------------------------


def test_browser_cookies_have_the_devtools_cookie_param_shape() -> None:
    jar = jar_with("https://www.example.com/a/b", "h=1; Secure; HttpOnly; SameSite=Lax",
                   "d=2; Domain=example.com; Path=/; Max-Age=60")
    assert jar.browser_cookies(NOW) == [
        {"name": "h", "value": "1", "path": "/a", "secure": True, "httpOnly": True,
         "domain": "www.example.com", "sameSite": "Lax"},
        {"name": "d", "value": "2", "path": "/", "secure": False, "httpOnly": False,
         "domain": ".example.com", "expires": NOW + 60},
    ]


def test_cookies_from_the_browser_are_taken_under_the_same_rules() -> None:
    jar = CookieJar()
    got = [  # Network.getCookies' shape
        {"name": "js", "value": "1", "domain": "www.example.com", "path": "/", "expires": -1,
         "size": 3, "httpOnly": False, "secure": False, "session": True},
        {"name": "wide", "value": "2", "domain": ".example.com", "path": "/", "expires": NOW + 60,
         "httpOnly": False, "secure": True, "session": False, "sameSite": "None"},
        {"name": "tld", "value": "3", "domain": ".com", "path": "/", "expires": -1},
        {"name": "ads", "value": "4", "domain": ".ads.example.net", "path": "/", "expires": -1},
        {"name": "bad", "value": "caf\u00e9", "domain": "www.example.com", "path": "/"},
        {"name": "__Host-x", "value": "5", "domain": "www.example.com", "path": "/x",
         "secure": True},
        {"name": "odd", "value": "6", "domain": "www.example.com", "path": "/", "expires": "x"},
        {"name": "up", "value": "7", "domain": "WWW.Example.COM", "path": "/up"},
    ]
    refusals = jar.receive_browser("https://www.example.com/page", got, NOW)
    assert [r.reason for r in refusals] == [
        "public-suffix", "domain-mismatch", "bad-character", "prefix", "bad-entry"]
    assert jar.header("https://www.example.com/", NOW) == "js=1; wide=2"
    assert jar.header("https://example.com/", NOW) == "wide=2"
    assert jar.cookies(NOW)[1].expires == NOW + 60
    assert jar.header("https://www.example.com/up", NOW) == "up=7; js=1; wide=2"


def test_an_ipv6_host_keeps_its_cookies_through_json_and_the_browser() -> None:
    jar = jar_with("http://[::1]:8080/", "a=1", "b=2; Domain=[::1]")
    assert jar.header("http://[::1]/", NOW) == "a=1; b=2"
    again, reason = CookieJar.from_json(jar.to_json(NOW), NOW)
    assert reason is None and again.header("http://[::1]/", NOW) == "a=1; b=2"
    back = CookieJar()
    got = [{"name": "a", "value": "1", "domain": "[::1]", "path": "/"}]
    assert back.receive_browser("http://[::1]/", got + jar.browser_cookies(NOW), NOW) == []
    assert back.header("http://[::1]/", NOW) == "a=1; b=2"
