"""Which slice holds a key is an on-disk contract: every slice on disk was filled with it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.links.slicing import MAX_SLICES, check_slice_count, slice_of, slices_of
from archiver.queues.bloom import hash_keys

# Computed once with the function as released; a change here breaks every archive's slices.
TABLE = {
    "http://example.com/": [0, 1, 1, 2, 425, 10524425],
    "http://www.site1.example/dir1/page1.html": [0, 0, 2, 5, 990, 3757990],
    "https://a.test:8443/x?y=1": [0, 0, 0, 2, 436, 322436],
    "\x00http://x.test\x00http://a.test": [0, 0, 0, 4, 784, 1774784],
    "http://xn--bcher-kva.example/": [0, 0, 0, 1, 436, 1905436],
}
COUNTS = [1, 2, 4, 7, 1000, MAX_SLICES]


@pytest.mark.parametrize(("key", "slices"), TABLE.items())
def test_the_slice_of_a_key_never_changes(key, slices):
    assert [slice_of(key, n) for n in COUNTS] == slices
    lo = hash_keys([key])[:, 0]
    assert [int(slices_of(lo, n)[0]) for n in COUNTS] == slices


@given(st.lists(st.text(max_size=40), max_size=50), st.integers(1, MAX_SLICES))
def test_many_keys_at_once_as_one_by_one(keys, slice_count):
    got = slices_of(hash_keys(keys)[:, 0], slice_count)
    assert got.tolist() == [slice_of(k, slice_count) for k in keys]


def test_keys_spread_evenly():
    counts = np.bincount(slices_of(hash_keys(f"http://s{n}.test/" for n in range(80_000))[:, 0], 8))
    assert counts.min() > 0.95 * 10_000 and counts.max() < 1.05 * 10_000   # ~3 standard deviations


@pytest.mark.parametrize("slice_count", [0, -1, MAX_SLICES + 1])
def test_a_slice_count_out_of_range_is_refused(slice_count):
    with pytest.raises(ValueError, match="a slice count must be 1 to"):
        check_slice_count(slice_count)
