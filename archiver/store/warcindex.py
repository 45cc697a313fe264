"""Reading WARC bundles back: catalog entries from records, and one record's payload by location.

The crawler's live feed and ``archiver catalog reindex`` build their entries with the same
functions (:func:`capture_fields`), so a catalog rebuilt from the WARC files alone equals the one
fed live. That includes a capture's plugin labels: the crawler writes them in a ``metadata``
record right after the capture's records (``BundleWriter.write_labels``), and indexing attaches
such a record's labels to the capture its WARC-Refers-To names (``labels_of``), past the resource
records of the capture's rendering written between them (``BundleWriter.write_resource``: a
page's screenshot ``urn:screenshot:<url>`` and text ``urn:text:<url>``, entries of their own under
the page's key, catalogkeys.surt_key). Other ``urn:`` resource records are not indexed.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.limitreader import LimitReader
from warcio.recordloader import ArcWarcRecord
from warcio.timeutils import iso_date_to_datetime

from archiver.store.bundles import LABELS_TYPE, complete_prefix
from archiver.store.catalogkeys import rendering_of, surt_key
from archiver.store.models import Capture, labels_text
from archiver.web import urls
from archiver.web.timestamps import from_datetime

# Records that are captures: a resource record (a file stored whole, without an HTTP exchange:
# Browsertrix's screenshots, wget's and Heritrix's fetched files in some modes) replays as a 200.
INDEXED = ("response", "revisit", "resource")
_SPLIT = re.compile(r"[;\s]")
# A labels record's body read at most (32 labels of 256 characters fit many times over).
MAX_LABELS_RECORD = 256 * 1024


class WarcError(Exception):
    """A file that is not a WARC, or a WARC that is truncated or damaged."""


def mime_of(content_type: str | None) -> str:
    """The media type as CDX indexes record it: the Content-Type up to ``;``, as written."""
    if not content_type:
        return "-"
    return _SPLIT.split(content_type.strip(), 1)[0] or "-"


def redirect_of(status: int | None, location: str | None, url: str) -> str | None:
    """The absolute, normalised target of a redirect; None when the record is not one."""
    if status is None or not 300 <= status < 400 or not location:
        return None
    return urls.normalize(location, url)


def capture_fields(*, url: str, date: datetime, status: int | None, content_type: str | None,
                   location: str | None, digest: str, filename: str, offset: int, length: int,
                   rectype: str = "response", labels: Mapping[str, str] | None = None) -> Capture:
    """One catalog entry; ``date`` is the record's WARC-Date as an aware datetime."""
    return Capture(urlkey=surt_key(url), timestamp=from_datetime(date), url=url, status=status,
                   mime="warc/revisit" if rectype == "revisit" else mime_of(content_type),
                   digest=digest, redirect=redirect_of(status, location, url), filename=filename,
                   offset=offset, length=length, rectype=rectype, labels=labels_text(labels or {}))


def labels_of(record: ArcWarcRecord, body: bytes) -> tuple[str, dict[str, str]] | None:
    """(the WARC-Refers-To record id, the labels) of a labels record (``write_labels``), or None
    if ``record`` is not one (another metadata record, or damaged labels)."""
    headers = record.rec_headers
    refers_to = headers.get_header("WARC-Refers-To")
    if record.rec_type != "metadata" or not refers_to or (
            (headers.get_header("Content-Type") or "").split(";")[0].strip() != LABELS_TYPE):
        return None
    try:
        labels = json.loads(body).get("labels")
    except (ValueError, AttributeError):
        return None
    if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return refers_to, labels


def status_of(code: str | None) -> int | None:
    """An HTTP status as the catalog keeps it: three ASCII digits, else None (unknown), never a
    number a catalog column cannot hold."""
    return int(code) if code and len(code) == 3 and code.isascii() and code.isdigit() else None


def capture_of(record: ArcWarcRecord, filename: str, offset: int, length: int) -> Capture:
    """The catalog entry of a response, revisit or resource record read by warcio (its body read
    or not)."""
    headers = record.rec_headers
    url = headers.get_header("WARC-Target-URI")
    http = record.http_headers
    status = 200 if record.rec_type == "resource" else None
    if http is not None:
        status = status_of(http.get_statuscode())
    content_type = http.get_header("Content-Type") if http is not None else None
    if record.rec_type == "resource":
        content_type = headers.get_header("Content-Type")
    stamp = headers.get_header("WARC-Date")
    if not url or not stamp:
        raise ValueError(f"a {record.rec_type} record without WARC-Target-URI or WARC-Date")
    date = iso_date_to_datetime(stamp)
    return capture_fields(
        url=url, date=date.replace(tzinfo=UTC), status=status,
        content_type=content_type,
        location=http.get_header("Location") if http is not None else None,
        digest=headers.get_header("WARC-Payload-Digest") or "-", filename=filename,
        offset=offset, length=length, rectype=record.rec_type)


def index_warc(path: Path, filename: str | None = None) -> Iterator[Capture]:
    """Entries for every response and revisit record of one WARC file, in file order.

    Raises :class:`WarcError` for a file that is not a WARC or ends in a torn record.
    """
    name = filename or final_name(path)
    try:
        with path.open("rb") as f:
            yield from index_stream(f, name, str(path), gzipped=path.name.endswith((".gz", ".gz.open")))
    except OSError as e:
        raise WarcError(f"{path}: not a complete WARC file: {e}") from None


def index_stream(f: BinaryIO, name: str, where: str, *, gzipped: bool = True) -> Iterator[Capture]:
    """:func:`index_warc` over a seekable stream holding bundle ``name`` (``where`` for messages)."""
    it: ArchiveIterator | None = None
    try:
        if gzipped:
            # warcio reads a torn last member without complaint: check the framing first.
            end, records = complete_prefix(f)
            size = f.seek(0, 2)
            if end != size or not records:
                raise WarcError(f"{where}: not a complete WARC file: {records} complete "
                                f"records end at byte {end} of {size}")
            f.seek(0)
        it = ArchiveIterator(f, check_digests=False)
        # A capture is held back until the next one that does not refer to it: a labels record
        # may follow it, after the records of its rendering (a screenshot, its text), held too.
        held: list[tuple[str, Capture]] = []
        for record in it:
            if record.rec_type == "metadata" and held:
                found = labels_of(record, record.content_stream().read(MAX_LABELS_RECORD))
                it.read_to_end(record)
                if found is not None:
                    held = [(rid, dataclasses.replace(c, labels=labels_text(found[1]))
                             if rid == found[0] else c) for rid, c in held]
                continue
            if record.rec_type not in INDEXED or not _web_url(record):
                it.read_to_end(record)
                continue
            it.read_to_end(record)
            headers = record.rec_headers
            if not held or headers.get_header("WARC-Refers-To") != held[0][0]:
                yield from (capture for _, capture in held)
                held = []
            held.append((headers.get_header("WARC-Record-ID") or "",
                         capture_of(record, name, it.get_record_offset(), it.get_record_length())))
        yield from (capture for _, capture in held)
    except (ArchiveLoadFailed, EOFError, OSError, ValueError, UnicodeDecodeError) as e:
        raise WarcError(f"{where}: not a complete WARC file{_at(it)}: {e}") from None
    except (TypeError, AttributeError, KeyError, IndexError) as e:  # warcio on a damaged record
        raise WarcError(f"{where}: a damaged record warcio cannot parse{_at(it)} "
                        f"({type(e).__name__}: {e})") from None


def _at(it: ArchiveIterator | None) -> str:
    """Where the record being read begins, for a message (nothing before the first)."""
    return f" (the record at byte {it.offset})" if it is not None else ""


def _web_url(record: ArcWarcRecord) -> bool:
    """Is the record's target an http or https URL (not Heritrix's ``dns:``, wget's
    ``metadata://``), or a resource record of the rendering of one (``urn:screenshot:<url>``,
    ``urn:text:<url>``, catalogued beside its page: catalogkeys.surt_key)?"""
    url = record.rec_headers.get_header("WARC-Target-URI") or ""
    if record.rec_type == "resource" and (rendering := rendering_of(url)) is not None:
        url = rendering[1]
    return url[:8].lower().startswith(("http://", "https://"))


def final_name(path: Path) -> str:
    """The bundle's name once closed (without ``.open``)."""
    return path.name.removesuffix(".open")


@dataclass(frozen=True)
class Stored:
    """One record read back: its WARC headers, HTTP head and payload (as received)."""

    url: str
    rectype: str
    warc_headers: list[tuple[str, str]]
    http_head: bytes
    payload: bytes


# The payload read at a time when a record is streamed or skipped.
PIECE = 256 * 1024
# Compressed bytes inflated at a time when a record is opened for reading: deflate inflates a
# block to at most 1,032 times its size, so a piece of payload in memory stays within 4 MiB.
BLOCK = 4096


class OpenRecord:
    """One record opened for reading: its WARC headers and HTTP head, and its payload (``size``
    bytes, as received) read a piece at a time as the reader asks, never held whole: a gzip
    member is inflated as it is read, and a place in the payload is reached by reading up to it.
    Close it (or use it as a context manager); the source is closed with it."""

    def __init__(self, source: BinaryIO, where: str, offset: int) -> None:
        self._source = source
        self.where = f"{where}: the record at offset {offset}"
        try:
            self._records = ArchiveIterator(source, check_digests=False, block_size=BLOCK)
            record = next(iter(self._records))
            self.http_head = record.http_headers.to_bytes() if record.http_headers is not None else b""
            if record.format != "warc":  # warcio takes some garbage for an ARC record
                raise ValueError("no WARC record starts there")
            if not isinstance(record.raw_stream, LimitReader):
                raise ValueError("it has no Content-Length")
        except (ArchiveLoadFailed, StopIteration, EOFError, ValueError, OSError, zlib.error,
                TypeError, AttributeError, KeyError, IndexError) as e:  # the last: warcio on damage
            source.close()
            raise WarcError(f"{where}: no complete record at offset {offset}: {e}") from None
        self.url: str = record.rec_headers.get_header("WARC-Target-URI")
        self.rectype: str = record.rec_type
        self.warc_headers: list[tuple[str, str]] = list(record.rec_headers.headers)
        self._payload: LimitReader = record.raw_stream
        self.size: int = self._payload.limit
        self.position = 0

    def read(self, length: int) -> bytes:
        """The next ``length`` bytes of the payload (fewer at its end); WarcError if the record
        ends before its Content-Length."""
        try:
            data = self._payload.read(min(length, self.size - self.position))
        except (EOFError, OSError, zlib.error) as e:
            raise WarcError(f"{self.where} is damaged: {e}") from None
        if len(data) < min(length, self.size - self.position):
            raise WarcError(f"{self.where} is cut short at payload byte {self.position + len(data)} "
                            f"of {self.size}")
        self.position += len(data)
        return data

    def skip(self, length: int) -> None:
        """Read past ``length`` bytes of the payload, a piece at a time."""
        end = min(self.position + length, self.size)
        while self.position < end:
            self.read(min(PIECE, end - self.position))

    def close(self) -> None:
        self._records.close()
        self._source.close()

    def __enter__(self) -> OpenRecord:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Span(io.RawIOBase):
    """``length`` bytes of a file from where it stands, as a file of their own."""

    def __init__(self, file: BinaryIO, length: int) -> None:
        self._file, self._left = file, length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._file.read(min(len(buffer), self._left))
        buffer[: len(data)] = data
        self._left -= len(data)
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def span(file: BinaryIO, length: int) -> BinaryIO:
    """The next ``length`` bytes of ``file`` as a buffered file of their own (closing it closes
    ``file``)."""
    return io.BufferedReader(_Span(file, length), PIECE)


def open_record(warcs: Path, filename: str, offset: int, length: int) -> OpenRecord:
    """The record at ``offset`` (``length`` bytes) of a bundle, opened for reading."""
    path = locate(warcs, filename)
    file = path.open("rb")
    file.seek(offset)
    return OpenRecord(span(file, length), str(path), offset)


def locate(warcs: Path, filename: str) -> Path:
    """The file holding bundle ``filename`` (closed, or still ``.open``), inside ``warcs``."""
    if "/" in filename or filename.startswith("."):
        raise WarcError(f"bad WARC file name {filename!r}")
    for candidate in (warcs / filename, warcs / (filename + ".open")):
        if candidate.is_file():
            return candidate
    raise WarcError(f"{warcs / filename}: no such WARC file")


# A record's first bytes, compressed, read for its HTTP head alone: the WARC and HTTP heads of any
# record fit (a longer head is read with the whole record). Decompression stops at HEAD_TEXT.
HEAD_BYTES = 64 * 1024
HEAD_TEXT = 256 * 1024


def http_head_of(prefix: bytes, limit: int | None = HEAD_TEXT) -> bytes | None:
    """The HTTP head (status line and headers, blank line included) of the record whose gzip
    member starts with ``prefix``, decompressing at most ``limit`` bytes (None: all); None if
    the prefix ends before the head does, or is no gzip member. Never raises."""
    try:
        data = zlib.decompressobj(wbits=31).decompress(prefix, limit or 0)
    except zlib.error:
        return None
    warc_end = data.find(b"\r\n\r\n")
    http_end = data.find(b"\r\n\r\n", warc_end + 4) if warc_end >= 0 else -1
    return data[warc_end + 4 : http_end + 4] if http_end >= 0 else None


def read_head(warcs: Path, filename: str, offset: int, length: int) -> bytes:
    """The HTTP head of the record at ``offset`` of a bundle (``length`` bytes): from its first
    bytes, or from all of them if the head is longer (or, for a record that is no gzip member,
    as warcio reads it)."""
    with locate(warcs, filename).open("rb") as f:
        f.seek(offset)
        prefix = f.read(min(length, HEAD_BYTES))
        head = http_head_of(prefix)
        if head is None and length > len(prefix):
            head = http_head_of(prefix + f.read(length - len(prefix)), None)
    return head if head is not None else read_record(warcs, filename, offset, length).http_head


def read_record(warcs: Path, filename: str, offset: int, length: int) -> Stored:
    """Read the record at ``offset`` (``length`` bytes, one gzip member) of a bundle."""
    return parse_record(read_raw(warcs, filename, offset, length),
                        str(locate(warcs, filename)), offset)


def read_raw(warcs: Path, filename: str, offset: int, length: int) -> bytes:
    """The ``length`` bytes at ``offset`` of a bundle, as stored (one record's gzip member)."""
    path = locate(warcs, filename)
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise WarcError(f"{path}: record at {offset} is cut short ({len(data)} of {length} bytes)")
    return data


def parse_record(data: bytes, where: str, offset: int) -> Stored:
    """The record in ``data``, one gzip member read at ``offset`` of the bundle ``where``."""
    try:
        it = ArchiveIterator(io.BytesIO(data), check_digests=False)
        record = next(iter(it))
        head = record.http_headers.to_bytes() if record.http_headers is not None else b""
        payload = record.raw_stream.read()
        it.read_to_end(record)
    except (ArchiveLoadFailed, StopIteration, EOFError, ValueError) as e:
        raise WarcError(f"{where}: no complete record at offset {offset}: {e}") from None
    return Stored(url=record.rec_headers.get_header("WARC-Target-URI"), rectype=record.rec_type,
                  warc_headers=list(record.rec_headers.headers), http_head=head, payload=payload)
