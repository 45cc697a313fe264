"""Sitemaps (sitemaps.org protocol 0.9): a fetched body in, URLs out (pure logic, no I/O).

`read_sitemap` reads one file: an XML ``<urlset>`` (pages) or ``<sitemapindex>`` (sitemaps), or
a text sitemap (one URL a line, UTF-8), any of them gzip-compressed. gzip is recognised by its
magic bytes, whatever the URL or Content-Type says, and up to two layers are undone, so the
caller may pass a body with or without its ``Content-Encoding: gzip`` removed (a ``.xml.gz``
file sent with that coding is two layers).

The body is hostile, so the work is bounded and nothing raises:

- at most `MAX_BYTES` uncompressed bytes are read (each gzip layer is inflated in steps of
  `_STEP` bytes, so a gzip bomb stops at the cap, not after inflating) and at most `MAX_URLS`
  entries; past either the file is `truncated`: what came before is kept.
- the XML is read by expat in chunks, without namespaces other than the protocol's mattering
  (extensions such as ``image:``, ``news:``, ``xhtml:link`` are skipped). A DOCTYPE stops the
  read at the declaration, before any entity is declared: no DTD, no entity expansion, no
  external entity is ever processed (a sitemap needs none).
- a broken file (XML error, broken gzip) gives the entries read before the break and `error`.

A URL is kept only if `archiver.web.urls.normalize` makes an absolute http(s) URL of it (the
crawl's URL identity) and `allowed` lets the sitemap list it.
"""

import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from typing import Literal
from xml.parsers import expat

from archiver.web.urls import normalize, split_origin

MAX_URLS = 50_000  # entries per file (protocol)
MAX_BYTES = 50 * 1024 * 1024  # uncompressed bytes per file (protocol: 52,428,800)
MAX_DEPTH = 1  # index nesting a walk follows: an index's children are read, theirs are not
MAX_SITEMAPS = 100  # sitemap files a walk hands out per site and visit
# Past these a file is truncated too: no sitemap within MAX_BYTES comes near them, and they bound
# the per-element and per-line work (50 MB of "<a/>" would be 12 million elements).
MAX_ELEMENTS = 1_000_000  # XML elements per file, extensions' included
MAX_LINES = 1_000_000  # lines per text file, blank ones included
MAX_LOC_CHARS = 8192  # a longer <loc> (or text line) is refused unread: the protocol says 2,048

Kind = Literal["urlset", "index", "text", "unknown"]

_STEP = 64 * 1024  # bytes read, and inflated, per step
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_LAYERS = 2
_GZIP_WBITS = 16 + 15  # zlib: a gzip wrapper, 32 KiB window
_BOM = b"\xef\xbb\xbf"
# The protocol's namespace, none, and Google's from before sitemaps.org (still served).
_NAMESPACES = (
    "",
    "http://www.sitemaps.org/schemas/sitemap/0.9 ",
    "http://www.google.com/schemas/sitemap/0.9 ",
    "http://www.google.com/schemas/sitemap/0.84 ",
)
# expat's name ("namespace local" or "local") -> the protocol's local name, in accepted namespaces.
_NAMES = {
    namespace + local: local
    for namespace in _NAMESPACES
    for local in ("urlset", "sitemapindex", "url", "sitemap", "loc", "lastmod")
}
_ROOTS: dict[str, tuple[Kind, str]] = {"urlset": ("urlset", "url"), "sitemapindex": ("index", "sitemap")}
# W3C datetime (https://www.w3.org/TR/NOTE-datetime): YYYY, YYYY-MM, YYYY-MM-DD, then "T" and
# hh:mm[:ss[.s]] and a TZD (Z or +hh:mm / -hh:mm). Read leniently as sitemaps are written: a time
# without TZD is UTC, "t"/"z" and a space for "T" pass, and +hhmm is an offset.
_LASTMOD = re.compile(
    r"([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2})(?:[Tt ]([0-9]{2}):([0-9]{2})"
    r"(?::([0-9]{2})(?:\.[0-9]+)?)?([Zz]|[+-][0-9]{2}:?[0-9]{2})?)?)?)?"
)


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One URL a sitemap lists (a page, or a child sitemap in an index) and its lastmod."""

    url: str  # normalised absolute http(s) URL
    lastmod: float | None  # epoch seconds (UTC); None if absent or malformed


@dataclass(slots=True)
class Sitemap:
    """What one file held, as far as it could be read."""

    kind: Kind  # "unknown": not a sitemap (another root element, a DOCTYPE, empty, broken early)
    entries: list[SitemapEntry] = field(default_factory=list)
    error: str | None = None  # why reading stopped early; None for a whole file
    truncated: bool = False  # MAX_BYTES or MAX_URLS reached: the entries are the file's first
    refused: int = 0  # entries that are not absolute http(s) URLs (or longer than MAX_LOC_CHARS)
    foreign: int = 0  # entries outside what the sitemap may list (`allowed`)

    @property
    def pages(self) -> list[SitemapEntry]:
        """The page URLs (none for an index, whose entries are sitemaps)."""
        return self.entries if self.kind in ("urlset", "text") else []


def parse_lastmod(text: str) -> float | None:
    """A W3C datetime (see _LASTMOD) as epoch seconds (UTC), fractions of a second dropped;
    None if it is not one or names no real instant (month 13, 25:00, ...)."""
    match = _LASTMOD.fullmatch(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, zone = match.groups()
    offset = 0
    if zone and zone not in "Zz":
        hours, minutes = int(zone[1:3]), int(zone[-2:])
        if hours > 23 or minutes > 59:
            return None
        offset = (hours * 60 + minutes) * (1 if zone[0] == "+" else -1)
    try:
        instant = datetime(
            int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
            int(second or 0), tzinfo=UTC,
        )  # fmt: skip
    except ValueError:
        return None
    return instant.timestamp() - offset * 60  # not a datetime: year 9999 plus an offset overflows


def allowed(sitemap_url: str, url: str, robots_origin: str | None = None, *, index: bool = False) -> bool:
    """May the sitemap at `sitemap_url` list `url` (both normalised)?

    The protocol's rules: a sitemap lists only URLs under its own location, same scheme and
    host and a path starting with the sitemap's directory (``http://a.org/shop/sitemap.xml``
    may list ``http://a.org/shop/...``, not ``http://a.org/blog/...`` nor ``https://a.org/shop/``);
    an `index` lists sitemaps anywhere on its own origin. A sitemap named by the robots.txt of
    `robots_origin` (an origin as `urls.origin` gives it; the protocol's cross-submit) may also
    list any URL of that origin, wherever the sitemap itself is.
    """
    url_origin = split_origin(url)[0]
    if url_origin == robots_origin:
        return True
    if index:
        return url_origin == split_origin(sitemap_url)[0]
    cut = sitemap_url.find("?")
    head = sitemap_url if cut < 0 else sitemap_url[:cut]
    return url.startswith(head[: head.rfind("/") + 1])


class _Stop(Exception):
    """Stops a read from inside expat's handlers: a DOCTYPE, a root not a sitemap, MAX_URLS."""


class _Reading:
    """The state of one `read_sitemap`: the result growing, and the parser's position."""

    def __init__(self, url: str, robots_origin: str | None) -> None:
        self.sitemap = Sitemap("unknown")
        self.url = normalize(url)
        self.robots_origin = robots_origin
        self.count = 0  # entries seen, kept or not
        self.elements = 0  # XML elements seen, or text lines
        self.depth = 0  # XML element depth
        self.entry_name = ""  # "url" in a urlset, "sitemap" in an index
        self.in_entry = False
        self.field: str | None = None  # "loc" or "lastmod" while inside one
        self.text: list[str] = []
        self.size = 0
        self.loc: str | None = None
        self.lastmod: str | None = None

    def fail(self, error: str) -> None:
        """Record the first error only: later ones follow from it."""
        if self.sitemap.error is None:
            self.sitemap.error = error

    def add(self, raw: str, lastmod: float | None) -> None:
        """One entry of the file: kept, refused or foreign; the MAX_URLS+1st stops the read."""
        sitemap = self.sitemap
        if self.count == MAX_URLS:
            sitemap.truncated = True
            raise _Stop
        self.count += 1
        url = normalize(raw.strip()) if len(raw) <= MAX_LOC_CHARS else None
        if url is None:
            sitemap.refused += 1
        elif not (
            allowed(self.url, url, self.robots_origin, index=sitemap.kind == "index")
            if self.url is not None
            else split_origin(url)[0] == self.robots_origin
        ):
            sitemap.foreign += 1
        else:
            sitemap.entries.append(SitemapEntry(url, lastmod))

    # --- gzip and the byte cap ---------------------------------------------------------------

    def capped(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """`chunks` up to MAX_BYTES in all; a byte past them marks the file truncated."""
        total = 0
        for chunk in chunks:
            total += len(chunk)
            if total > MAX_BYTES:
                self.sitemap.truncated = True
                yield chunk[: len(chunk) - (total - MAX_BYTES)]
                return
            yield chunk

    def gunzip(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """`chunks` inflated if they start with gzip's magic bytes, else unchanged.

        Inflates at most _STEP bytes per step, so the consumer's cap bounds the work. Several
        members follow each other (RFC 1952 section 2.2); bytes after a member that start no
        other are ignored, as ``gzip -d`` does.
        """
        first = next((chunk for chunk in chunks if chunk), b"")
        if first[:2] != _GZIP_MAGIC:
            yield first
            yield from chunks
            return
        inflater = zlib.decompressobj(_GZIP_WBITS)
        try:
            for data in chain((first,), chunks):
                while data:
                    if inflater.eof:
                        if data[:2] != _GZIP_MAGIC:
                            return
                        inflater = zlib.decompressobj(_GZIP_WBITS)
                    out = inflater.decompress(data, _STEP)
                    data = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
                    if out:
                        yield out
        except zlib.error as exc:
            self.fail(f"gzip: {exc}")
            return
        if not inflater.eof and not self.sitemap.truncated:  # not cut by MAX_BYTES upstream
            self.fail("gzip: the stream ends early")

    # --- text sitemaps ------------------------------------------------------------------------

    def read_text(self, chunks: Iterable[bytes]) -> None:
        """One URL a line (UTF-8); blank lines skipped, others refused unless a URL."""
        pending = b""
        overlong = False  # inside a line longer than MAX_LOC_CHARS, refused unread
        for chunk in chunks:
            *lines, last = chunk.split(b"\n")
            self.elements += len(lines)
            if self.elements > MAX_LINES:
                self.sitemap.truncated = True
                del lines[MAX_LINES - self.elements :]
                last = b""
            for line in lines:
                if overlong:
                    overlong = False
                    self.sitemap.refused += 1
                else:
                    self.read_line(pending + line)
                pending = b""
            if not overlong:
                pending += last
                if len(pending) > MAX_LOC_CHARS:
                    overlong, pending = True, b""
            if self.sitemap.truncated:
                return
        if overlong:
            self.sitemap.refused += 1
        else:
            self.read_line(pending)

    def read_line(self, line: bytes) -> None:
        """One line: nothing if blank, else an entry (refused unless UTF-8 and a URL)."""
        line = line.strip()
        if not line:
            return
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            text = ""  # counts as an entry, refused
        self.add(text, None)

    # --- XML sitemaps -------------------------------------------------------------------------

    def read_xml(self, chunks: Iterable[bytes]) -> None:
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.buffer_text = True  # one call per run of text, not per line
        parser.StartDoctypeDeclHandler = self.refuse_doctype
        parser.EntityDeclHandler = self.refuse_doctype
        parser.StartElementHandler = self.start
        parser.EndElementHandler = self.end
        parser.CharacterDataHandler = self.characters
        try:
            for chunk in chunks:
                parser.Parse(chunk, False)
            if not self.sitemap.truncated:
                parser.Parse(b"", True)
        except expat.ExpatError as exc:
            self.fail(f"XML: {exc}")
        except _Stop as stop:
            if stop.args:
                self.fail(stop.args[0])

    def refuse_doctype(self, *_: object) -> None:
        raise _Stop("XML: a DOCTYPE (no DTD is read in a sitemap)")

    def start(self, name: str, _attributes: object) -> None:
        self.elements += 1
        if self.elements > MAX_ELEMENTS:
            self.sitemap.truncated = True
            raise _Stop
        self.depth += 1
        if self.depth == 1:
            root = _ROOTS.get(_NAMES.get(name, ""))
            if root is None:
                raise _Stop(f"not a sitemap: the root element is <{name.rpartition(' ')[2]}>")
            self.sitemap.kind, self.entry_name = root
        elif self.depth == 2:
            self.in_entry = _NAMES.get(name) == self.entry_name
            self.loc = self.lastmod = None
        elif self.depth == 3 and self.in_entry:
            local = _NAMES.get(name)
            if local in ("loc", "lastmod"):
                self.field, self.text, self.size = local, [], 0

    def characters(self, data: str) -> None:
        if self.field is not None:
            self.size += len(data)
            if self.size <= MAX_LOC_CHARS:
                self.text.append(data)

    def end(self, _name: str) -> None:
        if self.depth == 3 and self.field is not None:
            text = "".join(self.text) if self.size <= MAX_LOC_CHARS else ""  # refused, as ""
            if self.field == "loc" and not self.loc:
                self.loc = text
            elif self.field == "lastmod" and self.lastmod is None:
                self.lastmod = text
            self.field = None
        elif self.depth == 2 and self.in_entry:
            self.in_entry = False
            if self.loc is not None:
                self.add(self.loc, parse_lastmod(self.lastmod) if self.lastmod else None)
        self.depth -= 1


def read_sitemap(body: bytes, url: str, robots_origin: str | None = None) -> Sitemap:
    """Read one sitemap file fetched from `url` (see the module's docstring). Never raises.

    `robots_origin`: the origin whose robots.txt named this sitemap (cross-submit, see
    `allowed`), None when it was not named there (``/sitemap.xml``, an index's child found
    without robots.txt). An index's entries are its child sitemaps, a urlset's and a text
    sitemap's are pages (`Sitemap.pages`). The work is linear in `body` up to MAX_BYTES of
    output per layer, so the caller bounds `body` (its fetch limit); a full 50,000-URL file
    costs about 0.4 s of CPU, worth a worker thread as large pages are.
    """
    reading = _Reading(url, robots_origin)
    chunks: Iterator[bytes] = (body[start : start + _STEP] for start in range(0, len(body), _STEP))
    for _ in range(_GZIP_LAYERS):
        chunks = reading.capped(reading.gunzip(chunks))
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) < len(_BOM) and _BOM.startswith(head):
            continue
        head = head.removeprefix(_BOM).lstrip()
        if head:
            break
    sitemap = reading.sitemap
    if not head:
        reading.fail("empty")
        return sitemap
    try:
        if head[:1] == b"<":
            reading.read_xml(chain((head,), chunks))
        else:
            sitemap.kind = "text"
            reading.read_text(chain((head,), chunks))
    except _Stop:
        pass
    return sitemap


class SitemapWalk:
    """The sitemaps of one site's visit, in the order to fetch them (pure bookkeeping).

    Starts from the Sitemap lines of the site's robots.txt and ``<origin>/sitemap.xml`` (always:
    a site may have one that robots.txt does not name). `next_url` hands out each sitemap URL
    once, at most MAX_SITEMAPS of them; `read` reads a fetched body and queues an index's
    children, only for an index read from a robots.txt line or /sitemap.xml (MAX_DEPTH): an
    index listed by an index is read, its entries are not followed. A sitemap the fetch failed
    for is simply not read. Sitemaps on other origins are handed out too (robots.txt may name
    them, and their index's children follow): whether and how to fetch them is the visit's call.
    """

    def __init__(self, origin: str, robots_sitemaps: Iterable[str]) -> None:
        self._queue: list[str] = []  # to hand out, in order
        self._next = 0
        self._depth: dict[str, int] = {}  # every sitemap URL ever queued -> its nesting depth
        self._robots_origin: dict[str, str | None] = {}
        self.too_deep = 0  # child sitemaps not followed: listed by an index at MAX_DEPTH
        for line in robots_sitemaps:
            sitemap_url = normalize(line.strip(), origin + "/")
            if sitemap_url is not None:
                self._add(sitemap_url, 0, origin)
        self._add(origin + "/sitemap.xml", 0, None)

    def _add(self, sitemap_url: str, depth: int, robots_origin: str | None) -> None:
        if sitemap_url in self._depth:
            return
        self._depth[sitemap_url] = depth
        self._robots_origin[sitemap_url] = robots_origin
        self._queue.append(sitemap_url)

    @property
    def over_limit(self) -> int:
        """Sitemaps queued but never to be handed out: past MAX_SITEMAPS."""
        return max(0, len(self._queue) - MAX_SITEMAPS)

    def next_url(self) -> str | None:
        """The next sitemap URL to fetch, or None when there is none left (or MAX_SITEMAPS
        were handed out)."""
        if self._next >= min(len(self._queue), MAX_SITEMAPS):
            return None
        self._next += 1
        return self._queue[self._next - 1]

    def read(self, sitemap_url: str, body: bytes) -> Sitemap:
        """Read the body fetched for `sitemap_url` (one `next_url` handed out) and queue the
        children of an index, as far as MAX_DEPTH lets; their pages are `Sitemap.pages`."""
        robots_origin = self._robots_origin.get(sitemap_url)
        sitemap = read_sitemap(body, sitemap_url, robots_origin)
        if sitemap.kind == "index":
            depth = self._depth.get(sitemap_url, MAX_DEPTH)
            if depth >= MAX_DEPTH:
                self.too_deep += len(sitemap.entries)
            else:
                for entry in sitemap.entries:
                    self._add(entry.url, depth + 1, robots_origin)
        return sitemap
