"""The header checks ``archiver import`` runs over a WARC or ARC file before warcio parses it.

warcio reads a header line by joining the pieces of its buffer, which takes time quadratic in the
line's length (a 130 KB gzip file holding one 130 MB header line: 337 s); and a record whose
Content-Length lies makes it read part of a block as the next record's head. :func:`check_heads`
walks the decompressed records itself, reading every head through a line reader that stops at a
fixed length, and refuses what warcio would read slowly or differently: a head longer than its
cap (``MAX_WARC_HEAD``, ``MAX_HTTP_HEAD``: every header line is within it), a control character
in a WARC header, a Content-Length that is not a plain number, a block shorter than it says or
followed by anything but blank lines (after an ARC block one line is allowed: warcio skips it),
a missing or impossible WARC-Type or WARC-Date, an HTTP status that is not three digits. Time and
memory are linear in the file and bounded per line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

from warcio.timeutils import iso_date_to_datetime

# A record's WARC head, read at most: what bundles.complete_prefix reads of one, so a gzipped
# record within it is recognised as whole. Any header line is within it.
MAX_WARC_HEAD = 64 * 1024
# An HTTP head (status line and headers) read at most: what the replay reads a head from.
MAX_HTTP_HEAD = 256 * 1024
# Digits of a Content-Length or an ARC length at most (a petabyte has 16).
MAX_LENGTH_DIGITS = 18
_CHUNK = 1 << 16
_SKIP_CHUNK = 1 << 20
# Bytes a WARC header line may not hold: the C0 controls but tab, and DEL (CR and LF end it).
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_FIELD = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:[ \t]*(.*)")
_STATUS = re.compile(rb"HTTP/\d+(?:\.\d+)? +(\d{3})(?: .*)?|HTTP/\d+(?:\.\d+)? +(\S*).*")
# Record types whose block warcio parses as an HTTP message (when the target is http or https).
_HTTP_RECORDS = ("response", "request", "revisit")


class HeadError(Exception):
    """A record the checks refuse: ``number`` (from 1) and ``offset`` (its first byte in the
    decompressed data) say which; the message says why."""

    def __init__(self, number: int, offset: int, message: str) -> None:
        super().__init__(message)
        self.number, self.offset = number, offset


class _Lines:
    """A binary stream read line by line, no line longer than asked, and skipped by count; each
    byte is copied a bounded number of times, however the lines are cut."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.buffer = b""
        self.start = 0  # the buffer's first unread byte
        self.position = 0  # of that byte in the stream

    def _fill(self) -> bool:
        chunk = self.stream.read(_CHUNK)
        if chunk:
            self.buffer = self.buffer[self.start :] + chunk
            self.start = 0
        return bool(chunk)

    def line(self, limit: int) -> bytes | None:
        """The next line, its end included (the last one may lack it; b"" at the end); None if
        it is longer than ``limit`` bytes (then nothing is consumed)."""
        seen = 0  # unread bytes known to hold no line end
        while (end := self.buffer.find(b"\n", self.start + seen, self.start + limit)) < 0:
            available = len(self.buffer) - self.start
            if available >= limit:
                return None
            seen = available
            if not self._fill():
                end = len(self.buffer) - 1
                break
        line = self.buffer[self.start : end + 1]
        self.start = end + 1
        self.position += len(line)
        return line

    def skip_line_ends(self) -> None:
        """Consume the blanks (spaces, tabs, CR, LF) that come next: the lines between records."""
        while True:
            rest = self.buffer[self.start :]
            kept = rest.lstrip(b" \t\r\n")
            self.start += len(rest) - len(kept)
            self.position += len(rest) - len(kept)
            if kept or not self._fill():
                return

    def skip(self, count: int) -> int:
        """Consume up to ``count`` bytes; how many there were."""
        taken = min(count, len(self.buffer) - self.start)
        self.start += taken
        while taken < count and (chunk := self.stream.read(min(count - taken, _SKIP_CHUNK))):
            taken += len(chunk)
        self.position += taken
        return taken


def check_heads(stream: BinaryIO, warn: Callable[[str], None] = lambda _: None
                ) -> tuple[int, dict[str, int]]:
    """Check every record of the decompressed WARC or ARC data in ``stream``; (records, records
    by WARC-Type; an ARC file's records as "response", its header as "arc_header"). HeadError
    for the first record refused; ``warn`` hears what is taken as warcio takes it (one line)."""
    lines = _Lines(stream)
    records = 0
    kinds: dict[str, int] = {}
    for kind in _records(lines, warn):
        records += 1
        kinds[kind] = kinds.get(kind, 0) + 1
    return records, kinds


def _records(lines: _Lines, warn: Callable[[str], None]) -> Iterator[str]:
    number = 0
    while True:
        lines.skip_line_ends()
        offset = lines.position
        first = lines.line(MAX_WARC_HEAD)
        if first is None:
            raise HeadError(number + 1, offset, f"a line longer than {MAX_WARC_HEAD} bytes where "
                                                 "a record's head should be")
        if not first:
            return
        if not first.strip():
            continue  # blank lines between records
        number += 1
        if first.startswith(b"WARC/"):
            yield _warc_record(lines, first, number, offset)
        elif (number == 1 and first.startswith(b"filedesc://")) or (number > 1 and _is_arc_line(first)):
            yield _arc_record(lines, first, number, offset, warn)
        else:
            raise HeadError(number, offset, f"{_shown(first[:40])} where a record should begin")


def _warc_record(lines: _Lines, first: bytes, number: int, offset: int) -> str:
    fields: dict[str, bytes] = {}
    used = len(first)
    while True:
        line = lines.line(MAX_WARC_HEAD - used)
        if line is None:
            raise HeadError(number, offset, f"its WARC head is longer than {MAX_WARC_HEAD} bytes")
        if not line.endswith(b"\n"):
            raise HeadError(number, offset, "the file is cut short inside its WARC head")
        used += len(line)
        text = line.rstrip(b"\r\n")
        if not text:
            break
        if _CONTROL.search(text):
            raise HeadError(number, offset, f"a control character in its WARC header {_shown(text[:40])}")
        if text[:1] in b" \t":
            continue  # a continuation line
        field = _FIELD.fullmatch(text)
        if field is None:
            raise HeadError(number, offset, f"a WARC header line without a name: {_shown(text[:40])}")
        fields.setdefault(field.group(1).decode().lower(), field.group(2).strip())
    kind = fields.get("warc-type", b"").decode("latin-1")
    if not kind:
        raise HeadError(number, offset, "no WARC-Type, which every WARC record has")
    _check_date(fields.get("warc-date"), number, offset)
    length = _length(fields.get("content-length"), "Content-Length", number, offset)
    uri = fields.get("warc-target-uri", b"").strip(b"<>")
    block = length
    if kind in _HTTP_RECORDS and uri[:8].lower().startswith((b"http://", b"https://")) and length:
        block -= _check_http_head(lines, length, kind, number, offset)
    _check_block(lines, block, length, number, offset)
    return kind


def _arc_fields(line: bytes) -> list[bytes]:
    """An ARC record's line (version 1) as warcio reads it: URL, IP address, date, media type and
    length, split at the last four spaces (a URL may hold spaces; warcio escapes them)."""
    return line.rstrip(b"\r\n").rsplit(b" ", 4)


def _is_arc_line(line: bytes) -> bool:
    fields = _arc_fields(line)
    return len(fields) == 5 and bool(fields[0]) and fields[2].isdigit() and fields[4].isdigit()


def _arc_record(lines: _Lines, first: bytes, number: int, offset: int,
                warn: Callable[[str], None]) -> str:
    fields = _arc_fields(first)
    length = _length(fields[-1], "length", number, offset)
    uri = fields[0]
    if b" " in uri:
        warn(f"record {number} (at byte {offset}): its URL {_shown(uri[:60])} holds spaces, "
             "escaped as %20 as warcio escapes them")
    block = length
    if uri[:8].lower().startswith((b"http://", b"https://")) and length:
        block -= _check_http_head(lines, length, "response", number, offset)
    # ARC writers were lax: warcio skips one line after a block, whatever it holds (it warns),
    # and reads the next record from the line after.
    if (extra := _check_block(lines, block, length, number, offset, lax=True)) is not None:
        warn(f"record {number} (at byte {offset}): {_shown(extra[:40])} follows its block of "
             f"{length} bytes; skipped, as warcio skips it")
    return "arc_header" if number == 1 else "response"


def _check_date(value: bytes | None, number: int, offset: int) -> None:
    if not value:
        raise HeadError(number, offset, "no WARC-Date, which every WARC record has")
    try:
        iso_date_to_datetime(value.decode("latin-1"))
    except (ValueError, TypeError, OverflowError):
        raise HeadError(number, offset, f"WARC-Date {_shown(value[:40])} is not a date "
                                        "(YYYY-MM-DDThh:mm:ssZ)") from None


def _length(value: bytes | None, name: str, number: int, offset: int) -> int:
    if value is None or not value.isdigit() or len(value) > MAX_LENGTH_DIGITS:
        got = "none" if value is None else _shown(value[:40])
        raise HeadError(number, offset, f"its {name} is not a number of at most "
                                        f"{MAX_LENGTH_DIGITS} digits: {got}")
    return int(value)


def _check_http_head(lines: _Lines, length: int, kind: str, number: int, offset: int) -> int:
    """Read the HTTP head at the start of a block of ``length`` bytes; the bytes it took."""
    budget = min(length, MAX_HTTP_HEAD)
    used = 0
    status = None
    while used < budget:
        line = lines.line(budget - used)
        if line is None:
            if budget < length:
                raise HeadError(number, offset, f"its HTTP head is longer than {MAX_HTTP_HEAD} bytes")
            break  # the block ends inside the head: warcio reads it all as the head
        if not line:
            break
        used += len(line)
        if status is None:
            status = line.rstrip(b"\r\n")
        if not line.strip():
            break
    if kind != "request" and status is not None and status.startswith(b"HTTP/"):
        found = _STATUS.fullmatch(status)
        if found is None or found.group(1) is None:
            got = found.group(2) if found is not None else status
            raise HeadError(number, offset, f"HTTP status {_shown(got[:40])} is not three digits")
    return used


def _check_block(lines: _Lines, rest: int, length: int, number: int, offset: int, *,
                 lax: bool = False) -> bytes | None:
    """Skip the ``rest`` of a block of ``length`` bytes, then the blank lines that end it; with
    ``lax``, the one line that may stand there instead (returned)."""
    got = lines.skip(rest)
    if got < rest:
        raise HeadError(number, offset, f"its block is cut short: {length - rest + got} of "
                                        f"{length} bytes")
    after = lines.position
    line = lines.line(MAX_WARC_HEAD)
    if line is not None and line and line.strip():
        if lax:
            return line
        raise HeadError(number, offset, f"{_shown(line[:40])} follows its block of {length} bytes "
                                        f"(at byte {after}): its Content-Length is wrong")
    if line is None:
        raise HeadError(number, offset, f"a line longer than {MAX_WARC_HEAD} bytes follows its "
                                        f"block of {length} bytes: its Content-Length is wrong")
    return None


def _shown(data: bytes) -> str:
    """Bytes for a message: printable ASCII as is, the rest escaped."""
    return repr(data)[1:]
