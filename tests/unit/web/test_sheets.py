"""Per-site sheets (archiver.web.sheets and ``[[sheets]]`` in archiver.config), pure: windows
(plain, wrapping midnight, on both DST change days in Europe/Paris), next openings, budget days in
a time zone, matching and precedence, every time given (an injected clock), and the config errors
that name the sheet and the key."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver import config
from archiver.config import ConfigError, site_crawl
from archiver.web.sheets import SheetError, Window, make_sheet, parse_window, sheet_for
from tests.support.fuzzing import examples

PARIS = ZoneInfo("Europe/Paris")


def at(*fields: int, zone=PARIS) -> float:
    return datetime(*fields, tzinfo=zone).timestamp()


def local(instant: float, zone=PARIS) -> datetime:
    return datetime.fromtimestamp(instant, zone)


def test_a_plain_window_holds_its_start_not_its_end():
    sheet = make_sheet(0, ["host:a.example"], window="09:00-17:00")  # UTC
    assert not sheet.is_open(at(2026, 5, 4, 8, 59, 59, zone=UTC))
    assert sheet.is_open(at(2026, 5, 4, 9, 0, zone=UTC))
    assert sheet.is_open(at(2026, 5, 4, 16, 59, 59, zone=UTC))
    assert not sheet.is_open(at(2026, 5, 4, 17, 0, zone=UTC))
    assert sheet.next_opening(at(2026, 5, 4, 17, 0, zone=UTC)) == at(2026, 5, 5, 9, 0, zone=UTC)
    assert sheet.next_opening(at(2026, 5, 4, 3, 0, zone=UTC)) == at(2026, 5, 4, 9, 0, zone=UTC)
    open_now = at(2026, 5, 4, 12, 0, zone=UTC)
    assert sheet.next_opening(open_now) == open_now


def test_a_window_wraps_midnight_in_its_time_zone():
    sheet = make_sheet(0, ["host:a.example"], window="22:00-06:00", time_zone="Europe/Paris")
    assert sheet.is_open(at(2026, 6, 1, 22, 0)) and sheet.is_open(at(2026, 6, 2, 5, 59))
    assert sheet.is_open(at(2026, 6, 2, 0, 0))
    assert not sheet.is_open(at(2026, 6, 2, 6, 0)) and not sheet.is_open(at(2026, 6, 1, 21, 59))
    # 21:00 UTC is 23:00 in Paris in summer: open, though UTC's hour is outside the window.
    assert sheet.is_open(at(2026, 6, 1, 21, 0, zone=UTC))
    assert sheet.next_opening(at(2026, 6, 2, 12, 0)) == at(2026, 6, 2, 22, 0)
    assert sheet.wait(at(2026, 6, 2, 12, 0), 0) == (at(2026, 6, 2, 22, 0),
                                                    "window opens 22:00 Europe/Paris")
    assert sheet.wait(at(2026, 6, 2, 23, 0), 10**6) is None  # no budget


def test_the_day_clocks_go_forward_in_paris():
    # 2026-03-29: 02:00 CET becomes 03:00 CEST; local times 02:00-02:59 never occur.
    gap = make_sheet(0, ["host:a.example"], window="02:00-03:00", time_zone="Europe/Paris")
    midnight = at(2026, 3, 29, 0, 0)
    assert not any(gap.is_open(midnight + minute * 60) for minute in range(24 * 60))
    assert local(gap.next_opening(midnight)) == datetime(2026, 3, 30, 2, 0, tzinfo=PARIS)
    # A window starting in the gap opens when the gap ends (03:00 CEST, 01:00 UTC).
    late = make_sheet(0, ["host:a.example"], window="02:30-04:00", time_zone="Europe/Paris")
    opening = late.next_opening(midnight)
    assert opening == at(2026, 3, 29, 1, 0, zone=UTC)
    assert late.is_open(opening) and not late.is_open(opening - 1)
    # The wrapping night window is an hour shorter that night.
    night = make_sheet(0, ["host:a.example"], window="22:00-06:00", time_zone="Europe/Paris")
    start = at(2026, 3, 28, 22, 0)
    assert sum(night.is_open(start + minute * 60) for minute in range(12 * 60)) == 7 * 60


def test_the_day_clocks_go_back_in_paris():
    # 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:00-02:59 happens twice.
    twice = make_sheet(0, ["host:a.example"], window="02:00-03:00", time_zone="Europe/Paris")
    first, second = at(2026, 10, 25, 0, 30, zone=UTC), at(2026, 10, 25, 1, 30, zone=UTC)
    assert local(first).hour == local(second).hour == 2
    assert twice.is_open(first) and twice.is_open(second)
    night = make_sheet(0, ["host:a.example"], window="22:00-06:00", time_zone="Europe/Paris")
    start = at(2026, 10, 24, 22, 0)
    assert sum(night.is_open(start + minute * 60) for minute in range(12 * 60)) == 9 * 60
    # That day is 25 hours long for the budget.
    budget = make_sheet(0, ["host:a.example"], daily_pages=5, time_zone="Europe/Paris")
    day_start = at(2026, 10, 25, 0, 0)
    assert budget.next_day(day_start) - day_start == 25 * 3600


def test_a_budget_day_is_a_calendar_day_of_the_sheets_time_zone():
    paris = make_sheet(0, ["host:a.example"], daily_pages=3, time_zone="Europe/Paris")
    utc = make_sheet(1, ["host:a.example"], daily_pages=3)
    before = at(2026, 6, 1, 21, 59, 59, zone=UTC)  # 23:59:59 in Paris
    after = at(2026, 6, 1, 22, 0, zone=UTC)        # midnight in Paris
    assert paris.day_of(after) == paris.day_of(before) + 1
    assert utc.day_of(after) == utc.day_of(before)
    assert paris.next_day(before) == after
    assert utc.next_day(before) == at(2026, 6, 2, 0, 0, zone=UTC)
    assert paris.wait(before, 2) is None
    assert paris.wait(before, 3) == (after, "daily budget of 3 pages spent until 00:00 Europe/Paris")
    assert utc.wait(before, 3) == (at(2026, 6, 2, 0, 0, zone=UTC),
                                   "daily budget of 3 pages spent until 00:00 UTC")


def test_a_closed_window_is_said_before_a_spent_budget():
    sheet = make_sheet(0, ["host:a.example"], window="22:00-23:00", daily_pages=1,
                       time_zone="Europe/Paris")
    due, note = sheet.wait(at(2026, 6, 1, 12, 0), 5) or (0.0, "")
    assert due == at(2026, 6, 1, 22, 0) and note.startswith("window opens 22:00")


def test_matching_against_the_origin_and_the_first_sheet_applies():
    sheets = (
        make_sheet(0, ["re:^http://news\\.example:8080/$"], overrides=[("min_rest", 9.0)]),
        make_sheet(1, ["domain:example"], overrides=[("min_rest", 5.0)]),
        make_sheet(2, ["org,museum)"], overrides=[("min_rest", 7.0)]),
        make_sheet(3, ["host:a.example"], overrides=[("min_rest", 1.0)]),
    )
    assert sheet_for(sheets, "http://news.example:8080") is sheets[0]
    assert sheet_for(sheets, "https://news.example") is sheets[1]  # another port: not sheet 0
    assert sheet_for(sheets, "http://a.example") is sheets[1]      # the first match, not sheet 3
    assert sheet_for(sheets, "http://www.museum.org") is sheets[2]  # SURT drops www
    assert sheet_for(sheets, "http://shop.museum.org") is None
    crawl = config.CrawlConfig()
    assert site_crawl(crawl, sheets[2]).min_rest == 7.0
    assert site_crawl(crawl, sheets[2]).max_rest == crawl.max_rest
    assert site_crawl(crawl, None) is crawl


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "archiver.toml"
    path.write_text(text)
    return path


def test_sheets_load_in_order_with_their_overrides(tmp_path):
    loaded = config.load(write(tmp_path, """
[crawl]
min_rest = 2.0
[[sheets]]
match = ["domain:museum.example"]
min_rest = 6
max_pages = 500
max_depth = 4
user_agent = "archiver/0.1 (museum collection)"
window = "22:00-06:00"
time_zone = "Europe/Paris"
daily_pages = 200
[[sheets]]
match = ["host:news.example", "re:^https://"]
max_bytes = 1000000
"""))
    first, second = loaded.sheets
    assert first.index == 0 and second.index == 1
    assert dict(first.overrides) == {"min_rest": 6.0, "max_pages": 500, "max_depth": 4,
                                     "user_agent": "archiver/0.1 (museum collection)"}
    assert first.window == Window(22 * 60, 6 * 60, "22:00-06:00")
    assert (first.time_zone, first.daily_pages) == ("Europe/Paris", 200)
    assert second.match == ("host:news.example", "re:^https://") and second.window is None
    museum = site_crawl(loaded.crawl, first)
    assert (museum.min_rest, museum.max_pages, museum.agent) == (6.0, 500, "archiver")


@pytest.mark.parametrize(("table", "key", "says"), [
    ('match = ["host:a.example"]\nspeed = 3', "speed", "unknown key"),
    ('match = ["host:a.example"]\nrobots = false', "robots", "cannot change robots.txt"),
    ('match = ["host:a.example"]\nignore_robots = true', "ignore_robots", "always obeyed"),
    ('match = ["host:a.example"]\nagent = "other"', "agent", "crawl.agent"),
    ('match = ["host:a.example"]\ntime_zone = "Mars/Olympus"', "time_zone", "not a time zone"),
    ('match = ["host:a.example"]\nwindow = "25:00-06:00"', "window", "hours run"),
    ('match = ["host:a.example"]\nwindow = "10pm-6am"', "window", "not a window"),
    ('match = ["host:a.example"]\nwindow = "06:00-06:00"', "window", "empty or the whole day"),
    ('match = ["re:(a"]', "match", "bad regular expression"),
    ('match = ["host:"]', "match", "not a host name"),
    ('match = []', "match", "at least one rule"),
    ('match = ["host:a.example"]\ndaily_pages = -1', "daily_pages", "0 (no budget) or more"),
    ('match = ["host:a.example"]\ndaily_pages = "10"', "daily_pages", "expected an integer"),
    ('match = ["host:a.example"]\nmin_rest = -1', "min_rest", "must not be negative"),
    ('match = ["host:a.example"]\nmax_pages = 0', "max_pages", "greater than 0"),
    ('match = ["host:a.example"]\nmin_rest = 60', "max_rest", "must be >= min_rest"),
    ('match = ["host:a.example"]\nuser_agent = "caf\\u00e9"', "user_agent", "printable ASCII"),
])
def test_a_bad_sheet_is_a_config_error_naming_the_sheet_and_key(tmp_path, table, key, says):
    path = write(tmp_path, f'[[sheets]]\nmatch = ["host:ok.example"]\n[[sheets]]\n{table}\n')
    with pytest.raises(ConfigError) as error:
        config.load(path)
    message = str(error.value)
    assert message.startswith(f"{path}: sheets[1] (match [")
    assert f"{key}:" in message and says in message


def test_the_error_quotes_the_rules_as_written(tmp_path):
    path = write(tmp_path, '[[sheets]]\nmatch = ["domain:museum.example"]\ntime_zone = "X/Y"\n')
    with pytest.raises(ConfigError) as error:
        config.load(path)
    assert str(error.value).startswith(
        f'{path}: sheets[0] (match ["domain:museum.example"]): time_zone: \'X/Y\' is not a time zone')


def test_a_sheet_without_match_or_not_a_table_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"sheets\[0\]: match: missing"):
        config.load(write(tmp_path, "[[sheets]]\nmin_rest = 1\n"))
    with pytest.raises(ConfigError, match="sheets: must be tables"):
        config.load(write(tmp_path, "sheets = 3\n"))


def test_a_reload_takes_the_new_sheets(tmp_path):
    old = config.load(write(tmp_path, '[[sheets]]\nmatch = ["host:a.example"]\nmin_rest = 9\n'))
    new = config.load(write(tmp_path, '[[sheets]]\nmatch = ["host:a.example"]\nmin_rest = 1\n'))
    kept, fixed = config.reloaded(old, new)
    assert fixed == [] and dict(kept.sheets[0].overrides) == {"min_rest": 1.0}


# -- properties

_TIMES = st.integers(1_700_000_000, 1_900_000_000).map(float)
_ZONES = st.sampled_from(["", "Europe/Paris", "America/New_York", "Australia/Lord_Howe",
                          "Asia/Kathmandu", "Pacific/Chatham"])


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=16) | st.from_regex(r"[0-9]{2}:[0-9]{2}-[0-9]{2}:[0-9]{2}", fullmatch=True))
def test_a_window_parses_or_says_why(text):
    try:
        window = parse_window(text)
    except SheetError as e:
        assert repr(text) in str(e)
        return
    assert text == window.text
    assert 0 <= window.start < 24 * 60 and 0 <= window.end <= 24 * 60
    assert window.start != window.end % (24 * 60)
    h1, m1, h2, m2 = int(text[:2]), int(text[3:5]), int(text[6:8]), int(text[9:])
    assert (window.start, window.end) == (h1 * 60 + m1, h2 * 60 + m2)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 24 * 60 - 1), st.integers(1, 24 * 60), _ZONES, _TIMES)
def test_the_next_opening_is_the_first_open_instant(start, end, zone, now):
    if start == end % (24 * 60):
        return
    text = f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"
    sheet = make_sheet(0, ["host:a.example"], window=text, time_zone=zone)
    opening = sheet.next_opening(now)
    assert opening >= now and sheet.is_open(opening)
    assert opening - now <= 2 * 86400
    if opening > now:
        assert not sheet.is_open(opening - 1)  # opened on that second, not earlier
        wait = sheet.wait(now, 0)
        assert wait is not None and wait[0] == opening


@settings(max_examples=examples(200), deadline=None)
@given(_ZONES, _TIMES)
def test_a_budget_day_ends_where_the_next_begins(zone, now):
    sheet = make_sheet(0, ["host:a.example"], time_zone=zone, daily_pages=1)
    following = sheet.next_day(now)
    assert now < following <= now + 25 * 3600
    assert sheet.day_of(following) == sheet.day_of(now) + 1
    assert sheet.day_of(following - 1) == sheet.day_of(now)


_SHEET_VALUES = st.one_of(
    st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["22:00-06:00", "24:00-01:00", "00:00-24:00", "Europe/Paris", "UTC", "",
                     "host:a.example", "re:(", "com,example)/"]),
    st.lists(st.sampled_from(["host:a.example", "domain:example", "re:^http://", "re:(", "",
                              "org,museum)", "x:y", "host:a.example:80"]), max_size=3),
)
_SHEET_KEYS = st.sampled_from([*config.SHEET_KEYS, *config.SHEET_CRAWL_KEYS, "robots", "agent",
                               "speed", "max_rest"])


@settings(max_examples=examples(150), deadline=None)
@given(st.dictionaries(_SHEET_KEYS, _SHEET_VALUES, max_size=6))
def test_any_sheet_table_loads_or_is_a_config_error_naming_it(table):
    try:
        loaded = config.from_dict({"sheets": [table]})
    except ConfigError as e:
        assert str(e).startswith("<config>: sheets[0]")
        return
    (sheet,) = loaded.sheets
    assert sheet.match and all(isinstance(rule, str) for rule in sheet.match)
    crawl = site_crawl(loaded.crawl, sheet)
    assert 0 <= crawl.min_rest <= crawl.max_rest and crawl.max_pages > 0
    assert sheet.daily_pages >= 0 and sheet.next_day(0.0) > 0.0
    assert sheet.next_opening(1.8e9) >= 1.8e9
