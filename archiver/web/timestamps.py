"""Archive timestamps: dates as users type them <-> 14-digit UTC ``YYYYMMDDhhmmss`` (pure logic).

``parse_date`` accepts two families, both read as a *prefix* of an instant:

- digits only, a whole number of fields: ``YYYY``, ``YYYYMM``, ``YYYYMMDD``, ``YYYYMMDDhh``,
  ``YYYYMMDDhhmm``, ``YYYYMMDDhhmmss`` (4, 6, 8, 10, 12 or 14 digits), as the Wayback Machine and
  pywb take them in URLs. An odd count (5, 7, ... 13 digits) ends inside a field: "20261" could be
  October or the start of a two-digit month, so it is refused rather than guessed at.
- ISO 8601 / RFC 3339: ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, then optionally ``T`` (or a space, as
  RFC 3339 section 5.6 allows) and ``hh``, ``hh:mm`` or ``hh:mm:ss`` with optional fractional
  seconds, then optionally ``Z`` or an offset ``+hh:mm`` / ``+hhmm`` / ``+hh``. No offset means UTC,
  the timezone of every WARC-Date (WARC 1.1 section 5.4).

A partial date stands for the whole span it names: the earliest instant by default, the latest with
``upper=True`` (for an inclusive ``--to`` bound: "2026" -> 20261231235959). Fractions of a second
are dropped (the instant lies inside that second either way). Offsets are applied after padding,
so the span is the one the user meant in their timezone.
"""

import calendar
import re
from datetime import UTC, datetime, timedelta

_FORMS = (
    "accepted forms: 4 to 14 digits YYYY[MM[DD[hh[mm[ss]]]]] (a whole number of fields), "
    "or ISO 8601 such as 2026-11-22, 2026-11-22T03:15, 2026-11-22 03:15:00, "
    "2026-11-22T03:15:00.5Z, 2026-11-22T03:15:00+02:00"
)

_ISO = re.compile(
    r"(?P<Y>\d{4})(?:-(?P<M>\d{2})(?:-(?P<D>\d{2})"
    r"(?:[T ](?P<h>\d{2})(?::(?P<m>\d{2})(?::(?P<s>\d{2})(?:[.,]\d+)?)?)?"
    r"(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?)?)?)?",
    re.IGNORECASE | re.ASCII,
)
_DIGITS = re.compile(r"\d{4}(?:\d{2}){0,5}", re.ASCII)
_TS14 = re.compile(r"\d{14}", re.ASCII)


def parse_date(text: str, *, upper: bool = False) -> str:
    """A date as typed -> 14-digit UTC timestamp; a partial date pads to its first (or last) second.

    Anything else raises ValueError with a message naming the accepted forms.
    """
    stripped = text.strip()
    if _DIGITS.fullmatch(stripped):
        fields = [stripped[0:4], *(stripped[i : i + 2] for i in range(4, len(stripped), 2))]
        tz = None
    else:
        match = _ISO.fullmatch(stripped)
        if not match and stripped.isascii() and stripped.isdigit():
            raise ValueError(
                f"invalid date {text!r}: {len(stripped)} digits do not end on a field boundary; {_FORMS}"
            )
        if not match:
            raise ValueError(f"unreadable date {text!r}; {_FORMS}")
        fields = [v for v in match.group("Y", "M", "D", "h", "m", "s") if v is not None]
        tz = match.group("tz")
    year, *rest = (int(f) for f in fields)
    month = rest[0] if rest else (12 if upper else 1)
    if year == 0:
        raise ValueError(f"invalid date {text!r}: there is no year 0000; {_FORMS}")
    if not 1 <= month <= 12:
        raise ValueError(f"invalid date {text!r}: month {month:02d} is not 01-12; {_FORMS}")
    # Missing fields: the first instant of the span, or its last second for an upper bound.
    day = rest[1] if len(rest) > 1 else (calendar.monthrange(year, month)[1] if upper else 1)
    hour, minute, second = (*rest[2:], *((23, 59, 59) if upper else (0, 0, 0))[len(rest[2:]) :])
    try:
        dt = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as exc:
        raise ValueError(f"invalid date {text!r}: {exc}; {_FORMS}") from None
    if tz is not None and tz.upper() != "Z":
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        offset_h, offset_m = int(digits[:2]), int(digits[2:] or 0)
        if offset_h > 23 or offset_m > 59:
            raise ValueError(f"invalid date {text!r}: bad UTC offset {tz}; {_FORMS}")
        try:
            dt -= sign * timedelta(hours=offset_h, minutes=offset_m)
        except OverflowError:
            raise ValueError(f"invalid date {text!r}: out of range in UTC; {_FORMS}") from None
    return from_datetime(dt)


def to_datetime(ts14: str) -> datetime:
    """A 14-digit timestamp -> an aware UTC datetime (ValueError if it is not one)."""
    if not _TS14.fullmatch(ts14):
        raise ValueError(f"not a 14-digit timestamp: {ts14!r}")
    try:
        return datetime(
            int(ts14[0:4]),
            int(ts14[4:6]),
            int(ts14[6:8]),
            int(ts14[8:10]),
            int(ts14[10:12]),
            int(ts14[12:14]),
            tzinfo=UTC,
        )
    except ValueError as exc:
        raise ValueError(f"invalid timestamp {ts14!r}: {exc}") from None


def from_datetime(dt: datetime) -> str:
    """An aware datetime -> 14-digit UTC timestamp (a naive one is refused: its zone is unknown)."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"naive datetime {dt!r}: give it a timezone")
    u = dt.astimezone(UTC)
    return f"{u.year:04d}{u.month:02d}{u.day:02d}{u.hour:02d}{u.minute:02d}{u.second:02d}"


def to_iso(ts14: str) -> str:
    """A 14-digit timestamp -> RFC 3339 UTC text, e.g. ``2026-11-22T03:15:00Z``."""
    to_datetime(ts14)
    return f"{ts14[0:4]}-{ts14[4:6]}-{ts14[6:8]}T{ts14[8:10]}:{ts14[10:12]}:{ts14[12:14]}Z"


def stamp_after(ts14: str) -> str | None:
    """The least 14 digits above ``ts14``, compared as text (``20261122031559`` ->
    ``20261122031560``, a bound rather than a date): from there on lie the captures of later
    seconds only. None after ``99999999999999``; ValueError if ``ts14`` is not 14 digits."""
    if not _TS14.fullmatch(ts14):
        raise ValueError(f"not a 14-digit timestamp: {ts14!r}")
    after = int(ts14) + 1
    return f"{after:014d}" if after < 10**14 else None


def stamp_before(ts14: str) -> str | None:
    """The greatest 14 digits below ``ts14``, compared as text: up to there lie the captures of
    earlier seconds only. None before ``00000000000000``; ValueError as :func:`stamp_after`."""
    if not _TS14.fullmatch(ts14):
        raise ValueError(f"not a 14-digit timestamp: {ts14!r}")
    before = int(ts14) - 1
    return f"{before:014d}" if before >= 0 else None
