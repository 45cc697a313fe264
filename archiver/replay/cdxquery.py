"""The CDX API's query logic (pure): parameters -> query, captures -> selected lines.

The dialect is pywb's CDX server API (what pywb sends when it uses us as a remote index, and what
its own ``/cdx`` endpoint answers), with the Internet Archive's ``collapse`` and negative ``limit``:

- ``url`` (required); ``matchType`` exact (default), prefix, host or domain, or implied by a
  wildcard when matchType is absent: ``example.org/dir/*`` is a prefix, ``*.example.org`` a domain.
  Listings are the catalog's (Catalog.list): unlike pywb, a domain match covers every port, and a
  prefix ending in "/" keeps the folder page itself.
- ``from``/``to``: inclusive bounds of 1 to 14 digits, a partial stamp standing for every stamp it
  begins ("2026" is all of 2026), or an ISO date (see archiver.web.timestamps.parse_date).
- ``closest``: 1 to 14 digits read as pywb (warcio) reads them, as the last second of the span
  they name ("2021" is 2021-12-31 23:59:59), or an ISO date (likewise); it orders by distance,
  ties to the earlier capture. An empty ``closest`` is no
  closest (pywb sends ``closest=`` when the request had no date). ``sort`` is ``closest`` (implied
  by a non-empty closest) or ``reverse``.
- ``limit``: at most that many lines (default and ceiling 100,000, pywb's default); ``-N`` is the
  last N, as on the IA server.
- ``filter`` (repeatable): ``[!][=|~][field:]value`` as pywb: ``!`` negates, ``=`` is equality,
  ``~`` a regular expression matched at the start of the value (as ``re.match``), neither a
  substring test; without ``field:`` the test is on the whole CDXJ line. A missing field is "".
  Expressions run on RE2 (google-re2), whose time is linear in the text: a visitor's pattern
  cannot make the server backtrack for hours as Python's ``re`` would. What RE2 cannot express
  (backreferences, lookaround, ``\\Z``, more than 1000 repeats) and patterns longer than
  MAX_PATTERN characters are refused with 400.
- ``filter`` and ``collapse`` may each be given at most MAX_REPEATS times, and ``fl`` name at most
  MAX_REPEATS fields: each one costs work for every line, so a long list would cost the server
  that much more per line than any real query does.
- ``collapse`` (repeatable): ``field`` or ``field:N``: of adjacent lines (in index order) equal in
  that field, or its first N characters, keep the first. ``collapseTime=N`` is pywb's form of
  ``collapse`` on timestamp:N together with status.
- ``fl`` (or ``fields``): comma list of fields; ``output`` cdxj (default: ``urlkey timestamp
  {json}``), json (one JSON object a line) or text (space-separated, "-" for missing).

Fields are pywb's: urlkey, timestamp, url, mime, status, digest, length, offset, filename and
redirect; the IA names original, mimetype and statuscode are accepted as aliases. A capture's
plugin labels (archiver.plugins) are one more field each, ``label.<name>``: ``filter=label.lang:fr``
(a label containing "fr"), ``filter==label.lang:fr`` (equal), ``filter=~label.lang:(fr|de)$`` and
``fl=url,label.lang``; a capture without that label has it as "". Values are the
strings of our CDXJ export (Capture.to_cdxj), so a JSON line equals what pywb would give for it.

Where the Internet Archive's wayback CDX server differs (see docs/cdx.md): its default output is
space-separated with its own field names and order (urlkey timestamp original mimetype statuscode
digest length); its ``output=json`` is one JSON array of arrays with a header row; its filter value
is always a Java regex that must match the whole field; it pages with ``showResumeKey``/
``resumeKey``, ``page``/``showNumPages`` and ``offset``. Those paging and counting parameters are
refused here with 400, since ignoring them would return something other than what was asked.
"""

from __future__ import annotations

import calendar
import heapq
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass
from itertools import islice
from typing import Any

import re2

from archiver.plugins import LABEL_NAME
from archiver.store.catalogkeys import RENDERED
from archiver.store.models import LABEL_FIELD, Capture
from archiver.web.timestamps import parse_date, to_datetime

FIELDS = (
    "urlkey",
    "timestamp",
    "url",
    "mime",
    "status",
    "digest",
    "length",
    "offset",
    "filename",
    "redirect",
    "fuzzy",
    "rendered",  # a rendered page's label of that name, absent for a page fetched over HTTP alone
)
# The Internet Archive's names for three of them (its CDX server's JSON header row).
ALIASES = {"original": "url", "mimetype": "mime", "statuscode": "status"}
MATCH_TYPES = ("exact", "prefix", "host", "domain")
OUTPUTS = {"cdxj": "text/x-cdxj", "json": "text/x-ndjson", "text": "text/plain"}
# pywb's CDXQuery answers at most 100,000 lines unless told otherwise; we keep that as a ceiling
# too (the IA server has one of 150,000), since closest and reverse hold their lines in memory.
MAX_LIMIT = 100_000
# Parameters of the IA server (and pywb's ZipNum paging) that would change what a client gets:
# refused rather than ignored. Any other unknown parameter is ignored, as both servers do.
UNSUPPORTED = (
    "showResumeKey", "resumeKey", "page", "pageSize", "showNumPages", "showPagedIndex", "offset",
    "fastLatest", "showDupeCount", "showSkipCount", "lastSkipTimestamp", "resolveRevisits",
)  # fmt: skip
_SINGLE = (
    "url",
    "matchType",
    "from",
    "to",
    "closest",
    "sort",
    "limit",
    "fl",
    "fields",
    "output",
    "collapseTime",
)
MAX_REPEATS = 100
_DIGITS = re.compile(r"\d{1,14}", re.ASCII)
_POSITIVE = re.compile(r"[1-9][0-9]{0,17}", re.ASCII)
# warcio's PAD_14_UP: pywb reads a short closest as the last second of the span it names.
_PAD_UP = "29991231235959"
_FALSE = ("", "0", "false", "f", "off", "no")
# Filter patterns are short in practice (pywb's own examples are under 40 characters); RE2's
# matching time grows with the pattern's size times the text's, so the size is bounded too.
MAX_PATTERN = 256
_RE2 = re2.Options()
_RE2.log_errors = False  # RE2 would print each refused pattern on stderr; the 400 says it


class CdxError(ValueError):
    """A CDX query parameter is missing or malformed (HTTP 400); the message says which and why."""


@dataclass(frozen=True, slots=True)
class Filter:
    """One ``filter=``: ``field`` None tests the whole CDXJ line."""

    field: str | None
    mode: str  # "contains", "exact" or "regex"
    value: str
    invert: bool = False
    regex: Any = None  # a compiled RE2 pattern

    def __call__(self, record: dict[str, str], line: str) -> bool:
        text = line if self.field is None else record.get(self.field, "")
        if self.regex is not None:
            found = self.regex.match(text) is not None
        elif self.mode == "exact":
            found = text == self.value
        else:
            found = self.value in text
        return found != self.invert


@dataclass(frozen=True, slots=True)
class CdxQuery:
    """A parsed query. ``from_``/``to`` are inclusive 14-character bounds compared as text;
    ``closest`` a valid 14-digit stamp; ``limit`` negative means the last ``-limit`` lines."""

    url: str
    match: str = "exact"
    from_: str | None = None
    to: str | None = None
    closest: str | None = None
    reverse: bool = False
    limit: int = MAX_LIMIT
    filters: tuple[Filter, ...] = ()
    collapse: tuple[tuple[str, int | None], ...] = ()
    collapse_time: int | None = None
    fields: tuple[str, ...] | None = None
    output: str = "cdxj"

    @property
    def content_type(self) -> str:
        return OUTPUTS[self.output]


def parse_query(params: Iterable[tuple[str, str]]) -> CdxQuery:
    """The query that the (name, value) pairs of a request ask for; CdxError says what is wrong."""
    single: dict[str, str] = {}
    filters: list[Filter] = []
    collapse: list[tuple[str, int | None]] = []
    for name, value in params:
        if name in _SINGLE:
            if name in single and single[name] != value:
                raise CdxError(f"{name} given twice ({single[name]!r} and {value!r}): give it once")
            single[name] = value
        elif name == "filter":
            _count(name, filters)
            filters.append(_filter(value))
        elif name == "collapse":
            _count(name, collapse)
            collapse.append(_collapse(value))
        elif name in UNSUPPORTED and value.lower() not in _FALSE:
            raise CdxError(
                f"{name} is not supported here (no resume keys, pages or offsets); see docs/cdx.md"
            )
    if "fl" in single and "fields" in single:
        raise CdxError("give fl or fields, not both")
    url, match = _url_and_match(single.get("url", ""), single.get("matchType"))
    closest = single.get("closest", "")
    sort = single.get("sort", "closest" if closest else "")
    if sort not in ("", "closest", "reverse"):
        raise CdxError(f"unknown sort {sort!r}: use closest or reverse")
    limit = _limit(single.get("limit"))
    if limit < 0 and sort:
        raise CdxError("a negative limit (the last N lines) cannot be combined with sort")
    output = single.get("output", "cdxj")
    if output not in OUTPUTS:
        raise CdxError(f"unknown output {output!r}: use {', '.join(OUTPUTS)} (timemaps are at /timemap/)")
    fl = single.get("fl", single.get("fields"))
    return CdxQuery(
        url=url,
        match=match,
        from_=_bound("from", single.get("from"), upper=False),
        to=_bound("to", single.get("to"), upper=True),
        closest=_closest(closest) if sort == "closest" and closest else None,
        reverse=sort == "reverse",
        limit=limit,
        filters=tuple(filters),
        collapse=tuple(collapse),
        collapse_time=_positive("collapseTime", single["collapseTime"]) if "collapseTime" in single else None,
        fields=None if fl is None else _fields(fl),
        output=output,
    )


def record(capture: Capture) -> dict[str, str]:
    """A capture's fields as pywb reads them from our CDXJ line: strings, missing when unknown;
    ``rendered`` (the reason) for a page the crawler rendered."""
    fields = capture.cdxj_fields()
    if capture.labels and (reason := capture.label_map.get(RENDERED)):
        fields[RENDERED] = reason
    return {"urlkey": capture.urlkey, "timestamp": capture.timestamp, **fields}


def _row(capture: Capture) -> tuple[dict[str, str], str]:
    """(record, CDXJ line) of a capture: the line is ``Capture.to_cdxj``'s plus ``rendered``."""
    values = record(capture)
    fields = {k: v for k, v in values.items() if k not in ("urlkey", "timestamp")}
    return values, f"{capture.urlkey} {capture.timestamp} {json.dumps(fields)}"


def _split(line: str) -> tuple[str, str, str]:
    """(urlkey, timestamp, JSON text) of a CDXJ line ``select`` made. A urlkey may hold a space
    (a page's rendering: ``org,example)/ urn:screenshot``), the timestamp and JSON none before
    the JSON's ``{``, which no urlkey holds after a space."""
    head, _, fields = line.partition(" {")
    urlkey, _, timestamp = head.rpartition(" ")
    return urlkey, timestamp, "{" + fields


def select(query: CdxQuery, captures: Iterable[Capture]) -> Iterator[tuple[dict[str, str], str]]:
    """(record, CDXJ line) of the captures the query keeps, in the order it asks for.

    ``captures`` are the listing of ``query.url`` as ``query.match`` says, in (urlkey, timestamp)
    order. Lazy except for closest, reverse and the last N, which hold at most ``limit`` CDXJ
    lines (the record is read back from its line once kept: a line is a fifth of the two).
    """
    rows: Iterator[tuple[dict[str, str], str]] = (
        _row(c) for c in captures if _within(query, c.timestamp)
    )
    if query.filters:
        tests = query.filters
        rows = (row for row in rows if all(test(*row) for test in tests))
    keys = [_collapse_key(field, n) for field, n in query.collapse]
    if query.collapse_time is not None:
        keys.append(_time_status_key(query.collapse_time))
    for key in keys:  # one after another, each seeing what the ones before kept (as the IA server)
        rows = _collapsed(rows, key)
    if query.closest is not None:
        kept = _closest_first(rows, query.closest, query.limit, in_time_order=query.match == "exact")
        return map(_unpacked, kept)
    if query.reverse:
        return map(_unpacked, reversed(deque((line for _, line in rows), maxlen=query.limit)))
    if query.limit < 0:
        return map(_unpacked, deque((line for _, line in rows), maxlen=-query.limit))
    return islice(rows, query.limit)


def marked(row: tuple[dict[str, str], str], rule: str) -> tuple[dict[str, str], str]:
    """``row`` of a capture a fuzzy rule found, with the field ``fuzzy`` naming the rule."""
    values, line = row
    urlkey, timestamp, fields = _split(line)
    fuzzy = {**json.loads(fields), "fuzzy": rule}
    return {**values, "fuzzy": rule}, f"{urlkey} {timestamp} {json.dumps(fuzzy)}"


def _unpacked(line: str) -> tuple[dict[str, str], str]:
    """(record, line) of a CDXJ line that ``select`` made: the record read back from it."""
    urlkey, timestamp, fields = _split(line)
    return {"urlkey": urlkey, "timestamp": timestamp, **json.loads(fields)}, line


def render(query: CdxQuery, row: tuple[dict[str, str], str]) -> str:
    """One output line, newline included."""
    values, line = row
    fields = query.fields
    if query.output == "cdxj":
        if fields is None:
            return line + "\n"
        rest = {f: values[f] for f in fields if f in values and f not in ("urlkey", "timestamp")}
        return f"{values['urlkey']} {values['timestamp']} {json.dumps(rest)}\n"
    if query.output == "json":
        chosen = values if fields is None else {f: values[f] for f in fields if f in values}
        return json.dumps(chosen) + "\n"
    return " ".join(values.get(f, "-") for f in (fields or values)) + "\n"


# -- parameters


def _url_and_match(url: str, match: str | None) -> tuple[str, str]:
    if not url:
        raise CdxError("the url parameter is required, e.g. /cdx?url=example.org/")
    if match is not None and match not in MATCH_TYPES:
        raise CdxError(f"unknown matchType {match!r}: use {', '.join(MATCH_TYPES)}")
    # pywb and the IA server read a leading "*." or a trailing "*" as the match type.
    if url.startswith("*.") and match in (None, "domain"):
        return url[2:], "domain"
    if url.endswith("*") and match in (None, "prefix"):
        return url[:-1], "prefix"
    return url, match or "exact"


def _limit(text: str | None) -> int:
    if text is None:
        return MAX_LIMIT
    try:
        limit = int(text)
    except ValueError:
        raise CdxError(f"limit must be an integer, not {text!r}") from None
    if limit == 0:
        raise CdxError("limit must not be 0 (N: the first N lines, -N: the last N)")
    return max(-MAX_LIMIT, min(limit, MAX_LIMIT))


def _bound(name: str, text: str | None, *, upper: bool) -> str | None:
    if not text:
        return None
    if _DIGITS.fullmatch(text):
        # Compared as text with 14-digit stamps: padding with 0s or 9s takes in every stamp
        # the given digits begin, whatever their count (as pywb and the IA server read them).
        return text.ljust(14, "9" if upper else "0")
    try:
        return parse_date(text, upper=upper)
    except ValueError as exc:
        raise CdxError(f"{name}: {exc}") from None


def _closest(text: str) -> str:
    if not _DIGITS.fullmatch(text):
        try:
            return parse_date(text, upper=True)
        except ValueError as exc:
            raise CdxError(f"closest: {exc}") from None
    # As warcio's timestamp_to_datetime, which pywb orders by: the missing digits from
    # 29991231235959, then each field brought into its range ("20211131" is 2021-11-30).
    s = text + _PAD_UP[len(text) :]
    year, month = max(int(s[:4]), 1), min(max(int(s[4:6]), 1), 12)
    day = min(max(int(s[6:8]), 1), calendar.monthrange(year, month)[1])
    clock = min(int(s[8:10]), 23), min(int(s[10:12]), 59), min(int(s[12:14]), 59)
    return f"{year:04d}{month:02d}{day:02d}" + "".join(f"{n:02d}" for n in clock)


def _positive(name: str, text: str) -> int:
    if not _POSITIVE.fullmatch(text):
        raise CdxError(f"{name} must be a positive integer, not {text[:100]!r}")
    return int(text)


def _count(name: str, given: Sized) -> None:
    if len(given) >= MAX_REPEATS:
        raise CdxError(f"{name} given more than {MAX_REPEATS} times")


def _fields(text: str) -> tuple[str, ...]:
    names = text.split(",", MAX_REPEATS)
    if len(names) > MAX_REPEATS:
        raise CdxError(f"fl: at most {MAX_REPEATS} fields")
    return tuple(_field(name, "fl") for name in names)


def _field(name: str, where: str) -> str:
    field = ALIASES.get(name, name)
    if field not in FIELDS and not (field.startswith(LABEL_FIELD)
                                    and LABEL_NAME.fullmatch(field.removeprefix(LABEL_FIELD))):
        raise CdxError(f"{where}: unknown field {name!r}; fields are {', '.join(FIELDS)} and "
                       f"{LABEL_FIELD}<name> (a plugin label)")
    return field


def _filter(text: str) -> Filter:
    spec = text
    invert = spec.startswith("!")
    if invert:
        spec = spec[1:]
    mode = {"=": "exact", "~": "regex"}.get(spec[:1], "contains")
    if mode != "contains":
        spec = spec[1:]
    name, sep, value = spec.partition(":")
    field = _field(name, f"filter={text!r}") if sep else None
    if not sep:
        value = spec
    if not value and mode != "exact":
        raise CdxError(f"filter={text!r} has nothing to look for")
    regex = None
    if mode == "regex":
        if len(value) > MAX_PATTERN:
            raise CdxError(f"filter={text[:80]!r}...: the expression is longer than {MAX_PATTERN} characters")
        try:
            regex = re2.compile(value, _RE2)
        except re2.error as exc:
            reason = exc.args[0].decode("utf-8", "replace") if exc.args else "refused"
            raise CdxError(
                f"filter={text!r}: bad regular expression for RE2 ({reason}); RE2 has no "
                "backreferences or lookaround, and repeats at most 1000 times"
            ) from None
    return Filter(field, mode, value, invert, regex)


def _collapse(text: str) -> tuple[str, int | None]:
    name, sep, count = text.partition(":")
    return _field(name, f"collapse={text!r}"), _positive(f"collapse={text!r}: N", count) if sep else None


# -- processing


def _within(query: CdxQuery, timestamp: str) -> bool:
    return (query.from_ is None or timestamp >= query.from_) and (query.to is None or timestamp <= query.to)


Key = Callable[[dict[str, str]], object]


def _collapse_key(field: str, n: int | None) -> Key:
    return lambda values: values.get(field, "")[:n]


def _time_status_key(n: int) -> Key:
    return lambda values: (values["timestamp"][:n], values.get("status", ""))


def _collapsed(rows: Iterable[tuple[dict[str, str], str]], key: Key) -> Iterator[tuple[dict[str, str], str]]:
    """Drop each line equal in ``key`` to the line before it (IA: "adjacent cdx lines")."""
    last: object = None
    for row in rows:
        now = key(row[0])
        if now != last:
            yield row
        last = now


def _closest_first(
    rows: Iterable[tuple[dict[str, str], str]], closest: str, limit: int, *, in_time_order: bool
) -> Iterator[str]:
    """The lines of the ``limit`` rows nearest ``closest``, nearest first, ties in input order
    (earlier first).

    ``in_time_order``: the rows are one URL's, by time, so once a row after ``closest`` is
    farther than the farthest kept, every later one is too and reading stops (as pywb does).
    """
    target = to_datetime(closest).timestamp()
    kept: list[tuple[float, int, str]] = []  # a max-heap on (distance, order)
    for order, (values, line) in enumerate(rows):
        stamp = values["timestamp"]
        distance = abs(to_datetime(stamp).timestamp() - target)
        if len(kept) < limit:
            heapq.heappush(kept, (-distance, -order, line))
        elif distance < -kept[0][0]:
            heapq.heapreplace(kept, (-distance, -order, line))
        elif in_time_order and stamp > closest:
            break
    return iter([line for _, _, line in sorted(kept, key=lambda item: (-item[0], -item[1]))])
