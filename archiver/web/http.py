"""HTTP header and body helpers (pure logic, no I/O): content codings, media types, Retry-After."""

from __future__ import annotations

import email.utils
import re
import zlib
from datetime import UTC
from typing import NamedTuple

import brotli

# Compressed input is fed to the decoders in pieces of this size, so that corrupt data
# costs at most one piece's worth of output.
_DECODE_STEP = 16 * 1024
_GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS  # zlib detects the gzip or zlib header itself
_RAW_DEFLATE = -zlib.MAX_WBITS
# Content codings undone at most: more is a protocol error. curl stops at 5 since 7.84 (its
# CVE-2022-32206, where stacked codings made it decode without end); a response needs one.
MAX_CODINGS = 5
_LIST_ELEMENT = re.compile(r"[^,]+")


def media_type(value: str | None) -> tuple[str, str | None]:
    """``text/html; charset=UTF-8`` -> (``text/html``, ``UTF-8``)."""
    if not value:
        return "", None
    mime, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("\"'") or None
    return mime.strip().lower(), charset


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or HTTP-date, RFC 9110 §10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "¹".isdigit() too, but it is no delta-seconds
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)


# An entity tag (RFC 9110 §8.8.3): optionally weak, then a quoted run of visible ASCII but '"'
# (its obs-text left out: a request header we send stays ASCII).
_ETAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e]{0,256}"')


def conditions(head: bytes) -> list[tuple[str, str]]:
    """The request headers that ask whether a capture is still current (RFC 9110 §13.1): from
    the raw HTTP head of a 200 response, ``If-None-Match`` with its ``ETag`` and
    ``If-Modified-Since`` with its ``Last-Modified`` (written afresh as an HTTP date). A validator
    that is malformed is left out, so a hostile one can never make a request unsendable. Never
    raises."""
    status, found = head_fields(head)
    if status != b"200":
        return []
    out = []
    etag = found.get(b"etag", b"").decode("latin-1")
    if _ETAG.fullmatch(etag):
        out.append(("If-None-Match", etag))
    modified = found.get(b"last-modified", b"").decode("latin-1")
    try:
        when = email.utils.parsedate_to_datetime(modified) if modified else None
        if when is not None and when.tzinfo is not None and 1970 <= when.year <= 9998:
            out.append(("If-Modified-Since",
                        email.utils.format_datetime(when.astimezone(UTC), usegmt=True)))
    except (TypeError, ValueError, IndexError, OverflowError):
        pass
    return out


def content_length(head: bytes) -> int | None:
    """The Content-Length of a raw HTTP response head, if it gives one. Never raises."""
    value = head_fields(head)[1].get(b"content-length", b"")
    return int(value) if value.isdigit() and len(value) < 19 else None


def head_fields(head: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """A raw response head's status code, and the first value of each header (lower-case names)."""
    lines = head.split(b"\r\n\r\n", 1)[0].replace(b"\r\n", b"\n").split(b"\n")
    status = lines[0].split(None, 2)
    found: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if colon:
            found.setdefault(name.strip().lower(), value.strip())
    return (status[1] if len(status) >= 2 else b""), found


class CodingError(ValueError):
    """A Content-Encoding naming more codings than :data:`MAX_CODINGS`: a protocol error."""


def content_codings(value: str | None) -> list[str]:
    """The codings a Content-Encoding value names, lower-case, in the order they were applied
    (RFC 9110 section 8.4); ``identity`` and empty list elements left out. Raises CodingError
    at the first coding past :data:`MAX_CODINGS`."""
    codings: list[str] = []
    for element in _LIST_ELEMENT.finditer(value or ""):
        coding = element[0].strip().lower()
        if coding and coding != "identity":
            if len(codings) == MAX_CODINGS:
                raise CodingError(f"Content-Encoding names more than {MAX_CODINGS} codings")
            codings.append(coding)
    return codings


def decode_body(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """Undo `content_encoding` (gzip, x-gzip, deflate, br; a list is undone right to left).

    Returns at most `limit` bytes. Inflation stops at the limit (a compression bomb costs no
    more); an unknown coding stops decoding there; a broken stream gives what was decoded
    before the damage, or its input unchanged if nothing was; more than :data:`MAX_CODINGS`
    codings (a protocol error, see :func:`content_codings`) are not undone at all: the input is
    returned unchanged. Never raises.
    """
    data = body
    try:
        codings = content_codings(content_encoding)
    except CodingError:
        return data[:limit]
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip"):
            decoded = _inflate(data, _GZIP_OR_ZLIB, limit)
        elif coding == "deflate":
            # "deflate" is meant to be zlib-wrapped (RFC 9110 section 8.4.1.2), but some
            # servers send raw deflate; browsers and curl accept both.
            decoded = _inflate(data, _GZIP_OR_ZLIB, limit)
            if decoded is None:
                decoded = _inflate(data, _RAW_DEFLATE, limit)
        elif coding == "br":
            decoded = _unbrotli(data, limit)
        else:
            break
        if decoded is None:
            break
        data = decoded
    return data[:limit]


def _inflate(data: bytes, wbits: int, limit: int) -> bytes | None:
    """Inflate at most `limit` bytes; None if nothing could be decoded from non-empty input."""
    out = bytearray()
    inflater = zlib.decompressobj(wbits)
    pending = b""
    pos = 0
    try:
        while len(out) < limit:
            if inflater.eof:
                # gzip allows several members one after the other (RFC 1952 section 2.2).
                if wbits == _RAW_DEFLATE or not (inflater.unused_data or pos < len(data)):
                    break
                pending, inflater = inflater.unused_data, zlib.decompressobj(wbits)
            if not pending:
                if pos >= len(data):
                    break
                pending = data[pos : pos + _DECODE_STEP]
                pos += len(pending)
            # Output stops at max_length; input left over then only matters past the limit.
            out += inflater.decompress(pending, limit - len(out))
            pending = b""
    except zlib.error:
        if not out:
            return None
    return bytes(out) if out or not data or inflater.eof else None


def _unbrotli(data: bytes, limit: int) -> bytes | None:
    """Brotli-decode at most `limit` bytes; None if nothing could be decoded."""
    out = bytearray()
    decompressor = brotli.Decompressor()
    pos = 0
    try:
        while len(out) < limit and not decompressor.is_finished():
            piece = b""
            if decompressor.can_accept_more_data():
                if pos >= len(data):
                    break
                piece = data[pos : pos + _DECODE_STEP]
                pos += len(piece)
            chunk = decompressor.process(piece, output_buffer_limit=limit - len(out))
            if not piece and not chunk:
                break
            out += chunk
    except brotli.error:
        if not out:
            return None
    return bytes(out[:limit]) if out or not data or decompressor.is_finished() else None


class ByteRange(NamedTuple):
    """One satisfiable byte range of a representation: ``first`` to ``last``, inclusive."""

    first: int
    last: int


UNSATISFIABLE = ByteRange(-1, -1)
_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", re.ASCII)


def parse_range(value: str | None, size: int) -> ByteRange | None:
    """The byte range a ``Range`` header asks of a representation of ``size`` bytes (RFC 9110
    section 14): None to send it whole (no header, another unit, several ranges, a malformed
    one: all may be ignored), UNSATISFIABLE for a range that starts past its end (a 416)."""
    if value is None:
        return None
    found = _RANGE.fullmatch(value)
    if found is None or not (found[1] or found[2]):
        return None
    if not found[1]:  # "bytes=-N": the last N bytes
        suffix = int(found[2])
        if suffix == 0:
            return UNSATISFIABLE
        return ByteRange(max(size - suffix, 0), size - 1) if size else UNSATISFIABLE
    first = int(found[1])
    if found[2] and int(found[2]) < first:  # invalid: ignored
        return None
    if first >= size:
        return UNSATISFIABLE
    return ByteRange(first, min(int(found[2]) if found[2] else size - 1, size - 1))
