"""WARC bundles: every fetched exchange appended to large WARC/1.1 files, one gzip member a record.

A bundle is named ``<prefix>-<yyyymmddhhmmss>-<process>-<serial>.warc.gz`` (UTC time of opening,
5-digit serial that continues past every name already in the directory) and carries a ``.open``
suffix until it is closed. Its first record is a ``warcinfo``; a new bundle is started once the
current one has reached ``max_size`` (checked before each write, so a bundle ends at most one
exchange past it, as Heritrix does), or has been open ``max_age`` seconds (checked before each
write and at each group commit, so an idle bundle is closed too).

warcio builds, hashes and serialises every record; this module only chooses the gzip level. Each
record is written uncompressed by warcio into a reused buffer and then compressed as one gzip
member, because warcio's own gzip runs at level 9. Exact bytes: warcio would rebuild an HTTP head
from its parsed fields (respacing names, joining folded lines, %-encoding non-ASCII), so heads are
handed to it pre-serialised (``_RawHead``) and stored byte for byte. Digests are computed once,
by warcio, in the pass that writes the record: WARC-Block-Digest over head + body and
WARC-Payload-Digest over the body exactly as stored, which is what ``warcio check`` recomputes.
Callers that store a de-chunked body rename Transfer-Encoding in the head (see
``archiver.crawl.http``). Building and compressing an exchange (``pack_exchange``) touches none of
the writer's state, so a worker thread may do it for a large response while the event loop writes
other records; ``write_packed`` then appends it.

gzip level 6 (zlib's default): measured against levels 1, 3 and 9 in the README, "Benchmarks".

Durability: each exchange (its response and request records) reaches the OS in one write(2) as
soon as it is written, so a killed process loses only the exchange it was writing: crash recovery
counts every complete record as fetched (``archiver.crawl.recovery``). ``sync()`` adds an fsync, which is
what a power loss keeps. A write that fails part-way is cut back to the last record boundary, so a
file only ever holds complete records plus, after a crash, one torn tail, which
``repair_open_bundle`` removes; after a failed write (a full disk) records stay in memory until
a ``flush()`` succeeds.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from archiver import __version__
from archiver.config import WarcConfig
from archiver.store.durable import Retired, SyncJob, fsync_directory

SUFFIX = ".warc.gz"
OPEN = ".open"
CORRUPT = ".corrupt"

_READ_CHUNK = 64 * 1024
# Output cap per inflate step during repair, so a tail of zeros cannot balloon memory.
_INFLATE_STEP = 1 << 20
# A WARC header block is a few hundred bytes; 64 KiB of a record's start is always enough.
_HEAD_LIMIT = 64 * 1024

_GZIP = zlib.MAX_WBITS | 16
_RESPONSE = "application/http;msgtype=response"
_REQUEST = "application/http;msgtype=request"
_WARC_FIELDS = "application/warc-fields"
# The content type of a labels record (write_labels), as archiver.store.warcindex recognises it.
LABELS_TYPE = "application/json"
_CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 section 5.6.2
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOT_URI = re.compile(r"[\x00-\x20\x7f]")
_DIGITS = re.compile(r"[0-9]+")
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


@dataclass(frozen=True)
class RecordLocation:
    """Where a record's gzip member lies, as a CDX index line tells it."""

    filename: str
    offset: int
    length: int


@dataclass(frozen=True)
class Written:
    """The two records of one exchange."""

    request: RecordLocation
    response: RecordLocation
    record_id: str
    payload_digest: str


@dataclass(frozen=True)
class Packed:
    """An exchange's two records, serialised and compressed (``pack_exchange``), not yet written."""

    response: bytes
    request: bytes
    record_id: str
    payload_digest: str


@dataclass(frozen=True)
class RepairReport:
    """What ``repair_open_bundle`` did to one file."""

    path: Path
    kept_records: int
    cut_bytes: int
    final_path: Path


def _exchange_fields(url: str, ip: str | None, date: datetime) -> list[tuple[str, str]]:
    """WARC-Date, WARC-Target-URI and WARC-IP-Address: what both records of an exchange carry."""
    fields = [("WARC-Date", _warc_date(date)), ("WARC-Target-URI", _check_uri(url))]
    if ip:
        fields.append(("WARC-IP-Address", _check_field("ip", ip)))
    return fields


def payload_digest(payload: bytes) -> str:
    """The WARC-Payload-Digest warcio writes for ``payload``: ``sha1:`` and base32 (WARC 1.1 §5.9)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode("ascii")


class _RawHead(StatusAndHeaders):
    """An HTTP head that warcio hashes and writes byte for byte instead of re-serialising."""

    def __init__(self, raw: bytes) -> None:
        super().__init__("", [])
        self.headers_buff = raw

    def compute_headers_buffer(self, header_filter: object = None) -> None:
        """Keep the bytes as received."""

    def __bool__(self) -> bool:
        return True


class _RecordWriter(WARCWriter):
    # A metadata block has no protocol envelope around it, so its payload digest would only
    # repeat the block digest: skip it, as warcio already does for warcinfo.
    NO_PAYLOAD_DIGEST_TYPES = (*WARCWriter.NO_PAYLOAD_DIGEST_TYPES, "metadata")


class BundleWriter:
    """Appends records to rotating, gzip-per-record WARC/1.1 bundles in ``directory``."""

    def __init__(
        self,
        directory: Path,
        settings: WarcConfig,
        *,
        process: int = 0,
        software: str = f"archiver/{__version__}",
        operator: str = "",
        extra_info: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``settings``: the ``[warc]`` section (bundle name prefix, rotation size, gzip level)."""
        prefix, max_size, gzip_level = settings.prefix, settings.max_size, settings.gzip_level
        if not prefix or "/" in prefix or _CONTROL.search(prefix):
            raise ValueError(f"bad bundle prefix {prefix!r}")
        if process < 0 or max_size <= 0 or not 0 <= gzip_level <= 9:
            raise ValueError("process must be >= 0, max_size > 0 and gzip_level 0..9")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.process = process
        self.max_size = max_size
        self.max_age = settings.max_age
        self._clock = clock
        self._opened = 0.0  # clock() when the current bundle was opened
        self.gzip_level = gzip_level
        # The thread that writes (the event loop's): it reuses one buffer; others get their own.
        self._owner = threading.get_ident()
        self._buffer = io.BytesIO()
        self._writer = _RecordWriter(self._buffer, gzip=False, warc_version="1.1")
        self._info = {
            "software": software,
            "format": "WARC File Format 1.1",
            "conformsTo": _CONFORMS_TO,
            "hostname": self._writer.hostname,
            "operator": operator,
            **(extra_info or {}),
        }
        for name, value in self._info.items():
            _check_field(name, value)
        self._name_pattern = re.compile(
            rf"{re.escape(prefix)}-\d{{14}}-{process}-(\d{{5,}}){re.escape(SUFFIX)}"
            rf"(?:{re.escape(OPEN)}|{re.escape(CORRUPT)})?"
        )
        self._serial = self._highest_serial() + 1
        self._fd: int | None = None
        self._name = ""
        self._pending = bytearray()
        self._size = 0
        self._on_disk = 0
        self.current_path: Path | None = None
        self.bytes_written = 0
        self.files_closed = 0
        self._retired: list[Retired] = []  # full bundles not yet fsynced, closed and renamed
        self._new_entry = False  # a bundle was created since the last sync job
        # The last failed write (a full disk...); records stay in memory until a flush succeeds.
        self.error: OSError | None = None

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def write_exchange(
        self,
        *,
        url: str,
        ip: str | None,
        date: datetime,
        request: bytes,
        response_head: bytes,
        response_body: bytes,
        truncated: str | None = None,
    ) -> Written:
        """Append a ``response`` record and its ``request`` record (WARC-Concurrent-To it)."""
        return self.write_packed(self.pack_exchange(
            url=url, ip=ip, date=date, request=request, response_head=response_head,
            response_body=response_body, truncated=truncated))

    def pack_exchange(
        self,
        *,
        url: str,
        ip: str | None,
        date: datetime,
        request: bytes,
        response_head: bytes,
        response_body: bytes,
        truncated: str | None = None,
    ) -> Packed:
        """``write_exchange``'s two records, built, hashed and compressed but not written. Safe in
        a worker thread: it changes nothing in the writer."""
        common = _exchange_fields(url, ip, date)
        response_id = StatusAndHeadersParser.make_warc_id()
        extra = [("WARC-Truncated", _check_token("truncated", truncated))] if truncated else []
        response = self._record(
            "response", response_id, common + extra, _RESPONSE, response_body, response_head
        )
        packed_response = self._compress(response)
        return Packed(packed_response, self._compress(self._request(common, response_id, request)),
                      response_id, response.rec_headers.get_header("WARC-Payload-Digest"))

    def write_packed(self, packed: Packed) -> Written:
        """Append an exchange ``pack_exchange`` made: the response record, then the request."""
        self._ready()
        response_at = self._append(packed.response)
        request_at = self._append(packed.request)
        self._hand_over()
        return Written(request=request_at, response=response_at, record_id=packed.record_id,
                       payload_digest=packed.payload_digest)

    def _request(self, common: list[tuple[str, str]], response_id: str, request: bytes
                 ) -> ArcWarcRecord:
        """The request record of an exchange, concurrent to the record ``response_id``."""
        head, separator, body = request.partition(b"\r\n\r\n")
        if not separator:
            head, body = request, b""
        return self._record(
            "request",
            StatusAndHeadersParser.make_warc_id(),
            [*common, ("WARC-Concurrent-To", response_id)],
            _REQUEST,
            body,
            head + separator,
        )

    def write_revisit(
        self,
        *,
        url: str,
        ip: str | None,
        date: datetime,
        request: bytes,
        response_head: bytes,
        payload_digest: str,
        refers_to_url: str,
        refers_to_date: datetime,
        not_modified: bool = False,
    ) -> Written:
        """Append a ``revisit`` record and its ``request`` record.

        The payload equals that of the capture of ``refers_to_url`` at ``refers_to_date``: only the
        response head is stored (WARC 1.1 section 6.7.2), the way Heritrix and wget deduplicate.
        The profile is identical-payload-digest (the payload came again, unchanged), or with
        ``not_modified`` server-not-modified (the server answered a conditional request 304: its
        head is stored, and the payload is the capture's it confirms, ``payload_digest``).
        """
        common = _exchange_fields(url, ip, date)
        revisit_id = StatusAndHeadersParser.make_warc_id()
        refers = [
            ("WARC-Profile", NOT_MODIFIED_PROFILE if not_modified else REVISIT_PROFILE),
            ("WARC-Refers-To-Target-URI", _check_uri(refers_to_url)),
            ("WARC-Refers-To-Date", _warc_date(refers_to_date)),
            ("WARC-Payload-Digest", _check_field("digest", payload_digest)),
        ]
        revisit = self._record("revisit", revisit_id, common + refers, _RESPONSE, b"", response_head)
        return self.write_packed(Packed(self._compress(revisit),
                                        self._compress(self._request(common, revisit_id, request)),
                                        revisit_id, payload_digest))

    def write_metadata(
        self, *, url: str, date: datetime, fields: Mapping[str, str]
    ) -> RecordLocation:
        """Append a ``metadata`` record holding ``fields`` as application/warc-fields."""
        block = "".join(f"{name}: {_check_field(name, v)}\r\n" for name, v in fields.items())
        record = self._record(
            "metadata",
            StatusAndHeadersParser.make_warc_id(),
            [("WARC-Date", _warc_date(date)), ("WARC-Target-URI", _check_uri(url))],
            _WARC_FIELDS,
            block.encode(),
        )
        self._ready()
        location = self._append(self._compress(record))
        self._hand_over()
        return location

    def write_resource(self, *, url: str, date: datetime, refers_to: str, content_type: str,
                       payload: bytes) -> Written:
        """Append a ``resource`` record: ``payload`` stored whole as ``content_type``, with
        WARC-Refers-To naming the record ``refers_to`` (its WARC-Record-ID) it was made from, as
        a page's screenshot and rendered text name the page's response (``urn:screenshot:<url>``,
        ``urn:text:<url>``). A record of its own, without a request: ``Written.request`` repeats
        ``Written.response``, its location."""
        if not content_type.strip():
            raise ValueError("a resource record needs a Content-Type")
        record_id = StatusAndHeadersParser.make_warc_id()
        record = self._record(
            "resource", record_id,
            [("WARC-Date", _warc_date(date)), ("WARC-Target-URI", _check_uri(url)),
             ("WARC-Refers-To", _check_field("refers_to", refers_to))],
            _check_field("content_type", content_type), payload)
        member = self._compress(record)
        self._ready()
        location = self._append(member)
        self._hand_over()
        return Written(request=location, response=location, record_id=record_id,
                       payload_digest=record.rec_headers.get_header("WARC-Payload-Digest"))

    def write_labels(self, *, url: str, date: datetime, refers_to: str, labels: Mapping[str, str]
                     ) -> RecordLocation:
        """Append a ``metadata`` record of the plugins' labels for the record ``refers_to`` (its
        WARC-Record-ID) just written, in the same bundle: ``{"labels": {name: value}}`` as
        application/json (``LABELS_TYPE``), WARC-Refers-To naming that record. Written without
        rotating, so it always lies in the bundle of the record it describes, after it."""
        if self._fd is None:
            raise ValueError("labels follow the record they describe: no bundle is open")
        record = self._record(
            "metadata",
            StatusAndHeadersParser.make_warc_id(),
            [("WARC-Date", _warc_date(date)), ("WARC-Target-URI", _check_uri(url)),
             ("WARC-Refers-To", _check_field("refers_to", refers_to))],
            LABELS_TYPE,
            json.dumps({"labels": dict(labels)}, ensure_ascii=False, sort_keys=True).encode(),
        )
        location = self._append(self._compress(record))
        self._hand_over()
        return location

    def position(self) -> tuple[int, int]:
        """(serial, offset) where the next record goes: every record written so far lies before
        it (in a bundle of a lower serial, or of this serial at a lower offset)."""
        if self._fd is None:
            return self._serial, 0
        return self._serial - 1, self._size

    def flush(self) -> None:
        """Hand every pending byte to the OS."""
        if self._fd is None or not self._pending:
            return
        done = 0
        try:
            with memoryview(self._pending) as view:
                while done < len(view):
                    done += os.write(self._fd, view[done:])
        except BaseException:
            if done:
                # Part of a record may have landed: cut back to the last complete one, so
                # later records never follow a torn one. The pending bytes stay for a retry.
                os.ftruncate(self._fd, self._on_disk)
            raise
        self._on_disk += done
        self._pending.clear()
        self.error = None

    def sync(self) -> None:
        """Make every record written so far durable: fsync the current bundle, finish the full
        ones (blocking: the crawler does this in a worker thread through ``add_to``)."""
        job = SyncJob()
        handed = self.add_to(job)
        job.run()
        self.finished(handed)

    def prepare_sync(self) -> int | None:
        """Flush; the descriptor to fsync (None when no bundle is open)."""
        self.flush()
        return self._fd

    def add_to(self, job: SyncJob) -> list[Retired]:
        """Flush, and give ``job`` what makes every record written so far durable: the current
        bundle's descriptor (a duplicate), the full bundles to finish, the new directory entry.
        Returns the retired bundles handed over; ``finished`` drops them once the job ran."""
        if self._fd is not None and self._too_old():
            self._retire_current()
        fd = self.prepare_sync()
        if fd is not None:
            job.fds.append(os.dup(fd))
        if self._new_entry:
            job.directories.add(self.directory)
            self._new_entry = False
        job.retired += self._retired
        return list(self._retired)

    def finished(self, retired: list[Retired]) -> None:
        """The job that had ``retired`` ran: they are published."""
        self._retired = [r for r in self._retired if r not in retired]
        self.files_closed += len(retired)

    def close(self) -> None:
        """Flush, fsync and close the current bundle and finish the full ones, dropping their
        ``.open`` suffix."""
        self.flush()
        if self._fd is not None and self.current_path is not None:
            self._retired.append(Retired(self._fd, self.current_path, self.directory / self._name))
            self._fd = self.current_path = None
        job = SyncJob()
        handed = self.add_to(job)
        job.run()
        self.finished(handed)

    def abandon(self) -> None:
        """Close every descriptor without publishing anything (a full disk at shutdown): the next
        start repairs and indexes the ``.open`` bundles."""
        for item in self._retired:
            item.abandon()
        self._retired = []
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def retire(self) -> None:
        """Close the current bundle at the next sync job, whatever its age (a crawler with
        nothing left to fetch ships what it holds)."""
        self._retire_current()

    def _ready(self) -> None:
        """Make sure a bundle is open with room left. A full one is retired: flushed here, then
        fsynced, closed and renamed by the next sync job, in a worker thread (``add_to``)."""
        if self._fd is not None and self._size < self.max_size and not self._too_old():
            return
        self._retire_current()
        self._serial = max(self._serial, self._highest_serial() + 1)
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        name = f"{self.prefix}-{stamp}-{self.process}-{self._serial:05d}{SUFFIX}"
        path = self.directory / (name + OPEN)
        # O_APPEND: after flush() cuts a failed write back, the next one lands at the new end.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        self._fd = os.open(path, flags, 0o644)
        self._new_entry = True
        self._serial += 1
        self._name, self.current_path = name, path
        self._size = self._on_disk = 0
        self._opened = self._clock()
        self._append(self._compress(self._writer.create_warcinfo_record(name, self._info)))
        self.flush()  # a bundle on disk always starts with its warcinfo

    def _too_old(self) -> bool:
        return self._clock() - self._opened >= self.max_age

    def _retire_current(self) -> None:
        """Hand the current bundle to the next sync job to fsync, close and rename."""
        if self._fd is not None and self.current_path is not None:
            self.flush()
            self._retired.append(Retired(self._fd, self.current_path, self.directory / self._name))
            self._fd = self.current_path = None

    def _highest_serial(self) -> int:
        serials = (self._name_pattern.fullmatch(entry.name) for entry in os.scandir(self.directory))
        return max((int(match[1]) for match in serials if match), default=-1)

    def _record(
        self,
        rec_type: str,
        record_id: str,
        fields: list[tuple[str, str]],
        content_type: str,
        payload: bytes,
        http_head: bytes | None = None,
    ) -> ArcWarcRecord:
        headers = StatusAndHeaders(
            "", [("WARC-Type", rec_type), ("WARC-Record-ID", record_id), *fields], "WARC/1.1"
        )
        record = ArcWarcRecord(
            "warc",
            rec_type,
            headers,
            io.BytesIO(payload),
            None if http_head is None else _RawHead(http_head),
            content_type,
            len(payload),
        )
        record.payload_length = len(payload)
        return record

    def _compress(self, record: ArcWarcRecord) -> bytes:
        """Serialise ``record`` with warcio (digests included) into one gzip member."""
        if threading.get_ident() == self._owner:
            buffer, writer = self._buffer, self._writer
            buffer.seek(0)
            buffer.truncate()
        else:  # a worker thread packing a large exchange
            buffer = io.BytesIO()
            writer = _RecordWriter(buffer, gzip=False, warc_version="1.1")
        writer.write_record(record)
        with buffer.getbuffer() as view:
            return zlib.compress(view, self.gzip_level, wbits=_GZIP)

    def _append(self, member: bytes) -> RecordLocation:
        location = RecordLocation(self._name, self._size, len(member))
        self._pending += member
        self._size += len(member)
        self.bytes_written += len(member)
        return location

    def _hand_over(self) -> None:
        """Hand what was just written to the OS; after a failed write (``error`` set) the
        records wait in memory for the next ``flush``."""
        if self.error is None:
            try:
                self.flush()
            except OSError as e:  # the records stay pending; the caller sees ``error``
                self.error = e


def repair_open_bundle(path: Path) -> RepairReport:
    """Cut a crashed ``*.warc.gz.open`` back to its complete records and close it.

    The file keeps its longest prefix of gzip members that each hold one complete WARC record;
    it is truncated there, fsynced and renamed without ``.open``. A file without one complete
    record (torn within its warcinfo) is renamed ``*.warc.gz.corrupt`` untouched instead: it
    holds nothing to serve, and keeping the name stops its serial being reused. An empty file
    (a crash between creating it and writing its warcinfo) is removed.
    """
    path = Path(path)
    if not path.name.endswith(SUFFIX + OPEN):
        raise ValueError(f"{path} is not an open bundle (*{SUFFIX}{OPEN})")
    with path.open("r+b") as file:
        end, records = complete_prefix(file)
        size = file.seek(0, os.SEEK_END)
        if records:
            file.truncate(end)
            os.fsync(file.fileno())
    stem = path.name.removesuffix(OPEN)
    if size == 0:  # killed between creating the file and writing its warcinfo: nothing to keep
        path.unlink()
        fsync_directory(path.parent)
        return RepairReport(path, 0, 0, path)
    final = path.with_name(stem if records else stem + CORRUPT)
    if final.exists():
        raise FileExistsError(f"{final} already exists")
    path.rename(final)
    fsync_directory(path.parent)
    return RepairReport(path, records, size - end if records else size, final)


def complete_prefix(file: BinaryIO) -> tuple[int, int]:
    """Length and record count of the leading gzip members that each hold a whole record."""
    end = records = 0
    data = b""
    while True:
        inflater = zlib.decompressobj(_GZIP)
        record = _RecordCheck()
        fed = len(data)
        while not inflater.eof:
            if not data:
                data = file.read(_READ_CHUNK)
                fed += len(data)
                if not data:
                    try:
                        record.feed(inflater.flush())
                    except zlib.error:
                        return end, records
                    if not inflater.eof:
                        return end, records
                    break
            try:
                record.feed(inflater.decompress(data, _INFLATE_STEP))
            except zlib.error:
                return end, records
            data = inflater.unconsumed_tail
        if not record.complete():
            return end, records
        data = inflater.unused_data
        end += fed - len(data)
        records += 1


class _RecordCheck:
    """Tells whether a decompressed member is exactly one complete WARC record."""

    def __init__(self) -> None:
        self.head = b""
        self.size = 0
        self.tail = b""

    def feed(self, data: bytes) -> None:
        if len(self.head) < _HEAD_LIMIT:
            self.head += data[: _HEAD_LIMIT - len(self.head)]
        self.size += len(data)
        self.tail = (self.tail + data[-4:])[-4:]

    def complete(self) -> bool:
        header_end = self.head.find(b"\r\n\r\n") + 4
        if header_end < 4 or not self.head.startswith(b"WARC/1."):
            return False
        headers = StatusAndHeadersParser([], verify=False).parse(io.BytesIO(self.head[:header_end]))
        length = headers.get_header("Content-Length", "")
        return (
            _DIGITS.fullmatch(length) is not None
            and self.size == header_end + int(length) + 4
            and self.tail == b"\r\n\r\n"
        )


def _warc_date(date: datetime) -> str:
    """WARC-Date in UTC with microseconds, which WARC/1.1 allows (section 5.4)."""
    if date.tzinfo is None:
        raise ValueError("WARC dates need a timezone-aware datetime")
    return datetime_to_iso_date(date.astimezone(UTC).replace(tzinfo=None), use_micros=True)


def _check_uri(url: str) -> str:
    if not url or _NOT_URI.search(url):
        raise ValueError(f"not a URI fit for WARC-Target-URI: {url!r}")
    return url


def _check_field(name: str, value: str) -> str:
    """A warc-fields line: token name, value without control characters (CR, LF...)."""
    if not _TOKEN.fullmatch(name) or _CONTROL.search(value):
        raise ValueError(f"bad WARC field {name!r}: {value!r}")
    return value


def _check_token(name: str, value: str) -> str:
    if not _TOKEN.fullmatch(value):
        raise ValueError(f"bad {name} value {value!r}")
    return value
