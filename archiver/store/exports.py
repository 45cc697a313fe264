"""A self-contained slice of the archive (``archiver export``): a WARC file, or a WACZ package.

The slice is the captures of one URL, of the URLs under a prefix or of a host, optionally between
two dates, as the catalog lists them. Each capture's record is copied as the WARC store holds it
(its gzip member, byte for byte: digests and record ids stay valid), in time order, after a
``warcinfo`` record that says what the file holds and where it came from. A revisit whose original
response is not in the slice brings that response along (its record copied the same way), so
every capture of the file replays on its own; the original may then be older than ``--from`` or
of another URL. Request records are not exported: replay tools do not need them.

A file name ending in ``.wacz`` gets a WACZ package (WACZ 1.1.1: the WARC, a CDXJ index, a pages
list and the datapackage with its digests) made by py-wacz, the Webrecorder tool that also
validates it (``wacz validate``); pywb and ReplayWeb.page load it. Both replay a
server-not-modified revisit (a page that answered the crawler's conditional request with 304) as
that empty 304, not as its original: pywb in tests/integration/store/test_export_pywb.py,
ReplayWeb.page (wabac.js) by its source. Its pages list is the slice's
HTML pages that answered 200 (py-wacz's own page detection needs request records). Anything else
gets the WARC. The output is written beside its final name and renamed into place when complete.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from warcio.warcwriter import WARCWriter

from archiver import __version__
from archiver.store.catalog import Capture, original_of
from archiver.store.interfaces import CatalogStore, WarcReader
from archiver.store.warcindex import WarcError
from archiver.web.timestamps import to_iso

MATCHES = ("exact", "prefix", "host")
_PAGE_TYPES = ("text/html", "application/xhtml+xml")


class ExportError(Exception):
    """The slice cannot be exported as asked (nothing matches, a record is unreadable...)."""


@dataclass
class Exported:
    """What an export wrote."""

    path: Path
    captures: int  # the slice's captures
    originals: int  # responses added for revisits whose original lies outside the slice
    bytes: int  # the output file's size


def select(catalog: CatalogStore, url: str, match: str, *, from_: str | None, to: str | None
           ) -> list[Capture]:
    """The captures of the slice, in time order (``match``: one of MATCHES)."""
    found = [c for c in catalog.list(url, match)
             if (from_ is None or c.timestamp >= from_) and (to is None or c.timestamp <= to)]
    return sorted(found, key=lambda c: (c.timestamp, c.url))


def with_originals(catalog: CatalogStore, warcs: WarcReader, captures: list[Capture]
                   ) -> tuple[list[Capture], int]:
    """``captures`` and the responses their revisits stand for that are not among them, in time
    order; and how many were added. ExportError for a revisit whose original is not archived."""
    have = {(c.filename, c.offset) for c in captures}
    added: list[Capture] = []
    for capture in captures:
        if capture.rectype != "revisit":
            continue
        stored = warcs.read(capture.filename, capture.offset, capture.length)
        original = original_of(catalog, capture, stored.warc_headers)
        if original is None:
            raise ExportError(f"the revisit of {capture.url} at {capture.timestamp} stands for a "
                              "payload the catalog does not have: it would not replay on its own")
        if (original.filename, original.offset) not in have:
            have.add((original.filename, original.offset))
            added.append(original)
    return sorted([*captures, *added], key=lambda c: (c.timestamp, c.url)), len(added)


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
    records, originals = with_originals(catalog, warcs, chosen)
    description = (f"{len(chosen)} captures ({match} {url}, {from_ or 'the first'} to "
                   f"{to or 'the last'}) and {originals} original responses of their revisits")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=output.parent) as tmp:
        warc = Path(tmp) / (output.stem + ".warc.gz")
        _write_warc(warc, warcinfo(description), _raw_records(warcs, records), len(records),
                    progress)
        made = Path(tmp) / output.name
        if output.name.endswith(".wacz"):
            pages = Path(tmp) / "pages.jsonl"
            pages.write_text(pages_list(records))
            _package(warc, pages, made, description)
        else:
            warc.rename(made)
        os.replace(made, output)
    return Exported(output, len(chosen), originals, output.stat().st_size)


def _raw_records(warcs: WarcReader, records: list[Capture]) -> Iterable[bytes]:
    for capture in records:
        try:
            yield warcs.raw(capture.filename, capture.offset, capture.length)
        except WarcError as e:
            raise ExportError(f"cannot read the capture of {capture.url} at {capture.timestamp}: "
                              f"{e}") from None


def _write_warc(path: Path, info: bytes, records: Iterable[bytes], total: int,
                progress: Callable[[int, int], None]) -> None:
    with path.open("wb") as out:
        out.write(info)
        for done, record in enumerate(records, 1):
            out.write(record)
            progress(done, total)
        out.flush()
        os.fsync(out.fileno())


def pages_list(captures: list[Capture]) -> str:
    """The WACZ pages list (``pages/pages.jsonl``): the slice's HTML pages that answered 200."""
    lines = [json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "archiver export"})]
    lines += [json.dumps({"url": c.url, "ts": to_iso(c.timestamp), "title": c.url})
              for c in captures
              if c.rectype == "response" and c.status == 200 and c.mime in _PAGE_TYPES]
    return "\n".join(lines) + "\n"


def _package(warc: Path, pages: Path, target: Path, description: str) -> None:
    """A WACZ of ``warc`` with the pages list ``pages``, made by py-wacz."""
    from wacz.main import main as wacz  # imported here: a WARC export does not need it

    with contextlib.redirect_stdout(sys.stderr):  # its progress lines
        code = wacz(["create", "-o", str(target), str(warc), "--pages", str(pages),
                     "--title", "archiver export", "--desc", description])
    if code != 0 or not target.is_file():
        raise ExportError(f"py-wacz could not package {warc.name} (exit status {code})")
