"""Range requests (RFC 9110 section 14) as replay answers them for audio and video."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.web.http import UNSATISFIABLE, ByteRange, parse_range


@pytest.mark.parametrize(("value", "size", "wanted"), [
    (None, 100, None),
    ("bytes=0-9", 100, ByteRange(0, 9)),
    ("bytes=90-", 100, ByteRange(90, 99)),
    ("bytes=90-500", 100, ByteRange(90, 99)),
    ("bytes=-10", 100, ByteRange(90, 99)),
    ("bytes=-500", 100, ByteRange(0, 99)),
    ("bytes=100-", 100, UNSATISFIABLE),
    ("bytes=-0", 100, UNSATISFIABLE),
    ("bytes=0-", 0, UNSATISFIABLE),
    ("bytes=9-0", 100, None),            # last before first: malformed, ignored
    ("bytes=500-10", 100, None),
    ("bytes=0-1,5-6", 100, None),        # several ranges: sent whole
    ("items=0-1", 100, None),
    ("bytes=", 100, None),
    ("bytes=-", 100, None),
])
def test_ranges(value: str | None, size: int, wanted: ByteRange | None) -> None:
    assert parse_range(value, size) == wanted


@given(st.text(max_size=40), st.integers(0, 10**6))
def test_any_header_gives_a_range_within_the_representation_or_none(value: str, size: int) -> None:
    found = parse_range(value, size)
    assert found is None or found == UNSATISFIABLE or 0 <= found.first <= found.last < size


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 10**6))
def test_a_range_within_the_representation_is_kept(first: int, length: int, size: int) -> None:
    last = first + length
    found = parse_range(f"bytes={first}-{last}", size)
    if first >= size:
        assert found == UNSATISFIABLE
    else:
        assert found == ByteRange(first, min(last, size - 1))
