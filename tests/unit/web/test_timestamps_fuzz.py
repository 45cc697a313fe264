"""Fuzz tests for archiver.web.timestamps: any text is a timestamp or a ValueError, in linear time."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.timestamps import parse_date, to_datetime, to_iso
from tests.support.fuzzing import assert_cost_bounded, examples

_DIGITS = st.text("0123456789", max_size=30)
_ISO_LIKE = st.builds(
    "".join,
    st.lists(
        st.sampled_from(
            ["2026", "0000", "9999", "0001", "-", "11", "13", "00", "29", "30", "31", "T", "t", " ", ":",
             "59", "60", "24", ".", ",", "5", "Z", "z", "+", "-", "23:59", "0530", "99", "\n", "\u0663",
             "\uff12"]
        ),
        max_size=12,
    ),
)  # fmt: skip


def _check(text: str, upper: bool) -> None:
    try:
        stamp = parse_date(text, upper=upper)
    except ValueError as exc:
        assert str(exc)
        return
    assert len(stamp) == 14 and stamp.isascii() and stamp.isdigit()
    assert to_iso(stamp).endswith("Z")  # a real instant


@settings(max_examples=examples(500), deadline=None)
@given(_DIGITS | _ISO_LIKE | st.text(max_size=30), st.booleans())
def test_any_text_is_a_timestamp_or_a_value_error(text: str, upper: bool) -> None:
    _check(text, upper)


@settings(max_examples=examples(500), deadline=None)
@given(_DIGITS | _ISO_LIKE)
def test_a_lower_bound_never_passes_its_upper_bound(text: str) -> None:
    try:
        low, high = parse_date(text), parse_date(text, upper=True)
    except ValueError:
        return
    assert low <= high


@settings(max_examples=examples(300), deadline=None)
@given(_DIGITS | st.text(max_size=20))
def test_any_text_is_a_14_digit_stamp_or_a_value_error(text: str) -> None:
    try:
        to_datetime(text)
    except ValueError:
        return
    assert len(text) == 14


@pytest.mark.parametrize(
    "text",
    ["2" * 100_000, "2026-" + "1" * 100_000, "2026-11-22T03:15:00." + "5" * 100_000, " " * 100_000 + "2026",
     "2026-11-22T03:15:00+" + "0" * 100_000, "\u0663" * 100_000],
    ids=["digits", "month", "fraction", "spaces", "offset", "arabic-indic digits"],
)  # fmt: skip
def test_long_input_costs_what_a_short_date_padded_to_its_size_does(text: str) -> None:
    benign = "2026-11-22T03:15:00Z".ljust(len(text))

    def parse(value: str) -> None:
        with contextlib.suppress(ValueError):
            parse_date(value)

    assert_cost_bounded(parse, text, benign, factor=10, label=text[:20])
