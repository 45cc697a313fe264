"""One spool file read as columns: bytes in, normalised URLs, their sites and the site pairs out.

A spool line is ``URL <TAB> linking origin <TAB> 14-digit time <TAB> hops <TAB> priority``, or
the first three alone in a file from before hops (archiver.queues.spool: read as hops 0, priority
0). The batch reads a whole file (``spool.max_lines`` lines) at once: pyarrow's CSV reader splits
it into five columns (tab-separated, no quoting; a line with any other number of fields is counted
by its ``invalid_row_handler``; in a file with lines of three fields, those are given the two they
lack, ``_padded``, and the file is read again), and the checks run over whole columns with RE2 regexes
(pyarrow.compute), so Python touches a URL only to normalise the few not in normal form already.
The result is exactly what the per-line rules of ``line_verdict`` give, line by line (a property
test holds the two together):

- the text is UTF-8 with invalid bytes replaced (``errors="replace"``), and ``\\r\\n`` and a lone
  ``\\r`` end lines as ``\\n`` does (Python's universal newlines);
- a line is bad if it has neither three nor five fields, its linking site is not an origin, its
  time is not 14 digits, its hops or priority is not as the spool writes them, its URL does not
  normalise to an http(s) URL (``web.urls.normalize``; those already in normal form,
  ``web.urls.is_normal``, are taken as they are), or its site can have no crawl queue (``unfit``,
  asked once per distinct site);
- the first ``REPORTED`` bad lines get their line number and reason, the others are counted.

Keys: a URL's key is the URL; a (linking site, target site) pair's key is
``"\\0" + source + "\\0" + target`` (no URL starts with a NUL), one per distinct pair whose sites
differ, in the order the pairs first appear (given as the two sites' indexes: the steps hash the
keys without making them, ``bloomkernel.hash_pairs``).

Per site of the URLs: its hop count, the lowest of its lines' (the linking site's hops, plus one
when the linking site is another), and its priority, the highest of its lines'.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from archiver.queues.spool import HOPS, PRIORITY, parse_line
from archiver.web import urls

if TYPE_CHECKING:
    from numpy.typing import NDArray

# Bad lines reported one by one per spool file; the rest are only counted.
REPORTED = 20
Unfit = Callable[[str], "str | None"]  # why a site can have no crawl queue, or None

# web.urls.is_normal's regex in RE2, which has no lookaround: its "no '/.' or '/..' segment
# before a '/', a '?' or the end" becomes the shape of each path segment (and of each part of
# the query after a '/'), and its "host of at most 253 characters" is checked apart, in Python,
# for the few URLs long enough to break it (``_LONG``).
_C = "A-Za-z0-9_~!$&'()*+,;=:@-"  # a path character other than '.' and '/'
_SEGMENT = rf"(?:[{_C}][.{_C}]*|\.[{_C}][.{_C}]*|\.\.[.{_C}]+)?"
_QUERY_PART = rf"(?:[?{_C}][?.{_C}]*|\.[{_C}][?.{_C}]*|\.\.[.{_C}][?.{_C}]*)?"
NORMAL_URL = (r"^https?://(?:[a-z0-9_-]{1,63}\.)*[a-z][a-z0-9_-]{0,62}"
              rf"(?:/{_SEGMENT})+(?:\?[?.{_C}]*(?:/{_QUERY_PART})*)?$")
_LONG = len("https://") + 253  # a URL this long or shorter has a host of at most 253 characters
# parse_line's "linking site is an origin": http:// or https://, then no '/' from the 9th
# character on.
ORIGIN = r"^(?:http://.?|https://)[^/]*$"
_FIELDS = ["url", "source", "time", "hops", "priority"]
_OLD_FIELDS = 3  # a line from before hops and priorities
_PADDING = b"\t0\t0"  # what such a line reads as: hops 0, priority 0
_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20  # bytes of text looked at in one step (_newlines)


@dataclass(frozen=True)
class SpoolColumns:
    """What one spool file holds, as the batch uses it."""

    lines: int
    bad: int
    reports: list[tuple[int, str]]  # (line number, reason) of the first REPORTED bad lines
    urls: pa.Array  # the good lines' normalised URLs (strings), in line order: their keys
    targets: NDArray[np.intp]  # each URL's site, as an index into origins
    origins: pa.Array  # the distinct sites of the URLs (strings)
    linking_sites: pa.Array  # the distinct linking sites of the lines (strings)
    # Distinct site pairs (source differs from target), by first line: each one's linking site,
    # as an index into linking_sites, and its target site, as an index into origins.
    pair_sources: NDArray[np.intp]
    pair_targets: NDArray[np.intp]
    site_rows: NDArray[np.intp]  # the sites the good lines link to, as indexes into origins
    # (which may hold more)
    site_hops: NDArray[np.int64]  # each one's lowest hop count
    site_priority: NDArray[np.float64]  # each one's highest priority


def line_verdict(line: str, unfit: Unfit | None) -> tuple[str, str, int, float] | str:
    """(normalised URL, linking site, its hops, priority) of one spool line, or why it is bad:
    the rules one line at a time, which ``read_columns`` applies to whole columns."""
    parsed = parse_line(line)
    if isinstance(parsed, str):
        return parsed
    written, source, hops, priority = parsed
    url = written if urls.is_normal(written) else urls.normalize(written)
    if url is None:
        return f"not an http(s) URL: {written[:100]!r}"
    why = unfit(urls.origin(url)) if unfit else None
    if why is not None:
        return f"{why}: {url[:100]!r}"
    return url, source, hops, priority


def text_bytes(data: bytes) -> bytes:
    """The file as the per-line rules read it, in UTF-8: invalid bytes replaced, every line ended
    by ``\\n`` alone."""
    if not _valid_utf8(data):
        data = data.decode("utf-8", errors="replace").encode("utf-8")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


def _valid_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8, checked by arrow's validation (no decoded copy is made)."""
    whole = pa.Array.from_buffers(pa.large_binary(), 1, [
        None, pa.py_buffer(np.array([0, len(data)], dtype=np.int64)), pa.py_buffer(data)])
    try:
        whole.cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def read_columns(data: bytes, unfit: Unfit | None, *, fit: str = "") -> SpoolColumns:
    """Read a spool file's bytes; ``unfit`` (None: every site may have a crawl queue) is asked
    once about each distinct site of the URLs that the regex ``fit`` (RE2; "": none) does not
    match: ``fit`` names sites ``unfit`` always passes."""
    data = text_bytes(data)
    lines = _newlines(data)
    lines += not data.endswith(b"\n") if data else 0
    table, skipped, old = _table(data)
    if old:
        table, skipped, _ = _table(_padded(data, old))
    # Each line is one row, kept or skipped: the kept rows' line numbers are the others.
    line_of = np.delete(np.arange(1, lines + 1), np.asarray(skipped, dtype=np.intp) - 1)
    if len(line_of) != table.num_rows:
        raise ValueError(f"pyarrow read {table.num_rows} rows and skipped {len(skipped)} of "
                         f"{lines} lines")
    url, source, when, hops_text, priority_text = (table[name].combine_chunks() for name in _FIELDS)
    # Linking site and time, as parse_line checks them (sources repeat: checked per distinct one).
    sources = source.dictionary_encode()
    origin_ok = pc.match_substring_regex(sources.dictionary, ORIGIN).take(sources.indices)
    hops, priority, numbers_ok = _numbers(hops_text, priority_text)
    ok = _numpy(origin_ok) & _time_ok(when) & numbers_ok
    # The URLs: most are in normal form already; the rest go through normalize one by one.
    rewrite = np.flatnonzero(ok & ~normal_form(url))
    if len(rewrite):
        rewritten = [urls.normalize(u) for u in url.take(rewrite).to_pylist()]
        ok[rewrite[[u is None for u in rewritten]]] = False
        mask = np.zeros(len(url), dtype=bool)
        mask[rewrite] = True
        url = pc.replace_with_mask(url, pa.array(mask), pa.array(rewritten, pa.string()))
    # The URLs' sites, and the sites that can have no crawl queue.
    kept = np.flatnonzero(ok)
    url = url.take(kept)
    targets = _origins(url).dictionary_encode()
    origins = targets.dictionary.cast(pa.string())
    codes = _numpy(targets.indices).astype(np.intp)
    if unfit is not None:
        fits = _fit_sites(origins, unfit, fit)
        if not fits.all():
            ok[kept[~fits[codes]]] = False
            url = url.filter(pa.array(fits[codes]))
            codes = codes[fits[codes]]
            kept = np.flatnonzero(ok)
    source_codes = _numpy(sources.indices)[kept].astype(np.int64)
    # A linking site that is also a target site has that site's index; others -1.
    as_target = _numpy(pc.index_in(sources.dictionary, value_set=origins).fill_null(-1))
    other = as_target[source_codes] != codes
    pair_sources, pair_targets = _pairs(source_codes, other, codes, len(origins))
    site_hops = np.full(len(origins), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(site_hops, codes, hops[kept] + other)
    site_priority = np.full(len(origins), -np.inf)
    np.maximum.at(site_priority, codes, priority[kept])
    linked = np.flatnonzero(np.bincount(codes, minlength=len(origins)))  # (not the unfit sites)
    bad = np.flatnonzero(~ok)
    wrong = np.union1d(np.asarray(skipped, dtype=np.intp), line_of[bad])
    return SpoolColumns(
        lines=lines, bad=len(wrong),
        reports=_reports(data, wrong[:REPORTED].tolist(), unfit),
        urls=url, targets=codes, origins=origins,
        linking_sites=sources.dictionary, pair_sources=pair_sources, pair_targets=pair_targets,
        site_rows=linked, site_hops=site_hops[linked], site_priority=site_priority[linked])


def _newlines(data: bytes) -> int:
    """How many ``\\n`` the text holds, counted a megabyte at a time: the flags of a whole file at
    once took fresh memory for every file read (10 MB of page faults; bytes.count holds the GIL)."""
    text = np.frombuffer(data, dtype=np.uint8)
    return sum(int(np.count_nonzero(text[at:at + _CHUNK] == ord("\n")))
               for at in range(0, len(text), _CHUNK))


def normal_form(url: pa.Array) -> NDArray[np.bool_]:
    """``web.urls.is_normal`` of each URL of a string column."""
    normal = _numpy(pc.match_substring_regex(url, NORMAL_URL))
    long_ = np.flatnonzero(normal & (_numpy(pc.binary_length(url)) > _LONG))
    normal[long_] = [urls.is_normal(u) for u in url.take(long_).to_pylist()]
    return normal


def _padded(data: bytes, old: list[int]) -> bytes:
    """The text with the lines numbered ``old`` (of three fields, from before hops) given the two
    fields they lack, as hops 0 and priority 0; line numbers stay."""
    text = np.frombuffer(data, dtype=np.uint8)
    ends = np.append(np.flatnonzero(text == ord("\n")), len(data))  # the last may have no newline
    at = ends[np.asarray(old, dtype=np.intp) - 1]
    padding = np.frombuffer(_PADDING, dtype=np.uint8)
    return np.insert(text, np.repeat(at, len(padding)), np.tile(padding, len(at))).tobytes()


def _numbers(hops: pa.Array, priority: pa.Array
             ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.bool_]]:
    """Each line's hops and priority (0 where bad), and whether both are as parse_line takes them
    (checked and converted once per distinct text: a file has few)."""
    hops_codes, priority_codes = hops.dictionary_encode(), priority.dictionary_encode()
    hops_text, priority_text = hops_codes.dictionary, priority_codes.dictionary
    hops_ok = pc.match_substring_regex(hops_text, HOPS)
    priority_ok = pc.match_substring_regex(priority_text, PRIORITY)
    zero = pa.scalar("0")
    hop_counts = np.array(pc.cast(pc.if_else(hops_ok, hops_text, zero), pa.int64()), dtype=np.int64)
    values = np.array(pc.cast(pc.if_else(priority_ok, priority_text, zero), pa.float64()),
                      dtype=np.float64)
    good_priority = _numpy(priority_ok) & np.isfinite(values)
    h, p = _numpy(hops_codes.indices), _numpy(priority_codes.indices)
    ok = _numpy(hops_ok)[h] & good_priority[p]
    return hop_counts[h], np.where(ok, values[p], 0.0), ok


def _table(data: bytes) -> tuple[pa.Table, list[int], list[int]]:
    """The lines with five fields as a table of five string columns, the numbers of the other
    lines, and of those the numbers of the lines with three fields."""
    skipped: list[int] = []
    old: list[int] = []
    if not data:
        return pa.table({name: pa.array([], pa.string()) for name in _FIELDS}), skipped, old
    # pyarrow drops a byte-order mark at the very start, which the per-line rules keep as part of
    # the first URL: an empty line before it keeps it in place (and is dropped again below).
    shift = data.startswith(_BOM)
    if shift:
        data = b"\n" + data

    def skip(row: pacsv.InvalidRow) -> str:
        if row.number is None:  # known when one thread reads the whole file as one block
            raise ValueError("pyarrow did not say which line has the wrong number of fields")
        skipped.append(row.number - shift)
        if row.actual_columns == _OLD_FIELDS:
            old.append(row.number - shift)
        return "skip"

    table = pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=_FIELDS, use_threads=False,
                                       block_size=len(data) + 1),
        parse_options=pacsv.ParseOptions(
            delimiter="\t", quote_char=False, escape_char=False, double_quote=False,
            newlines_in_values=False, ignore_empty_lines=False, invalid_row_handler=skip),
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(_FIELDS, pa.string()), strings_can_be_null=False,
            quoted_strings_can_be_null=False, check_utf8=False))
    return (table.slice(1) if shift else table), skipped, old


def _numpy(column: pa.Array) -> NDArray[np.bool_]:
    """A boolean (or integer) column as a writable numpy array."""
    return np.array(column.to_numpy(zero_copy_only=False))


def _time_ok(when: pa.Array) -> NDArray[np.bool_]:
    """parse_line's "14 digits": 14 ASCII digits, or 14 characters str.isdigit takes."""
    ok = _numpy(pc.and_(pc.equal(pc.binary_length(when), 14), pc.ascii_is_decimal(when)))
    others = np.flatnonzero(~ok & (_numpy(pc.utf8_length(when)) == 14))
    ok[others] = [w.isdigit() for w in when.take(others).to_pylist()]
    return ok


def _origins(normal: pa.Array) -> pa.Array:
    """Each normalised URL's origin: its text up to the first '/' from the 9th character on
    (ASCII, so bytes are characters), as a string view into the column's own buffer."""
    from archiver.queues.bloomkernel import origin_lengths  # numba: only where the batch runs

    if not len(normal):
        return pa.array([], pa.string_view())
    text, offsets = string_buffers(normal)
    starts = offsets[:-1]
    lengths = origin_lengths(text, offsets)
    # Arrow's string view: a length, then up to 12 bytes inline, or else the first 4 bytes and
    # where the rest is (buffer 0, at an offset); all little-endian 32-bit numbers.
    view = np.zeros((len(normal), 4), dtype=np.int32)
    view[:, 0] = lengths
    view[:, 1] = text[starts[:, None] + np.arange(4)].view("<i4")[:, 0]  # "http": 4 bytes at least
    view[:, 3] = starts
    short = np.flatnonzero(lengths <= 12)
    if len(short):
        at = np.minimum(starts[short, None] + np.arange(12), len(text) - 1)
        inline = np.where(np.arange(12) < lengths[short, None], text[at], 0).astype(np.uint8)
        view[short, 1:] = inline.view("<i4")
    return pa.Array.from_buffers(pa.string_view(), len(normal),
                                 [None, pa.py_buffer(view), normal.buffers()[2]])


def string_buffers(column: pa.Array) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """A column of strings (or binaries, large or not) as the compiled loops take it: its data's
    bytes and the 64-bit offsets of its values in them, no copy of the data."""
    wide = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64 if wide else np.int32,
                            count=len(column) + 1, offset=column.offset * (8 if wide else 4))
    data = column.buffers()[2]
    return (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8),
            offsets.astype(np.int64, copy=False))


def _pairs(source_codes: NDArray[np.int64], other: NDArray[np.bool_], targets: NDArray[np.intp],
           origins: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The distinct (linking site, target site) pairs of the kept lines (their linking sites'
    ``source_codes``, their ``targets`` among ``origins`` sites) whose two sites differ
    (``other``), in order of first appearance: their linking sites and their targets."""
    from archiver.queues.bloomkernel import first_appearances  # numba: only where the batch runs

    n = max(origins, 1)
    codes = source_codes[other] * n + targets[other]
    pair = codes[first_appearances(codes)]
    return (pair // n).astype(np.intp), (pair % n).astype(np.intp)


def _fit_sites(origins: pa.Array, unfit: Unfit, fit: str) -> NDArray[np.bool_]:
    """Whether each site may have a crawl queue: those ``fit`` matches may, the others are asked."""
    fits = _numpy(pc.match_substring_regex(origins, fit)) if fit else np.zeros(len(origins), bool)
    asked = np.flatnonzero(~fits)
    fits[asked] = [unfit(origin) is None for origin in origins.take(asked).to_pylist()]
    return fits


def _reports(data: bytes, numbers: list[int], unfit: Unfit | None) -> list[tuple[int, str]]:
    """(line number, reason) of the given bad lines, the reason from the per-line rules."""
    if not numbers:
        return []
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    starts = np.concatenate(([0], ends + 1))
    out = []
    for number in numbers:
        start = int(starts[number - 1])
        end = int(ends[number - 1]) if number <= len(ends) else len(data)
        verdict = line_verdict(data[start:end].decode("utf-8"), unfit)
        assert isinstance(verdict, str), f"line {number} was found bad, yet reads as good"
        out.append((number, verdict))
    return out
