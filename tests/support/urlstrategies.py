"""Hypothesis strategies for odd URLs, and an RFC 3986 URI checker written apart from urls.py.

The checker is transcribed from RFC 3986 Appendix A, independently of the regexes in
archiver/web/urls.py, so a slip there cannot hide itself in the tests.
"""

from __future__ import annotations

import ipaddress
import re

from hypothesis import strategies as st

from archiver.web.urls import normalize

# -- RFC 3986 Appendix A, transcribed ----------------------------------------------------------
_UNRESERVED = r"[A-Za-z0-9\-._~]"
_PCT_ENCODED = r"%[0-9A-Fa-f]{2}"
_SUB_DELIMS = r"[!$&'()*+,;=]"
_PCHAR = rf"(?:{_UNRESERVED}|{_PCT_ENCODED}|{_SUB_DELIMS}|[:@])"
_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])"
_IPV4 = rf"{_DEC_OCTET}\.{_DEC_OCTET}\.{_DEC_OCTET}\.{_DEC_OCTET}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = "|".join([
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
])  # fmt: skip
_IPVFUTURE = rf"v[0-9A-Fa-f]+\.(?:{_UNRESERVED}|{_SUB_DELIMS}|:)+"
_REG_NAME = rf"(?:{_UNRESERVED}|{_PCT_ENCODED}|{_SUB_DELIMS})*"
_HOST = rf"(?:\[(?:{_IPV6}|{_IPVFUTURE})\]|{_IPV4}|{_REG_NAME})"
_USERINFO = rf"(?:{_UNRESERVED}|{_PCT_ENCODED}|{_SUB_DELIMS}|:)*"
_AUTHORITY = rf"(?P<userinfo>{_USERINFO}@)?(?P<host>{_HOST})(?::(?P<port>[0-9]*))?"
_PATH_ABEMPTY = rf"(?P<path>(?:/{_PCHAR}*)*)"
_QUERY = rf"(?P<query>(?:{_PCHAR}|[/?])*)"
_FRAGMENT = rf"(?P<fragment>(?:{_PCHAR}|[/?])*)"
# Only the "//" authority form of hier-part: an http(s) URI always has one (RFC 9110 §4.2.1).
RFC3986_URI = re.compile(
    rf"(?P<scheme>[A-Za-z][A-Za-z0-9+\-.]*)://{_AUTHORITY}{_PATH_ABEMPTY}(?:\?{_QUERY})?(?:#{_FRAGMENT})?",
    re.ASCII,
)


def check_uri(url: str) -> None:
    """Fail unless `url` is an ASCII RFC 3986 URI in the archive's shape (http(s), a host, a
    path starting with '/', no userinfo, no fragment, no default port)."""
    assert url.isascii(), url
    match = RFC3986_URI.fullmatch(url)
    assert match is not None, url
    assert match["scheme"] in ("http", "https"), url
    assert match["host"] and match["userinfo"] is None and match["fragment"] is None, url
    assert match["path"].startswith("/"), url
    port = match["port"]
    if port is not None:
        assert port and port[0] != "0" and 0 < int(port) < 65536, url
        assert int(port) != {"http": 80, "https": 443}[match["scheme"]], url




# -- generators --------------------------------------------------------------------------------
_ODD = ["%", "%%", "%zz", "%4", "%41", "%7e", "%2e", "%2E", "%2f", "%25", "%c3%a9", "%C3", "%ff",
        "%00", " ", "\t", "\n", "\r", "\x00", "\x01", "\x7f", "\x85", "\xa0", "\u3000", "\ud800",
        "é", "ß", "日本", "😀", "\\", "/", "//", ".", "..", "./", "../", "?", "#", "@", ":", ";",
        "=", "&", "'", '"', "<", ">", "[", "]", "{", "}", "|", "^", "`", "~", "+", "!", "$", "*",
        "(", ")", ",", "a", "Z", "0", "9", "-", "_", "ﬁ", "\uff21", "http://", "https://x/"]  # fmt: skip
odd_text = st.lists(st.one_of(st.sampled_from(_ODD), st.text(max_size=3)), max_size=8).map("".join)

_LABELS = ["example", "EXAMPLE", "www", "a", "xn--bcher-kva", "xn--", "bücher", "faß", "例え",
           "\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25", "i❤", "my_host", "-dash", "dash-",
           "a" * 63, "a" * 64, "0x7f", "08", "1", "255", "256", "%41", "%00", "ex%41mple", "",
           "com", "org", "テスト"]  # fmt: skip


@st.composite
def ipv6_literal(draw: st.DrawFn) -> str:
    address = ipaddress.IPv6Address(draw(st.integers(0, 2**128 - 1)))
    text = draw(st.sampled_from([address.compressed, address.exploded,
                                 address.compressed.upper(), "::ffff:1.2.3.4", "::1", "1::",
                                 "::", "1:2:3:4:5:6:7:8:9", "::g", "1::2::3"]))
    zone = draw(st.sampled_from(["", "", "%25eth0", "%eth0"]))
    return f"[{text}{zone}]"


hosts = st.one_of(
    st.lists(st.one_of(st.sampled_from(_LABELS), odd_text), min_size=1, max_size=4).map(".".join),
    st.sampled_from(["127.0.0.1", "0x7f.1", "2130706433", "0177.0.0.1", "1.2.3.256", "1.2.3.4.5",
                     "example.com.", "example.com。", "a..b", ".a", "example.123", "localhost"]),
    ipv6_literal(),
)
userinfo = st.sampled_from(["", "", "", "user@", "user:pass@", "a@b@", ":@", "us er:p%41ss@", "é@"])
ports = st.one_of(
    st.just(""),
    st.integers(-5, 70000).map(lambda n: f":{n}"),
    st.sampled_from([":", ":0", ":080", ":65535", ":65536", ":99999999999999999999", ":8o",
                     ":\uff18\uff10", ":+80", ":1:2", ": 80"]),
)
paths = st.lists(st.one_of(st.sampled_from(["/", "\\", "/..", "/.", "/%2e%2E", "/a b", "/é"]),
                           odd_text), max_size=6).map("".join)


@st.composite
def absolute_urls(draw: st.DrawFn, depth: int = 1) -> str:
    scheme = draw(st.sampled_from(["http", "https"] * 3 + ["HTTP", "HtTpS", "ftp", "mailto", "javascript"]))
    slashes = draw(st.sampled_from(["://", "://", ":", ":/", ":///", ":\\\\"]))
    url = scheme + slashes + draw(userinfo) + draw(hosts) + draw(ports) + draw(paths)
    if draw(st.booleans()):
        url += "?" + draw(queries(depth))
    if draw(st.integers(0, 3)) == 0:
        url += "#" + draw(odd_text)
    return url


def queries(depth: int) -> st.SearchStrategy[str]:
    """Query strings, some holding whole URLs (redirectors, share buttons, next= links)."""
    keys = st.sampled_from(["", "", "", "u=", "url=", "next=", "to=", "q=a&r="])
    shaped = st.tuples(keys, st.sampled_from(["http://example.org/", "https://x.test/a/", "/next/"]),
                       odd_text).map("".join)
    if depth <= 0:
        return st.one_of(odd_text, shaped, shaped)
    return st.one_of(odd_text, shaped, shaped, st.tuples(keys, absolute_urls(depth - 1)).map("".join))


relative_refs = st.one_of(
    paths,
    st.tuples(paths, queries(1)).map("?".join),
    st.tuples(st.sampled_from(["//", "\\\\", "///"]), hosts, ports, paths).map("".join),
    st.tuples(st.sampled_from(["http:", "https:", "g:", "1a:", "./a:"]), paths).map("".join),
    odd_text,
)
BASE_SOURCES = ["http://a/b/c/d;p?q", "https://xn--bcher-kva.example:8443/a/b/?x=%2F",
                 "http://[::1]/", "http://127.0.0.1:8080/x", "https://example.com/"]
normal_bases = st.one_of(st.sampled_from(BASE_SOURCES), absolute_urls().map(normalize).filter(bool))
# Bases as a crawler has them (normalised), and raw ones (a WARC from elsewhere, a caller's slip).
bases = st.one_of(normal_bases, absolute_urls())
links = st.one_of(absolute_urls(), relative_refs, odd_text)


