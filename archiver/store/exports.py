"""A self-contained slice of the archive (``archiver export``): a WARC file, or a WACZ package.

The slice is the captures of one URL, of the URLs under a prefix or of a host, optionally between
two dates, as the catalog lists them. They are written in time order after a ``warcinfo`` record
that says what the file holds and where it came from; request records are left out (replay tools
do not need them). Each capture's record is copied as the WARC store holds it (its gzip member,
byte for byte: digests and record ids stay valid), except a server-not-modified revisit:

- A **server-not-modified revisit** (the page answered the crawler's conditional request with
  304; the record holds that empty 304) is written whole, as a ``response`` record: its original
  response's block (HTTP head and payload) byte for byte, at the revisit's WARC-Date, URL and IP
  address, under a new WARC-Record-ID, its digests computed again (the same as the original's,
  for the same block). pywb and ReplayWeb.page (wabac.js, by its source) would replay the
  revisit as that 304 with no body, whatever the file holds
  (tests/integration/store/test_exports_pywb.py shows it); archiver's own replay serves the
  original's head and body, and so does the record written whole. WARC 1.1 forbids the
  WARC-Refers-To fields on a response record, so what it was made from is said in extension
  fields, which WARC readers ignore: ``Archiver-Converted-From`` (the revisit's record id) and
  ``Archiver-Original-Record-ID``, ``-Target-URI`` and ``-Date`` (the original's); the warcinfo
  record names them.
- An **identical-payload-digest revisit** (the payload came again, unchanged) is copied as
  stored: pywb and ReplayWeb.page resolve it to its original. When that original response is not
  in the slice it is brought along (its record copied the same way), so every capture of the file
  replays on its own; the original may then be older than ``--from`` or of another URL.

A capture with plugin labels (archiver.plugins) is followed by its labels record, made again
from the catalog's labels as the crawler writes it (``labels_record``: a ``metadata`` record whose
WARC-Refers-To names the copied record), so importing or reindexing the export gives them back.
A server-not-modified revisit written whole has none (revisits are not labelled).

A revisit whose original the catalog does not have stops the export (ExportError).

A file name ending in ``.wacz`` gets a WACZ package (WACZ 1.1.1: the WARC, a CDXJ index, a pages
list and the datapackage with its digests) made by py-wacz, the Webrecorder tool that also
validates it (``wacz validate``); pywb and ReplayWeb.page load it. py-wacz indexes the WARC it is
given, so records written whole are in its index as the 200 responses they are. The pages list is
the slice's own HTML page captures that replay as 200, revisits included, at their own dates
(py-wacz's own page detection needs request records). Anything else gets the WARC. The output is
written beside its final name and renamed into place when complete. Records are read and written
one at a time: memory holds the slice's catalog entries, never its records.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from archiver import __version__
from archiver.store.bundles import LABELS_TYPE, NOT_MODIFIED_PROFILE, payload_digest
from archiver.store.catalogkeys import host_name, shard_host, surt_key
from archiver.store.interfaces import CatalogStore, WarcReader
from archiver.store.models import Capture
from archiver.store.originals import original_of
from archiver.store.warcindex import WarcError, parse_record
from archiver.web.timestamps import to_iso

MATCHES = ("exact", "prefix", "host")
_PAGE_TYPES = ("text/html", "application/xhtml+xml")
# The WARC fields of a server-not-modified revisit that its record written whole keeps.
_KEPT = ("WARC-Date", "WARC-Target-URI", "WARC-IP-Address")
CONVERTED_FROM = "Archiver-Converted-From"
ORIGINAL_FIELDS = ("Archiver-Original-Record-ID", "Archiver-Original-Target-URI",
                   "Archiver-Original-Date")


class ExportError(Exception):
    """The slice cannot be exported as asked (nothing matches, a record is unreadable...)."""


@dataclass
class Exported:
    """What an export wrote."""

    path: Path
    captures: int  # the slice's captures
    originals: int  # responses added for revisits whose original lies outside the slice
    converted: int  # server-not-modified revisits written whole as responses
    bytes: int  # the output file's size


@dataclass(frozen=True, slots=True)
class Planned:
    """One record of the export: ``capture`` copied as stored, or, with ``revisit`` fields, a
    server-not-modified revisit written whole from ``original``."""

    capture: Capture
    original: Capture | None = None  # a revisit's original response
    revisit: tuple[tuple[str, str], ...] = ()  # the converted revisit's record id and _KEPT fields
    carried: bool = False  # an original brought along, not one of the slice's captures


def select(catalog: CatalogStore, url: str, match: str, *, from_: str | None, to: str | None
           ) -> list[Capture]:
    """The captures of the slice, in time order (``match``: one of MATCHES). ``host`` is every
    capture of the URL's host, any scheme and any port, unless the URL names a port."""
    found = [c for c in listed(catalog, url, match)
             if (from_ is None or c.timestamp >= from_) and (to is None or c.timestamp <= to)]
    return sorted(found, key=lambda c: (c.timestamp, c.url))


def listed(catalog: CatalogStore, url: str, match: str) -> Iterable[Capture]:
    """The captures the command line's URL selector takes (``match``: exact, prefix, host or
    domain), as ``catalog.list`` sorts them; ``host`` takes any scheme and port unless ``url``
    names a port."""
    key = surt_key(url)
    if match != "host" or shard_host(key) != host_name(key):  # not a host, or one with its port
        return catalog.list(url, match)
    # Its ports hash to other shards: the domain's listing, less the subdomains.
    return (c for c in catalog.list(url, "domain") if host_name(c.urlkey) == shard_host(key))


def with_originals(catalog: CatalogStore, warcs: WarcReader, captures: list[Capture]
                   ) -> list[Planned]:
    """The records of the export, in time order: ``captures``, each revisit with its original
    (server-not-modified ones to be written whole), and the originals of identical-payload
    revisits that are not among them. ExportError for a revisit whose original is not archived."""
    have = {(c.filename, c.offset) for c in captures}
    planned: list[Planned] = []
    for capture in captures:
        if capture.rectype != "revisit":
            planned.append(Planned(capture))
            continue
        try:
            stored = warcs.read(capture.filename, capture.offset, capture.length)
        except WarcError as e:
            raise ExportError(_unreadable(capture, e)) from None
        original = original_of(catalog, capture, stored.warc_headers)
        if original is None:
            raise ExportError(f"the revisit of {capture.url} at {capture.timestamp} stands for a "
                              "payload the catalog does not have: it would not replay on its own")
        fields = {name.lower(): value for name, value in stored.warc_headers}
        if fields.get("warc-profile") == NOT_MODIFIED_PROFILE:
            kept = tuple((name, fields[name.lower()]) for name in ("WARC-Record-ID", *_KEPT)
                         if name.lower() in fields)
            planned.append(Planned(capture, original, kept))
            continue
        planned.append(Planned(capture, original))
        if (original.filename, original.offset) not in have:
            have.add((original.filename, original.offset))
            planned.append(Planned(original, carried=True))
    return sorted(planned, key=lambda p: (p.capture.timestamp, p.capture.url))


def warcinfo(description: str) -> bytes:
    """A gzipped ``warcinfo`` record describing the export."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
    fields = {"software": f"archiver {__version__}", "format": "WARC File Format 1.1",
              "description": description}
    writer.write_record(writer.create_warcinfo_record("export.warc.gz", fields))
    return out.getvalue()


def export(catalog: CatalogStore, warcs: WarcReader, *, url: str, match: str, output: Path,
           from_: str | None = None, to: str | None = None,
           progress: Callable[[int, int], None] = lambda _done, _total: None) -> Exported:
    """Write the slice to ``output`` (WACZ if it ends in ``.wacz``, else a gzipped WARC)."""
    if match not in MATCHES:
        raise ValueError(f"match must be one of {MATCHES}, not {match!r}")
    chosen = select(catalog, url, match, from_=from_, to=to)
    if not chosen:
        raise ExportError(f"no capture matches {match} {url}"
                          + (f" from {from_}" if from_ else "") + (f" to {to}" if to else ""))
    records = with_originals(catalog, warcs, chosen)
    originals = sum(p.carried for p in records)
    converted = sum(bool(p.revisit) for p in records)
    description = (
        f"{len(chosen)} captures ({match} {url}, {from_ or 'the first'} to {to or 'the last'}) "
        f"and {originals} original responses of their revisits. {converted} server-not-modified "
        "revisits (304) are written whole as response records made from their originals (HTTP "
        "head and payload) at the revisit's date, so that replay tools serve the page: "
        f"{CONVERTED_FROM} names the revisit, {', '.join(ORIGINAL_FIELDS)} the original.")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=output.parent) as tmp:
        warc = Path(tmp) / (output.stem + ".warc.gz")
        _write_warc(warc, warcinfo(description), _records(warcs, records), len(records),
                    progress)
        made = Path(tmp) / output.name
        if output.name.endswith(".wacz"):
            pages = Path(tmp) / "pages.jsonl"
            pages.write_text(pages_list(records))
            _package(warc, pages, made, description)
        else:
            warc.rename(made)
        os.replace(made, output)
    return Exported(output, len(chosen), originals, converted, output.stat().st_size)


def _unreadable(capture: Capture, error: WarcError) -> str:
    return f"cannot read the capture of {capture.url} at {capture.timestamp}: {error}"


def _records(warcs: WarcReader, records: list[Planned]) -> Iterator[bytes]:
    """Each planned record's gzip member, read (and made) one at a time."""
    for entry in records:
        source = entry.original if entry.revisit else entry.capture
        assert source is not None  # a revisit to write whole has its original
        try:
            raw = warcs.raw(source.filename, source.offset, source.length)
        except WarcError as e:
            raise ExportError(_unreadable(source, e)) from None
        if entry.revisit:
            yield whole_response(raw, entry.revisit)
        elif source.labels:  # one item: the progress counts records of the plan
            yield raw + labels_record(raw, source)
        else:
            yield raw


def labels_record(raw: bytes, capture: Capture) -> bytes:
    """The gzipped labels record of ``capture`` whose record is ``raw`` (its gzip member)."""
    stored = parse_record(raw, capture.filename, capture.offset)
    fields = {name.lower(): value for name, value in stored.warc_headers}
    body = json.dumps({"labels": capture.label_map}, ensure_ascii=False, sort_keys=True).encode()
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
    writer.write_record(writer.create_warc_record(
        capture.url, "metadata", payload=io.BytesIO(body), length=len(body),
        warc_content_type=LABELS_TYPE,
        warc_headers_dict={"WARC-Date": fields["warc-date"],
                           "WARC-Refers-To": fields["warc-record-id"]}))
    return out.getvalue()


def whole_response(original: bytes, revisit: Iterable[tuple[str, str]]) -> bytes:
    """A gzipped ``response`` record standing for a server-not-modified revisit: the block of
    ``original`` (a response record's gzip member) byte for byte, under a new record id and the
    ``revisit``'s date, target URI and IP address, with both records' ids and the original's URI
    and date in extension fields. ExportError if ``original`` holds no record."""
    try:
        found = next(iter(ArchiveIterator(io.BytesIO(original), no_record_parse=True)))
        block = found.raw_stream.read()
        head = io.BytesIO(block)
        StatusAndHeadersParser([], verify=False).parse(head)  # up to the payload
    except (ArchiveLoadFailed, StopIteration, EOFError, ValueError) as e:
        raise ExportError(f"the original response of a revisit is unreadable: {e!r}") from None
    of_revisit = dict(revisit)
    of_original = found.rec_headers
    made_from = [(CONVERTED_FROM, of_revisit.get("WARC-Record-ID"))]
    made_from += [(name, of_original.get_header(field)) for name, field in
                  zip(ORIGINAL_FIELDS, ("WARC-Record-ID", "WARC-Target-URI", "WARC-Date"),
                      strict=True)]
    fields = [("WARC-Type", "response"), ("WARC-Record-ID", StatusAndHeadersParser.make_warc_id()),
              *((name, of_revisit[name]) for name in _KEPT if name in of_revisit),
              ("WARC-Payload-Digest", payload_digest(block[head.tell():])),
              *((name, value) for name, value in made_from if value)]
    content_type = of_original.get_header("Content-Type") or "application/http;msgtype=response"
    record = ArcWarcRecord("warc", "response", StatusAndHeaders("", fields, protocol="WARC/1.1"),
                           io.BytesIO(block), None, content_type, len(block))
    out = io.BytesIO()
    WARCWriter(out, gzip=True, warc_version="WARC/1.1").write_record(record)  # adds the block digest
    return out.getvalue()


def _write_warc(path: Path, info: bytes, records: Iterable[bytes], total: int,
                progress: Callable[[int, int], None]) -> None:
    with path.open("wb") as out:
        out.write(info)
        for done, record in enumerate(records, 1):
            out.write(record)
            progress(done, total)
        out.flush()
        os.fsync(out.fileno())


def pages_list(records: list[Planned]) -> str:
    """The WACZ pages list (``pages/pages.jsonl``): the slice's own captures of HTML pages that
    replay as 200 (a revisit as its original, a server-not-modified one with the original's
    status), at their own dates."""
    lines = [json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "archiver export"})]
    for entry in records:
        page, status = entry.capture, entry.capture.status
        if entry.carried:
            continue
        if entry.original is not None:
            page = entry.original
            status = entry.original.status if entry.revisit else status
        if status == 200 and page.mime in _PAGE_TYPES:
            url, timestamp = entry.capture.url, entry.capture.timestamp
            lines.append(json.dumps({"url": url, "ts": to_iso(timestamp), "title": url}))
    return "\n".join(lines) + "\n"


def _package(warc: Path, pages: Path, target: Path, description: str) -> None:
    """A WACZ of ``warc`` with the pages list ``pages``, made by py-wacz."""
    from wacz.main import main as wacz  # imported here: a WARC export does not need it

    with contextlib.redirect_stdout(sys.stderr):  # its progress lines
        code = wacz(["create", "-o", str(target), str(warc), "--pages", str(pages),
                     "--title", "archiver export", "--desc", description])
    if code != 0 or not target.is_file():
        raise ExportError(f"py-wacz could not package {warc.name} (exit status {code})")
