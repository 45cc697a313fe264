"""Content-Encoding lists (RFC 9110 section 8.4): at most MAX_CODINGS codings are undone."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.web.http import MAX_CODINGS, CodingError, content_codings, decode_body
from tests.support.fuzzing import assert_cost_bounded

PAGE = b"<p>layered</p>" * 100


@pytest.mark.parametrize(("value", "codings"), [
    (None, []),
    ("", []),
    ("identity", []),
    ("GZIP", ["gzip"]),
    ("gzip, br", ["gzip", "br"]),
    (" gzip ,, identity ,br,", ["gzip", "br"]),
    (", ".join(["gzip"] * MAX_CODINGS), ["gzip"] * MAX_CODINGS),
    (", ".join(["identity"] * 1000 + ["br"]), ["br"]),
])
def test_codings_are_read_in_the_order_applied(value: str | None, codings: list[str]) -> None:
    assert content_codings(value) == codings


def test_a_coding_past_the_cap_is_a_protocol_error() -> None:
    with pytest.raises(CodingError, match=f"more than {MAX_CODINGS} codings"):
        content_codings(", ".join(["gzip"] * (MAX_CODINGS + 1)))


def _layered(layers: int) -> bytes:
    body = PAGE
    for _ in range(layers):
        body = gzip.compress(body, compresslevel=0)
    return body


def test_decode_undoes_up_to_the_cap_and_nothing_past_it() -> None:
    assert decode_body(_layered(MAX_CODINGS), ", ".join(["gzip"] * MAX_CODINGS), 10**6) == PAGE
    stacked = _layered(MAX_CODINGS + 1)
    assert decode_body(stacked, ", ".join(["gzip"] * (MAX_CODINGS + 1)), 10**6) == stacked


def test_reading_stops_at_the_first_coding_past_the_cap() -> None:
    """The 64 KiB header cap admits about 13,000 codings: they cost what six do."""
    assert_cost_bounded(_read_twenty_times, ", ".join(["gzip"] * 13_000),
                        ", ".join(["gzip"] * (MAX_CODINGS + 1)), 3.0, "codings")


def _read_twenty_times(value: str) -> None:
    for _ in range(20):
        with pytest.raises(CodingError):
            content_codings(value)


_ELEMENT = st.sampled_from(["gzip", "x-gzip", "deflate", "br", "identity", "IDENTITY", "Gzip", "zstd", ""])
_SPACE = st.sampled_from(["", " ", "\t", "  "])


@given(st.lists(st.tuples(_SPACE, _ELEMENT, _SPACE), max_size=12))
def test_any_list_reads_as_its_non_identity_elements_or_is_refused(parts: list[tuple[str, str, str]]) -> None:
    value = ",".join(before + element + after for before, element, after in parts)
    expected = [e.lower() for _, e, _ in parts if e and e.lower() != "identity"]
    if len(expected) > MAX_CODINGS:
        with pytest.raises(CodingError):
            content_codings(value)
    else:
        assert content_codings(value) == expected


@given(st.text(max_size=200))
def test_any_value_gives_at_most_the_cap_of_codings_or_a_protocol_error(value: str) -> None:
    try:
        codings = content_codings(value)
    except CodingError:
        return
    assert len(codings) <= MAX_CODINGS and all(c and c == c.strip().lower() for c in codings)
