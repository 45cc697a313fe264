"""Differential test: archiver.web.urls.normalize against ada-url (the WHATWG URL parser of Node.js)
on a committed corpus of real-world-shaped links (tests/data/url_corpus.jsonl, made by
tests/support/urlcorpus.py).

Where we differ from WHATWG we do so on purpose, and each class of difference is listed in
DIFFERENCES with its reason and a rewrite that turns ada's answer into ours. Every pair must be
equal after the rewrites of the classes it needs; every class must be needed by some pair (so
none is a dead blanket excuse); and most pairs must agree without any rewrite.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable

import ada_url

from archiver.web.urls import normalize
from tests.support import urlcorpus

_HEX = "0123456789ABCDEFabcdef"
_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 §3.3-3.4: what may stand raw in a path (pchar and "/") and a query (also "?").
_PATH_RAW = _UNRESERVED | set("!$&'()*+,;=:@/")
_QUERY_RAW = _PATH_RAW | {"?"}
_DNS_LABEL = re.compile(r"[a-z0-9_-]{1,63}\Z")

Parts = dict[str, str]  # ada's components: hostname, port, username, password, pathname, search


def _drop_userinfo(parts: Parts) -> Parts | None:
    return {**parts, "username": "", "password": ""}


def _drop_trailing_dot(parts: Parts) -> Parts | None:
    host = parts["hostname"]
    return {**parts, "hostname": host[:-1]} if host.endswith(".") else parts


def _refuse_port_0(parts: Parts) -> Parts | None:
    return None if parts["port"] == "0" else parts


def _refuse_non_dns_host(parts: Parts) -> Parts | None:
    host = parts["hostname"]
    if host.startswith("[") or re.fullmatch(r"[0-9.]+", host):
        return parts  # IP literals: ada and we agree on those
    labels = host.split(".")
    if len(host) > 253 or not all(_DNS_LABEL.match(label) for label in labels):
        return None
    return parts


def _fix_escapes(text: str, raw: set[str]) -> str:
    """RFC 3986 form of a WHATWG path or query: '%' starting no escape becomes %25 (§2.4),
    escapes of unreserved characters are decoded and hex is upper-case (§6.2.2.1-2), and
    characters RFC 3986 does not allow raw are percent-encoded (§2.1)."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "%":
            pair = text[i + 1 : i + 3]
            if len(pair) == 2 and all(c in _HEX for c in pair):
                decoded = chr(int(pair, 16))
                out.append(decoded if decoded in _UNRESERVED else "%" + pair.upper())
                i += 3
                continue
            out.append("%25")
        elif char in raw:
            out.append(char)
        else:
            out.append("".join(f"%{b:02X}" for b in char.encode()))
        i += 1
    return "".join(out)


def _escapes_in_path(parts: Parts) -> Parts | None:
    return {**parts, "pathname": _fix_escapes(parts["pathname"], _PATH_RAW)}


def _escapes_in_query(parts: Parts) -> Parts | None:
    search = parts["search"]
    return {**parts, "search": search and "?" + _fix_escapes(search[1:], _QUERY_RAW)}


def _apostrophe_in_query(parts: Parts) -> Parts | None:
    return {**parts, "search": parts["search"].replace("%27", "'")}


# (class, reason, rewrite of ada's parts into what we return). Order matters: later rewrites
# see the earlier ones' output.
DIFFERENCES: list[tuple[str, str, Callable[[Parts], Parts | None]]] = [
    ("userinfo", "dropped: not part of a resource's identity, never sent (RFC 9110 §4.2.4), "
     "and an archive must not keep passwords", _drop_userinfo),
    ("trailing-dot", "'example.com.' is the same site as 'example.com' (IA SURT, Safe Browsing); "
     "one host, one crawl", _drop_trailing_dot),
    ("port-0", "valid WHATWG syntax, but nothing can listen on port 0", _refuse_port_0),
    ("non-dns-host", "a host DNS cannot carry (characters outside letters, digits, '-', '_', "
     "empty or >63-byte labels, >253 bytes) cannot be fetched", _refuse_non_dns_host),
    ("path-rfc3986", "RFC 3986 escapes in the path: WHATWG leaves '%' garbage and [ ] | raw and "
     "keeps escape case; WARC-Target-URI must be a URI and equal URIs one key", _escapes_in_path),
    ("query-rfc3986", "the same in the query, where WHATWG also leaves ^ { } ` \\ raw",
     _escapes_in_query),
    ("query-apostrophe", "WHATWG escapes ' in special-scheme queries; RFC 3986 allows it raw "
     "(a sub-delim) and servers read both alike", _apostrophe_in_query),
]


def ada_parts(link: str, base: str) -> Parts | None:
    """ada's parse of `link` against `base`, or None if it fails or is not http(s)."""
    try:
        parsed = ada_url.parse_url(ada_url.join_url(base, link))
    except ValueError:
        return None
    if parsed["protocol"] not in ("http:", "https:"):
        return None
    parts = {k: str(parsed[k]) for k in ("protocol", "hostname", "port", "username", "password",
                                          "pathname", "search")}
    # The URL API's `search` is "" for an empty query too; href keeps its "?" (both keep it).
    if not parts["search"] and "?" in parsed["href"][: len(parsed["href"]) - len(parsed["hash"])]:
        parts["search"] = "?"
    return parts


def href(parts: Parts | None) -> str | None:
    if parts is None:
        return None
    userinfo = parts["username"] + (":" + parts["password"] if parts["password"] else "")
    port = ":" + parts["port"] if parts["port"] else ""
    return (f"{parts['protocol']}//{userinfo + '@' if userinfo else ''}{parts['hostname']}{port}"
            f"{parts['pathname']}{parts['search']}")


def explain(ours: str | None, theirs: Parts | None) -> list[str] | None:
    """The difference classes whose rewrites turn ada's answer into ours (in DIFFERENCES order,
    each kept only if it changed something), or None if they cannot."""
    used = []
    for name, _, rewrite in DIFFERENCES:
        if theirs is None or href(theirs) == ours:
            break
        rewritten = rewrite(theirs)
        if href(rewritten) != href(theirs):
            used.append(name)
            theirs = rewritten
    return used if href(theirs) == ours else None


def corpus() -> list[dict[str, str]]:
    with urlcorpus.CORPUS.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_corpus_is_what_the_seeded_generator_makes():
    entries = corpus()
    assert entries == urlcorpus.generate()
    assert len(entries) >= 2000 and len({e["base"] for e in entries}) == len(urlcorpus.BASES)


def test_normalize_agrees_with_ada_up_to_the_listed_differences():
    used: Counter[str] = Counter()
    unexplained = []
    agree = 0
    for entry in corpus():
        link, base = entry["link"], entry["base"]
        ours, theirs = normalize(link, base), ada_parts(link, base)
        classes = explain(ours, theirs)
        if classes is None:
            unexplained.append((link, base, ours, href(theirs)))
        elif not classes:
            agree += 1
        used.update(classes or ())
    assert not unexplained, "\n".join(map(repr, unexplained[:20]))
    assert set(used) == {name for name, _, _ in DIFFERENCES}, used  # every class is real
    assert agree > len(corpus()) // 2, (agree, used)


def test_an_escaped_apostrophe_stays_escaped():
    # The query-apostrophe rewrite maps every %27 to ': it must not hide a decoded explicit %27.
    checked = 0
    for entry in corpus():
        query = entry["link"].partition("#")[0].partition("?")[2]
        if "%27" in query:
            ours = normalize(entry["link"], entry["base"])
            assert ours is not None and ours.partition("?")[2].count("%27") == query.count("%27")
            checked += 1
    assert checked > 10


def test_rewrites_only_apply_where_they_should():
    # Each class's rewrite leaves a URL it is not about alone.
    plain = ada_parts("/a/b?c=d", "http://example.com/")
    assert plain is not None
    for _, _, rewrite in DIFFERENCES:
        assert href(rewrite(plain)) == href(plain)
