"""Memento (RFC 7089) helpers, pure: HTTP dates, Link headers, TimeMaps in link-format and JSON.

Mementos are given as ``(uri, timestamp)`` pairs, ``uri`` absolute (URI-M) and ``timestamp``
14 digits, in time order. A TimeMap may be one page of many (RFC 7089 allows TimeMaps to be split,
and mementoweb.org's JSON TimeMaps name their ``prev`` and ``next`` pages).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from archiver.web.timestamps import from_datetime, to_datetime, to_iso

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH = "|".join(_MONTHS)
_CLOCK = r"(\d\d):(\d\d):(\d\d)"
# RFC 9110 section 5.6.7 (was RFC 7231 7.1.1.1): recipients must accept all three forms.
_IMF_FIXDATE = re.compile(rf"({'|'.join(_DAYS)}), (\d\d) ({_MONTH}) (\d{{4}}) {_CLOCK} GMT")
_RFC850 = re.compile(rf"({'|'.join(_LONG_DAYS)}), (\d\d)-({_MONTH})-(\d\d) {_CLOCK} GMT")
_ASCTIME = re.compile(rf"({'|'.join(_DAYS)}) ({_MONTH}) ([ \d]\d) {_CLOCK} (\d{{4}})")
_EXAMPLE = "Sun, 06 Nov 1994 08:49:37 GMT"
LINK_FORMAT = "application/link-format"


def parse_http_date(text: str, now: datetime | None = None) -> str:
    """An HTTP-date (as in Accept-Datetime) -> 14-digit timestamp; ValueError if it is not one.

    A two-digit RFC 850 year more than 50 years ahead of ``now`` is in the past century
    (RFC 9110 section 5.6.7).
    """
    value = text.strip()
    if match := _IMF_FIXDATE.fullmatch(value):
        _, day, month, year, *clock = match.groups()
    elif match := _RFC850.fullmatch(value):
        _, day, month, short, *clock = match.groups()
        this_year = (now or datetime.now(UTC)).year
        year = str(this_year - this_year % 100 + int(short))
        if int(year) > this_year + 50:
            year = str(int(year) - 100)
    elif match := _ASCTIME.fullmatch(value):
        _, month, day, *clock, year = match.groups()
    else:
        raise ValueError(f"not an HTTP date: {text[:100]!r}; use an IMF-fixdate such as {_EXAMPLE!r}")
    try:
        hour, minute, second = map(int, clock)
        when = datetime(int(year), _MONTHS.index(month) + 1, int(day), hour, minute, second, tzinfo=UTC)
    except ValueError as exc:
        raise ValueError(f"not an HTTP date: {text[:100]!r} ({exc})") from None
    return from_datetime(when)


def http_date(timestamp: str) -> str:
    """A 14-digit timestamp -> IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``)."""
    when = to_datetime(timestamp)
    return (
        f"{_DAYS[when.weekday()]}, {when.day:02d} {_MONTHS[when.month - 1]} {when.year:04d} "
        f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} GMT"
    )


def _entry(uri: str, rel: str, **params: str) -> str:
    return f'<{uri}>; rel="{rel}"' + "".join(f'; {k}="{v}"' for k, v in params.items())


Memento = tuple[str, str]  # (URI-M, 14-digit timestamp)


@dataclass(frozen=True)
class PageLink:
    """Another page of a paged TimeMap: its URI and, where known, the timestamps of the first
    and last mementos it holds."""

    uri: str
    start: str | None = None
    end: str | None = None

    def span(self) -> dict[str, str]:
        """Its ``from`` and ``until`` attributes (HTTP dates), those known."""
        return {name: http_date(ts) for name, ts in (("from", self.start), ("until", self.end)) if ts}


def link_header(
    *, original: str, timegate: str, timemap: str, first: Memento | None = None, last: Memento | None = None,
    prev: Memento | None = None, current: Memento | None = None, next: Memento | None = None,
) -> str:
    """The ``Link`` value for a memento (``current``) or a TimeGate (no ``current``).

    Names the original resource, the TimeGate, the link-format TimeMap, and the first, last,
    previous and next mementos given (RFC 7089 sections 2.2 and 4), as pywb and the Wayback
    Machine do rather than every memento; relations of one memento share an entry, as in the
    RFC's examples.
    """
    out = [
        _entry(original, "original"),
        _entry(timegate, "timegate"),
        _entry(timemap, "timemap", type=LINK_FORMAT),
    ]
    named: dict[str, tuple[str, list[str]]] = {}  # timestamp -> (URI-M, relations)
    for rel, pick in (("first", first), ("last", last), ("memento", current), ("prev", prev), ("next", next)):
        if pick is not None:
            named.setdefault(pick[1], (pick[0], []))[1].append(rel)
    for timestamp in sorted(named):
        uri, rels = named[timestamp]
        names = " ".join(r for r in rels if r != "memento")
        out.append(_entry(uri, f"{names} memento".lstrip(), datetime=http_date(timestamp)))
    return ", ".join(out)


def link_timemap(*, original: str, timegate: str, timemap: str, mementos: list[Memento], first: bool = True,
                 last: bool = True, pages: tuple[PageLink, ...] = ()) -> str:
    """A TimeMap in application/link-format (RFC 7089 section 5.1.1, RFC 6690): ``mementos`` are
    one page of them when ``pages`` link the others (``rel="timemap"`` with ``from`` and
    ``until``, as the self link has); ``first`` and ``last`` say whether its first and last
    mementos are the resource's."""
    lines = [_entry(original, "original")]
    span = PageLink(timemap, mementos[0][1], mementos[-1][1]) if mementos else PageLink(timemap)
    lines.append(_entry(timemap, "self", type=LINK_FORMAT, **span.span()))
    lines.append(_entry(timegate, "timegate"))
    lines += [_entry(page.uri, "timemap", type=LINK_FORMAT, **page.span()) for page in pages]
    for index, (uri, timestamp) in enumerate(mementos):
        ends = [*(["first"] if first and index == 0 else []),
                *(["last"] if last and index == len(mementos) - 1 else [])]
        lines.append(_entry(uri, " ".join([*ends, "memento"]), datetime=http_date(timestamp)))
    return ",\n".join(lines) + "\n"


def json_timemap(
    *, original: str, timegate: str, timemap: str, timemap_json: str, mementos: list[Memento],
    first: bool = True, last: bool = True, previous: PageLink | None = None,
    following: PageLink | None = None,
) -> str:
    """A TimeMap as JSON, in the Memento Time Travel service's shape (``original_uri``,
    ``timegate_uri``, ``timemap_uri``, ``mementos`` with ``first``, ``last`` and ``list``); one
    page of a paged TimeMap has ``pages`` with ``prev`` and ``next`` (``uri``, ``from``,
    ``until``), as mementoweb.org's JSON TimeMaps page, and ``first`` or ``last`` only when the
    resource's first or last memento is on the page."""
    items = [{"datetime": to_iso(ts), "uri": uri} for uri, ts in mementos]
    body: dict[str, object] = {
        "original_uri": original,
        "timegate_uri": timegate,
        "timemap_uri": {"link_format": timemap, "json_format": timemap_json},
    }
    pages = {name: {"uri": page.uri, **{key: to_iso(ts) for key, ts in
                                        (("from", page.start), ("until", page.end)) if ts}}
             for name, page in (("prev", previous), ("next", following)) if page is not None}
    if pages:
        body["pages"] = pages
    ends: dict[str, object] = {}
    if items and first:
        ends["first"] = items[0]
    if items and last:
        ends["last"] = items[-1]
    body["mementos"] = {**ends, "list": items}
    return json.dumps(body, indent=1) + "\n"
