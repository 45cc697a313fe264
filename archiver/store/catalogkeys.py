"""What both catalogs share of their keys: the SURT key of a URL, the shard that holds it (a stable
on-disk contract, recorded in ``catalog.json``), the key range of a listing, 14-digit stamps.
Pure logic, no database: ``store.embedded.catalog`` and ``store.postgres.catalog`` both use it.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, TypeVar

import mmh3
import surt

from archiver.store.models import NOT_CONTENT_KEYS
from archiver.web.timestamps import to_datetime

# Recorded in catalog.json; bump it if shard_of ever changes, and reindex.
SHARD_FUNCTION = "mmh3_32(surt host part, seed 0, unsigned) % shards, v1"
# What the host part of a SURT key may hold: reversed DNS labels (IDNA already applied by surt)
# or an IP address, then an optional port. Anything else (a "%20", no ")" at all) means surt met
# something that was not a URL with a host: "" -> "-", "dns:x" -> "dns:x", "a b" -> "a%20b)/".
_HOST = re.compile(r"(?:[0-9a-z_\-.,]+|[0-9a-f:.\[\]]+)(?::\d+)?")
# A scheme-less "host:port[/...]" as users type it.
_HOST_PORT = re.compile(r"[^/:?#]+:\d+(?:[/?#]|\Z)")
_PORT = re.compile(r":\d+\Z")
# The URL prefixes of the records of a page's rendering (a screenshot, its rendered text), each
# catalogued under its page's key (surt_key).
SCREENSHOT, TEXT = "urn:screenshot:", "urn:text:"
RENDERINGS = (SCREENSHOT, TEXT)
# The label of a rendered page's own entry: why the crawler rendered it (crawl.capture).
RENDERED = "rendered"
# Above every file id and offset: (at, ABOVE, ABOVE) follows every capture of the second at.
ABOVE = 2**62
# Above every key of a host "h": its keys start "h)", a deeper label "h," and a port "h:", and no
# character of a host lies between ")" and "*" (a host listing, CatalogStore.hosts).
HOST_END = "*"
# Rows one chunk of span_counts counts: a few milliseconds of the database's time.
TALLY_ROWS = 10_000
_STAMP = re.compile(r"\d{14}", re.ASCII)
_Row = TypeVar("_Row", bound=tuple[Any, ...])


def content_condition(find: str) -> str:
    """The SQL condition of a content row (``Capture.is_content``): no labels, or none of the
    NOT_CONTENT names among them; ``find`` is the database's substring function, (text, part)
    -> position or 0 (SQLite's instr, PostgreSQL's strpos)."""
    absent = " AND ".join(f"{find}(labels, '{key}') = 0" for key in NOT_CONTENT_KEYS)
    return f"(labels IS NULL OR ({absent}))"


def check_stamp(text: str) -> str:
    """``text`` if it is 14 ASCII digits (compared as text with the catalog's timestamps, a date
    or not); ValueError otherwise."""
    if not _STAMP.fullmatch(text):
        raise ValueError(f"not a 14-digit timestamp: {text[:40]!r}")
    return text


def check_dates(*dates: str | None) -> None:
    """ValueError unless each date given is a valid 14-digit timestamp."""
    for date in dates:
        if date is not None:
            to_datetime(date)


def nearest(before: _Row | None, after: _Row | None, at: str) -> _Row | None:
    """Of a URL's last catalog row at or before ``at`` and its first after it (rows whose second
    field is the 14-digit timestamp), the one nearer in time to ``at``; a tie goes to the earlier."""
    if before is None or after is None:
        return before or after
    target = to_datetime(at)
    return before if target - to_datetime(before[1]) <= to_datetime(after[1]) - target else after


def rendering_of(url: str) -> tuple[str, str] | None:
    """(the prefix, the page URL) of a record of a page's rendering (``urn:screenshot:<url>``,
    ``urn:text:<url>``), None for any other URL."""
    for prefix in RENDERINGS:
        if url.startswith(prefix):
            return prefix, url[len(prefix):]
    return None


def surt_key(url: str) -> str:
    """The SURT key of ``url`` as pywb and cdxj-indexer make it; ValueError if it names no host.

    A record of a page's rendering (``urn:screenshot:<url>``, ``urn:text:<url>``) is keyed as its
    page followed by a space and its kind (``org,example)/ urn:screenshot``): a space never occurs
    in a SURT key, so it sorts right after the page's own key, lies in the page host's shard, and
    an exact lookup of the page never meets it. Any other ``urn:`` is refused (it has no host)."""
    if (rendering := rendering_of(url)) is not None:
        prefix, page = rendering
        if rendering_of(page) is not None:
            raise ValueError(f"not a usable URL for the catalog: {url[:200]!r} (a rendering of a rendering)")
        return _page_key(page) + " " + prefix[:-1]
    return _page_key(url)


def _page_key(url: str) -> str:
    """:func:`surt_key` of a URL that is not a rendering."""
    if _HOST_PORT.match(url):
        url = "http://" + url  # surt would read "example.org:8080" as scheme "example.org"
    try:
        key = surt.surt(url)
    except Exception as exc:
        raise ValueError(f"not a usable URL for the catalog: {url!r} ({exc})") from None
    host, sep, _ = key.partition(")")
    if not sep or not _HOST.fullmatch(host):
        raise ValueError(f"not a usable URL for the catalog: {url!r} (no host; its SURT key is {key!r})")
    return key


def shard_host(urlkey: str) -> str:
    """The host part of a SURT key as it stands there ("org,example,www2:8080"): text before ")".

    A key without ")" (not made from a URL with a host) is its own host part.
    """
    return urlkey.partition(")")[0]


def host_name(urlkey: str) -> str:
    """The host part of a SURT key without its port ("org,example,www2")."""
    return _PORT.sub("", shard_host(urlkey))


def shard_of(urlkey: str, shards: int) -> int:
    """The shard holding ``urlkey``: unsigned 32-bit MurmurHash3 (seed 0) of its host part, mod shards.

    A stable on-disk contract: every existing catalog was laid out with it, so changing this
    function or the shard count means reindexing (catalog.json records both).
    """
    return mmh3.hash(urlkey.partition(")")[0], 0, False) % shards


class KeyRange(NamedTuple):
    """Keys ``lo <= k < hi`` (hi None: no end) whose character at 1-based ``cut`` is in ``allowed``
    ("" past the end; ``allowed`` None: no such test)."""

    lo: str
    hi: str | None
    cut: int = 0
    allowed: tuple[str, ...] | None = None


def _after(text: str) -> str:
    """The smallest string greater than every string that starts with ``text``."""
    return text[:-1] + chr(ord(text[-1]) + 1)


def key_range(url: str, match: str) -> tuple[str, KeyRange]:
    """The urlkey and the key range of a listing (see Catalog.list)."""
    key = surt_key(url)
    host = shard_host(key)
    if match == "exact":
        return key, KeyRange(key, key + "\0")  # key + NUL: the least string above key
    if match == "prefix":
        # SURT drops a path's trailing slash ("/dir/" -> ".../dir"): a bare key prefix would take
        # "/dir2" along. When the URL asks for a folder, keep the folder itself and what lies
        # under it or behind its "?". pywb appends "/" instead, which loses the folder page.
        if url.split("#")[0].split("?")[0].endswith("/") and not key.endswith("/"):
            return key, KeyRange(key, _after(key), len(key) + 1, ("", "/", "?"))
        return key, KeyRange(key, _after(key))
    if match == "host":
        return key, KeyRange(host + ")", host + "*")
    if match == "domain":
        # The host itself on any port and its subdomains: ")" ends the host, "," starts a deeper
        # label, ":" a port. pywb's domain match is the same range less the other ports.
        domain = host_name(key)
        return key, KeyRange(domain + ")", domain + ";", len(domain) + 1, (")", ",", ":"))
    raise ValueError(f"unknown match {match!r}: use exact, prefix, host or domain")
