"""Per-site sheets (``[[sheets]]`` in the config): which sites a sheet applies to, its crawl
window and its daily page budget, without I/O. Every function takes the time as an argument (the
crawler passes its clock), so the rules are tested at any hour of any day.

A sheet's ``match`` rules are scope rules (archiver.web.scope) matched against the site's origin
URL ``scheme://host[:port]/``: a SURT prefix such as ``org,example)`` or ``org,example)/`` and a
``re:`` expression see that URL, ``host:`` and ``domain:`` its host. The first sheet whose rules
match a site applies to it, whole; later sheets are not consulted.

A window ``"HH:MM-HH:MM"`` holds the local times from its start (included) to its end (excluded)
in the sheet's ``time_zone`` (UTC if none); an end before the start wraps midnight
(``"22:00-06:00"``), and ``24:00`` may end a window. Local time is the wall clock zoneinfo gives:
on the day clocks go forward a wall time in the gap never occurs (a window ``02:00-03:00`` in
Europe/Paris is closed all that day, and its next opening is the next day's 02:00), and on the day
they go back a window holds the repeated hour twice.

The daily budget counts pages per calendar day in the sheet's time zone: ``day_of`` numbers that
day (a proleptic Gregorian ordinal), ``next_day`` is when the next one starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from archiver.web.scope import Scope, ScopeError, parse_rule

_WINDOW = re.compile(r"([0-9]{2}):([0-9]{2})-([0-9]{2}):([0-9]{2})")
_DAY = 24 * 60


class SheetError(ValueError):
    """A sheet that cannot be used; the message names the key and the problem."""


@dataclass(frozen=True)
class Window:
    """Hours of the day: local minutes ``start`` (included) to ``end`` (excluded), wrapping
    midnight when ``end`` < ``start``; ``text`` as written."""

    start: int
    end: int
    text: str

    def holds(self, minute: int) -> bool:
        """Is the local minute of the day ``minute`` (0..1439) inside the window?"""
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end


def parse_window(text: str) -> Window:
    """``"HH:MM-HH:MM"`` -> Window; SheetError for another form, an hour past 23 (24:00 only as
    an end), a minute past 59 or an empty window."""
    found = _WINDOW.fullmatch(text)
    if found is None:
        raise SheetError(f"{text!r} is not a window: write \"HH:MM-HH:MM\", e.g. \"22:00-06:00\"")
    h1, m1, h2, m2 = map(int, found.groups())
    if m1 > 59 or m2 > 59 or h1 > 23 or h2 > 24 or (h2 == 24 and m2 != 0):
        raise SheetError(f"{text!r}: hours run 00-23 (24:00 may end a window), minutes 00-59")
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if start == end % _DAY:
        raise SheetError(f"{text!r}: the window is empty or the whole day (leave window out for "
                         "the whole day)")
    return Window(start, end, text)


def parse_zone(name: str) -> tzinfo:
    """A time zone name from the IANA database (zoneinfo), "" for UTC; SheetError."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SheetError(f"{name!r} is not a time zone name (IANA, e.g. \"Europe/Paris\" or "
                         "\"UTC\")") from None


LOGINS = ("basic", "digest", "form")
# A sheet's login keys (archiver.crawl.session): how its sites are logged in to, and how a
# visit tells that the session is still alive.
LOGIN_KEYS = ("login", "credentials", "login_url", "username_field", "password_field",
              "login_fields", "login_success", "logged_in", "logged_out_url", "session_scope")


@dataclass(frozen=True)
class Login:
    """A sheet's login: ``method`` (basic, digest or form) with the credentials table named
    ``credentials``; for a form, the page holding it (``login_url``), its field names, extra
    ``fields`` to send and the text of the page after a successful login (``login_success``).
    ``logged_in``: a text every page of the session holds ("" for no check); ``logged_out_url``:
    where the site sends a visitor who is logged out (an absolute URL or a path, matched as a
    prefix of a redirect's target); ``scope``: which pages the check applies to (scope rules;
    empty: every HTML page of the site)."""

    method: str
    credentials: str
    login_url: str = ""
    username_field: str = ""
    password_field: str = ""
    fields: tuple[tuple[str, str], ...] = ()
    login_success: str = ""
    logged_in: str = ""
    logged_out_url: str = ""
    scope: tuple[str, ...] = ()
    rules: Scope = field(default_factory=Scope, compare=False, repr=False)

    def checks(self, url: str) -> bool:
        """Does the session check apply to the page ``url``?"""
        return not self.scope or self.rules.decide(url).in_scope


def make_login(values: dict[str, Any]) -> Login | None:
    """The Login of a sheet's login keys (strings and tables, types already checked), None
    without ``login``; SheetError naming the key."""
    method = values.get("login")
    if method is None:
        stray = sorted(set(values) - {"login"})
        if stray:
            raise SheetError(f"{stray[0]}: needs login = \"basic\", \"digest\" or \"form\" in "
                             "the same sheet")
        return None
    if method not in LOGINS:
        raise SheetError("login: must be \"basic\", \"digest\" or \"form\"")
    if not values.get("credentials"):
        raise SheetError("credentials: name the table of the credentials file this login uses")
    if method == "form":
        for key in ("login_url", "username_field", "password_field", "login_success"):
            if not values.get(key):
                raise SheetError(f"{key}: a form login needs it")
    else:
        for key in ("login_url", "username_field", "password_field", "login_fields",
                    "login_success"):
            if key in values:
                raise SheetError(f"{key}: only for login = \"form\"")
    scope = tuple(values.get("session_scope", ()))
    try:
        rules = Scope(include=[parse_rule(text) for text in scope])
    except ScopeError as e:
        raise SheetError(f"session_scope: {e}") from None
    fields = tuple(sorted(values.get("login_fields", {}).items()))
    return Login(method, values["credentials"], values.get("login_url", ""),
                 values.get("username_field", ""), values.get("password_field", ""), fields,
                 values.get("login_success", ""), values.get("logged_in", ""),
                 values.get("logged_out_url", ""), scope, rules)


@dataclass(frozen=True)
class Sheet:
    """One ``[[sheets]]`` table, parsed: ``index`` (its place in the file), ``match`` (its rules
    as written), ``overrides`` (the ``[crawl]`` keys it sets, with their values), its ``window``
    (None: all day), ``time_zone`` ("" for UTC) and ``daily_pages`` (0: no budget)."""

    index: int
    match: tuple[str, ...]
    overrides: tuple[tuple[str, Any], ...] = ()
    window: Window | None = None
    time_zone: str = ""
    daily_pages: int = 0
    login: Login | None = None
    rules: Scope = field(default_factory=Scope, compare=False, repr=False)
    zone: tzinfo = field(default=UTC, compare=False, repr=False)

    def matches(self, origin: str) -> bool:
        """Does the sheet apply to the site ``origin`` (``scheme://host[:port]``)?"""
        return self.rules.decide(origin + "/").in_scope

    def is_open(self, now: float) -> bool:
        """Is the crawl window open at ``now`` (seconds since the epoch)? Always without one."""
        if self.window is None:
            return True
        local = datetime.fromtimestamp(now, self.zone)
        return self.window.holds(local.hour * 60 + local.minute)

    def next_opening(self, now: float) -> float:
        """The first instant after ``now`` at which the window is open (``now`` if it is)."""
        if self.is_open(now) or self.window is None:
            return now
        start = self.window.start
        today = datetime.fromtimestamp(now, self.zone).date()
        for days in range(3):  # today's start may be past; tomorrow's may fall in a DST gap
            day = today + timedelta(days=days)
            opening = _local(day, start // 60, start % 60, self.zone)
            if opening > now and self.is_open(opening):
                return max(now, self._gap_end(opening))
        raise AssertionError("a window opens within three days")  # pragma: no cover

    def _gap_end(self, opening: float) -> float:
        """``opening`` (the window's start read as a local time), or, when that start fell in a
        DST gap, the end of the gap: the first instant the window is open that day."""
        assert self.window is not None
        shown = datetime.fromtimestamp(opening, self.zone)
        shift = (shown.hour * 60 + shown.minute - self.window.start) % _DAY
        if not shift:
            return opening
        low, high = opening - shift * 60, opening  # closed at low (before the gap), open at high
        while high - low > 1:
            middle = (low + high) / 2
            low, high = (low, middle) if self.is_open(middle) else (middle, high)
        return float(round(high))

    def day_of(self, now: float) -> int:
        """The budget's day at ``now``: the local date's ordinal in the sheet's time zone."""
        return datetime.fromtimestamp(now, self.zone).date().toordinal()

    def next_day(self, now: float) -> float:
        """When the local day after ``now``'s starts (its first instant, midnight or the end of a
        DST gap at midnight)."""
        return _local(date.fromordinal(self.day_of(now) + 1), 0, 0, self.zone)

    def wait(self, now: float, pages_today: int) -> tuple[float, str] | None:
        """Why the site may not be fetched at ``now``, having fetched ``pages_today`` pages this
        budget day: (when it may be again, a note for the site queue), or None if it may."""
        zone = self.time_zone or "UTC"
        if not self.is_open(now):
            assert self.window is not None
            return self.next_opening(now), f"window opens {_clock(self.window.start)} {zone}"
        if self.daily_pages and pages_today >= self.daily_pages:
            return self.next_day(now), f"daily budget of {self.daily_pages} pages spent until 00:00 {zone}"
        return None


def _clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _local(day: date, hour: int, minute: int, zone: tzinfo) -> float:
    """The instant of a local wall time (one in a DST gap is read with the offset before it,
    so it lands inside or after the gap)."""
    return datetime.combine(day, time(hour, minute), zone).timestamp()


def make_sheet(index: int, match: Iterable[str], *, overrides: Iterable[tuple[str, Any]] = (),
               window: str = "", time_zone: str = "", daily_pages: int = 0,
               login: Login | None = None) -> Sheet:
    """A Sheet from its table's values (types already checked); SheetError naming the key."""
    match = tuple(match)
    if not match:
        raise SheetError("match: give at least one rule (a site a sheet applies to)")
    try:
        rules = Scope(include=[parse_rule(text) for text in match])
    except ScopeError as e:
        raise SheetError(f"match: {e}") from None
    try:
        zone = parse_zone(time_zone)
    except SheetError as e:
        raise SheetError(f"time_zone: {e}") from None
    try:
        parsed = parse_window(window) if window else None
    except SheetError as e:
        raise SheetError(f"window: {e}") from None
    if daily_pages < 0:
        raise SheetError(f"daily_pages: must be 0 (no budget) or more, got {daily_pages}")
    return Sheet(index, match, tuple(overrides), parsed, time_zone, daily_pages, login, rules,
                 zone)


def sheet_for(sheets: Iterable[Sheet], origin: str) -> Sheet | None:
    """The sheet that applies to the site ``origin``: the first that matches, or None."""
    return next((sheet for sheet in sheets if sheet.matches(origin)), None)
