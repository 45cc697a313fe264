"""``BloomBitmap.add_hashes``'s loop, compiled by numba: test and set many keys' bits, key by key.

The batch tests millions of keys per checkpoint against its slices. In numpy each of a key's k
bit positions went through a dozen whole-array steps (about 0.4 µs per key at k = 11); compiled,
one pass over the keys does what ``BloomBitmap.add_hash`` does for each, in about 0.07 µs, and
without the GIL, so the batch's reading threads run beside it. Compiled once per machine and
kept in numba's cache (``__pycache__`` beside this file, or numba's user-wide cache where that is
read-only). Only the links batch imports this module (numba takes ~0.2 s to import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

_TOP = np.uint64(1 << 63)
_ALL = np.uint64((1 << 64) - 1)


@numba.njit(nogil=True, cache=True)
def test_and_set(bits: NDArray[np.uint8], m: int, hashes: int, lo: NDArray[np.uint64],
                 hi: NDArray[np.uint64], new: NDArray[np.bool_]) -> int:
    """Set the bits of each key (its hashes' halves ``lo``, ``hi``) in ``bits`` (the bitmap's
    bytes, bit i at ``1 << (i % 8)`` of byte ``i // 8``; ``m`` bits, ``hashes`` per key), in
    order, as ``add_hash`` does: ``new[j]`` True if key j found one of its bits unset. Returns
    how many did."""
    size = np.uint64(m)
    # add_hash reads the high half as a signed number: a negative one is (hi - 2**64) mod m.
    wrap = size - (_ALL % size + np.uint64(1)) % size
    count = 0
    for j in range(len(lo)):
        index = np.int64(lo[j] % size)
        step = hi[j] % size
        if hi[j] >= _TOP:
            step = (step + wrap) % size
        stride = np.int64(step)
        if stride == 0:  # a zero step would repeat one index
            stride = np.int64(1)
        fresh = False
        for _ in range(hashes):
            byte, bit = index >> 3, np.uint8(1 << (index & 7))
            if not bits[byte] & bit:
                bits[byte] |= bit
                fresh = True
            index += stride
            if index >= m:
                index -= m
        new[j] = fresh
        count += fresh
    return count
