"""The links batch's loops over millions of keys and URLs, compiled by numba: hashing keys
(strings, or site pairs joined on the fly), testing and setting their bits in a Bloom bitmap,
finding each URL's origin, the first appearance of each distinct number in an array, and writing
new URLs as inbox lines.

The links batch hashes and tests millions of keys per checkpoint. Key by key in Python (mmh3, one
bytes object per key) or in whole-array numpy steps (a dozen per bit position), each loop held the
GIL for most of its time; compiled, each is one pass over the keys (hashing about 0.04 µs per URL,
the bit work about 0.07 µs per key at k = 11), without the GIL, so the batch's reading threads and
its bit work run side by side. They are compiled once per machine and kept in numba's cache
(``__pycache__`` beside this file, or numba's user-wide cache where that is read-only). Only the
links batch imports this module: numba takes about 0.2 s to import and 0.3 s to load its cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numba
import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

_TOP = np.uint64(1 << 63)
_ALL = np.uint64((1 << 64) - 1)
# MurmurHash3 x64-128's constants (Austin Appleby's MurmurHash3.cpp, public domain).
_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)
_FMIX1, _FMIX2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_ADD1, _ADD2, _FIVE = np.uint64(0x52DCE729), np.uint64(0x38495AB5), np.uint64(5)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / the golden ratio: Fibonacci hashing's factor


def hash_strings(data: NDArray[np.uint8], offsets: NDArray[np.int64]) -> NDArray[np.uint64]:
    """``bloom.hash_keys`` (seed 0) of the keys ``data[offsets[j]:offsets[j + 1]]``, as arrow
    lays out a column of strings: shape (keys, 2), the low and the high 64 bits."""
    out = np.empty((max(len(offsets) - 1, 0), 2), dtype=np.uint64)
    _murmur3_x64_128(data, offsets, out)
    return out


@numba.njit(inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(inline="always")
def _fmix(k: np.uint64) -> np.uint64:
    k ^= k >> np.uint64(33)
    k *= _FMIX1
    k ^= k >> np.uint64(33)
    k *= _FMIX2
    return k ^ (k >> np.uint64(33))


@numba.njit(inline="always")
def _word(data: NDArray[np.uint8], at: int, n: int) -> np.uint64:
    """The ``n`` (at most 8) bytes at ``at`` as a little-endian number."""
    word = np.uint64(0)
    for i in range(n):
        word |= np.uint64(data[at + i]) << np.uint64(8 * i)
    return word


@numba.njit(inline="always")
def _murmur3(data: NDArray[np.uint8], at: int, end: int, out: NDArray[np.uint64], j: int) -> None:
    """MurmurHash3 x64-128, seed 0, of ``data[at:end]``, as ``mmh3.hash_bytes`` gives it (a test
    holds the two together): its two 64-bit halves in ``out[j]``."""
    length = np.uint64(end - at)
    h1, h2 = np.uint64(0), np.uint64(0)
    while end - at >= 16:
        k1, k2 = _word(data, at, 8) * _C1, _word(data, at + 8, 8) * _C2
        h1 ^= _rotl(k1, 31) * _C2
        h1 = (_rotl(h1, 27) + h2) * _FIVE + _ADD1
        h2 ^= _rotl(k2, 33) * _C1
        h2 = (_rotl(h2, 31) + h1) * _FIVE + _ADD2
        at += 16
    if end - at > 8:
        h2 ^= _rotl(_word(data, at + 8, end - at - 8) * _C2, 33) * _C1
    if end - at > 0:
        h1 ^= _rotl(_word(data, at, min(end - at, 8)) * _C1, 31) * _C2
    h1, h2 = h1 ^ length, h2 ^ length
    h1 += h2
    h2 += h1
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 += h2
    out[j, 0], out[j, 1] = h1, h2 + h1


@numba.njit(nogil=True, cache=True)
def _murmur3_x64_128(data: NDArray[np.uint8], offsets: NDArray[np.int64],
                     out: NDArray[np.uint64]) -> None:
    for j in range(len(offsets) - 1):
        _murmur3(data, offsets[j], offsets[j + 1], out, j)


def hash_pairs(first: tuple[NDArray[np.uint8], NDArray[np.int64]], first_rows: NDArray[np.intp],
               second: tuple[NDArray[np.uint8], NDArray[np.int64]],
               second_rows: NDArray[np.intp]) -> NDArray[np.uint64]:
    """``bloom.hash_keys`` (seed 0) of the keys ``"\\0" + first[i] + "\\0" + second[k]`` for each
    ``(i, k)`` of ``first_rows``, ``second_rows``, where ``first`` and ``second`` are columns of
    strings as ``hash_strings`` takes them (data, offsets); the keys are never made."""
    out = np.empty((len(first_rows), 2), dtype=np.uint64)
    _murmur3_pairs(first[0], first[1], first_rows.astype(np.int64), second[0], second[1],
                   second_rows.astype(np.int64), out)
    return out


@numba.njit(nogil=True, cache=True)
def _murmur3_pairs(first: NDArray[np.uint8], first_offsets: NDArray[np.int64],
                   first_rows: NDArray[np.int64], second: NDArray[np.uint8],
                   second_offsets: NDArray[np.int64], second_rows: NDArray[np.int64],
                   out: NDArray[np.uint64]) -> None:
    longest = 0
    for j in range(len(first_rows)):
        longest = max(longest, 2 + first_offsets[first_rows[j] + 1] - first_offsets[first_rows[j]]
                      + second_offsets[second_rows[j] + 1] - second_offsets[second_rows[j]])
    key = np.zeros(longest, dtype=np.uint8)  # each key written here in turn, then hashed
    for j in range(len(first_rows)):
        at, end = first_offsets[first_rows[j]], first_offsets[first_rows[j] + 1]
        key[0] = 0
        key[1:1 + end - at] = first[at:end]
        size = 2 + end - at
        key[size - 1] = 0
        at, end = second_offsets[second_rows[j]], second_offsets[second_rows[j] + 1]
        key[size:size + end - at] = second[at:end]
        _murmur3(key, 0, size + end - at, out, j)


def origin_lengths(data: NDArray[np.uint8], offsets: NDArray[np.int64]) -> NDArray[np.int32]:
    """The length of each URL's origin (its text up to the first '/' from the 9th character on,
    or all of it) of a column of URLs as ``hash_strings`` takes it."""
    out = np.empty(max(len(offsets) - 1, 0), dtype=np.int32)
    _origin_lengths(data, offsets, out)
    return out


@numba.njit(nogil=True, cache=True)
def _origin_lengths(data: NDArray[np.uint8], offsets: NDArray[np.int64],
                    out: NDArray[np.int32]) -> None:
    for j in range(len(offsets) - 1):
        at, end = offsets[j] + 8, offsets[j + 1]
        while at < end and data[at] != 47:  # '/'
            at += 1
        out[j] = min(at, end) - offsets[j]


def first_appearances(values: NDArray[np.int64]) -> NDArray[np.intp]:
    """The index of each distinct value's first appearance in ``values``, in order: what arrow's
    ``unique`` keeps, found by a hash table of indexes (a tenth of its time)."""
    size = 2
    while size < 2 * len(values):
        size *= 2
    out = np.empty(len(values), dtype=np.intp)
    found = _first_appearances(values, np.zeros(size, dtype=np.int64), size.bit_length() - 1, out)
    return out[:found]


@numba.njit(nogil=True, cache=True)
def _first_appearances(values: NDArray[np.int64], table: NDArray[np.int64], bits: int,
                       out: NDArray[np.intp]) -> int:
    # Each slot holds 1 + the index of a value's first appearance (0: empty); a value's first
    # slot is its Fibonacci hash, then the next ones (linear probing, at most half full).
    shift, mask = np.uint64(64 - bits), len(table) - 1
    found = 0
    for j in range(len(values)):
        slot = np.int64((np.uint64(values[j]) * _GOLDEN) >> shift)
        while table[slot] != 0 and values[table[slot] - 1] != values[j]:
            slot = (slot + 1) & mask
        if table[slot] == 0:
            table[slot] = j + 1
            out[found] = j
            found += 1
    return found


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


@numba.njit(nogil=True, cache=True)
def place_lines(data: NDArray[np.uint8], offsets: NDArray[np.int64], at: NDArray[np.int64],
                head: NDArray[np.uint8], tail: NDArray[np.uint8], out: NDArray[np.uint8]) -> None:
    """Write each string ``j`` of a column (``data``, ``offsets``, as ``hash_strings`` takes it)
    as a line ``head + string + tail`` at ``out[at[j]:]``."""
    for j in range(len(offsets) - 1):
        to = at[j]
        for i in range(len(head)):
            out[to + i] = head[i]
        to += len(head)
        for i in range(offsets[j], offsets[j + 1]):
            out[to] = data[i]
            to += 1
        for i in range(len(tail)):
            out[to + i] = tail[i]


# The loops numba keeps in its cache (the others are inlined into them).
_CACHED = (_murmur3_x64_128, _murmur3_pairs, _origin_lengths, _first_appearances, test_and_set,
           place_lines)


def compilations() -> int:
    """How many loops this process compiled, not finding them in numba's cache."""
    return sum(sum(loop.stats.cache_misses.values()) for loop in _CACHED)


def cache_path() -> str:
    """Where numba keeps the compiled loops (``NUMBA_CACHE_DIR``, else beside this file or in the
    user's cache)."""
    return str(_murmur3_x64_128.stats.cache_path)
