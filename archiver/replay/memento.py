"""Memento (RFC 7089) helpers, pure: HTTP dates, Link headers, TimeMaps in link-format and JSON.

Mementos are given as ``(uri, timestamp)`` pairs, ``uri`` absolute (URI-M) and ``timestamp``
14 digits, in time order.
"""

from __future__ import annotations

import json
import re
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


def _memento_rels(mementos: list[tuple[str, str]], picks: dict[str, int]) -> list[str]:
    """Link entries for the picked mementos, one per memento: ``rel="first prev memento"``."""
    rels: dict[int, list[str]] = {}
    for rel, index in picks.items():
        rels.setdefault(index, []).append(rel)
    out = []
    for index in sorted(rels):
        uri, timestamp = mementos[index]
        names = " ".join(r for r in rels[index] if r != "memento")
        out.append(_entry(uri, f"{names} memento".lstrip(), datetime=http_date(timestamp)))
    return out


def link_header(
    *, original: str, timegate: str, timemap: str, mementos: list[tuple[str, str]], current: int | None = None
) -> str:
    """The ``Link`` value for a memento (``current`` is its index) or a TimeGate (None).

    Names the original resource, the TimeGate, the link-format TimeMap, and the first, last,
    previous and next mementos (RFC 7089 sections 2.2 and 4); relations of one memento share an
    entry, as in the RFC's examples.
    """
    out = [
        _entry(original, "original"),
        _entry(timegate, "timegate"),
        _entry(timemap, "timemap", type=LINK_FORMAT),
    ]
    if mementos:
        picks = {"first": 0, "last": len(mementos) - 1}
        if current is not None:
            picks["memento"] = current
            if current > 0:
                picks["prev"] = current - 1
            if current < len(mementos) - 1:
                picks["next"] = current + 1
        out += _memento_rels(mementos, picks)
    return ", ".join(out)


def link_timemap(*, original: str, timegate: str, timemap: str, mementos: list[tuple[str, str]]) -> str:
    """A TimeMap in application/link-format (RFC 7089 section 5.1.1, RFC 6690)."""
    lines = [_entry(original, "original")]
    if mementos:
        lines.append(
            _entry(
                timemap,
                "self",
                type=LINK_FORMAT,
                **{"from": http_date(mementos[0][1]), "until": http_date(mementos[-1][1])},
            )
        )
    else:
        lines.append(_entry(timemap, "self", type=LINK_FORMAT))
    lines.append(_entry(timegate, "timegate"))
    for index, (uri, timestamp) in enumerate(mementos):
        rel = " ".join(
            [*(["first"] if index == 0 else []), *(["last"] if index == len(mementos) - 1 else []), "memento"]
        )
        lines.append(_entry(uri, rel, datetime=http_date(timestamp)))
    return ",\n".join(lines) + "\n"


def json_timemap(
    *, original: str, timegate: str, timemap: str, timemap_json: str, mementos: list[tuple[str, str]]
) -> str:
    """A TimeMap as JSON, in the Memento Time Travel service's shape (``original_uri``,
    ``timegate_uri``, ``timemap_uri``, ``mementos`` with ``first``, ``last`` and ``list``)."""
    items = [{"datetime": to_iso(ts), "uri": uri} for uri, ts in mementos]
    body: dict[str, object] = {
        "original_uri": original,
        "timegate_uri": timegate,
        "timemap_uri": {"link_format": timemap, "json_format": timemap_json},
        "mementos": {"list": items},
    }
    if items:
        body["mementos"] = {"first": items[0], "last": items[-1], "list": items}
    return json.dumps(body, indent=1) + "\n"
