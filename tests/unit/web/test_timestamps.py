"""Dates as users type them -> 14-digit UTC archive timestamps, and back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from archiver.web.timestamps import from_datetime, parse_date, stamp_after, stamp_before, to_datetime, to_iso


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("2026", "20260101000000", "20261231235959"),
        ("202602", "20260201000000", "20260228235959"),
        ("202402", "20240201000000", "20240229235959"),  # leap year
        ("20261122", "20261122000000", "20261122235959"),
        ("2026112203", "20261122030000", "20261122035959"),
        ("202611220315", "20261122031500", "20261122031559"),
        ("20261122031500", "20261122031500", "20261122031500"),
        ("2026-11", "20261101000000", "20261130235959"),
        ("2026-11-22", "20261122000000", "20261122235959"),
        ("2026-11-22T03", "20261122030000", "20261122035959"),
        ("2026-11-22T03:15", "20261122031500", "20261122031559"),
        ("2026-11-22T03:15:00Z", "20261122031500", "20261122031500"),
        ("2026-11-22 03:15:00", "20261122031500", "20261122031500"),
        ("2026-11-22t03:15:07z", "20261122031507", "20261122031507"),
        ("2026-11-22T03:15:07.999Z", "20261122031507", "20261122031507"),  # fraction dropped
        ("2026-11-22T03:15:07,5", "20261122031507", "20261122031507"),
        ("2026-11-22T03:15:00+02:00", "20261122011500", "20261122011500"),
        ("2026-11-22T03:15-0530", "20261122084500", "20261122084559"),
        ("2026-01-01T00:30+01", "20251231233000", "20251231233059"),  # across a year
        ("  2026-11-22  ", "20261122000000", "20261122235959"),
    ],
)
def test_accepted_forms(text: str, low: str, high: str) -> None:
    assert parse_date(text) == low
    assert parse_date(text, upper=True) == high


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("yesterday", "unreadable"),
        ("", "unreadable"),
        ("202", "3 digits do not end on a field boundary"),
        ("20261", "5 digits do not end on a field boundary"),
        ("2026112203150", "13 digits"),
        ("202611220315001", "15 digits"),
        ("2026-13", "month 13"),
        ("20261301", "month 13"),
        ("2026-00-10", "month 00"),
        ("0000", "no year 0000"),
        ("2026-02-30", "day is out of range"),
        ("20250229", "day is out of range"),
        ("2026-11-22T24:00", "hour"),
        ("2026-11-22T03:60", "minute"),
        ("2026-11-22T03:15:60", "second"),
        ("2026-11-22T03:15+24:00", "bad UTC offset"),
        ("2026-11-22+02:00", "unreadable"),  # an offset needs a time
        ("2026/11/22", "unreadable"),
        ("22-11-2026", "unreadable"),
        ("\uff12\uff10\uff12\uff16", "unreadable"),  # fullwidth digits: not ASCII
        ("9999-12-31T23:30-01:00", "out of range"),
    ],
)
def test_rejected_forms_say_what_is_accepted(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as info:
        parse_date(text)
    assert "accepted forms: 4 to 14 digits" in str(info.value)
    assert "2026-11-22T03:15:00+02:00" in str(info.value)


def test_datetime_conversions() -> None:
    dt = to_datetime("20261122031500")
    assert dt == datetime(2026, 11, 22, 3, 15, tzinfo=UTC)
    assert from_datetime(dt) == "20261122031500"
    plus2 = datetime(2026, 11, 22, 5, 15, tzinfo=timezone(timedelta(hours=2)))
    assert from_datetime(plus2) == "20261122031500"
    assert from_datetime(datetime(999, 1, 2, tzinfo=UTC)) == "09990102000000"
    assert to_iso("20261122031500") == "2026-11-22T03:15:00Z"
    assert parse_date(to_iso("20240229235959")) == "20240229235959"
    with pytest.raises(ValueError, match="naive"):
        from_datetime(datetime(2026, 11, 22))
    for bad in ["2026112203150", "202611220315000", "2026-11-22T03:", "20261322031500", "20260230000000"]:
        with pytest.raises(ValueError):
            to_datetime(bad)
        with pytest.raises(ValueError):
            to_iso(bad)


@pytest.mark.parametrize(
    ("stamp", "after", "before"),
    [("20261122031559", "20261122031560", "20261122031558"),  # bounds, compared as text
     ("20261122000000", "20261122000001", "20261121999999"),
     ("00000000000000", "00000000000001", None), ("99999999999999", None, "99999999999998")],
)
def test_the_stamps_next_to_one_leave_no_stamp_between(stamp, after, before):
    assert (stamp_after(stamp), stamp_before(stamp)) == (after, before)
    for bound in (after, before):
        assert bound is None or len(bound) == 14


@pytest.mark.parametrize("text", ["2026", "2026112203155x", "202611220315590"])
def test_the_stamps_next_to_one_need_14_digits(text):
    for step in (stamp_after, stamp_before):
        with pytest.raises(ValueError, match="14-digit"):
            step(text)
