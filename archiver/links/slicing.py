"""Which slice of the global bitmap holds a key: a stable on-disk contract.

The links batch splits its global Bloom bitmap into ``slice_count`` slices (``links.slices``),
each a bitmap of its own (archiver.links.slices). A key (a normalised URL, or a site pair's key)
belongs to slice

    ``(lo >> 40) % slice_count``

where ``lo`` is the low 64 bits of the key's 128-bit MurmurHash3 (x64, seed 0, unsigned: the
first 8 bytes of ``mmh3.hash_bytes(key)``, little-endian), the very hash the slice's bitmap then
uses to place the key's bits (archiver.queues.bloom), so no second hash is computed.

Why bits 40-63 do not bias a slice's bit positions: inside a slice of m bits a key's first bit
is ``lo mod m`` and its step comes from the high 64 bits. Choosing the slice fixes only bits
40-63 of ``lo``; its bits 0-39, uniform and independent of the slice, add a uniform value below
2**40 to a constant, so ``lo mod m`` stays uniform up to a relative bias of ``m / 2**40`` (2**40
is q * m + r: r residues get q + 1 of the values, the others q). A slice of 1 Gbit (67 million
URLs at 16 bits each) sees a bias under 0.1 %; the step is not constrained at all. The slices
themselves get shares of the keys that differ by at most ``slice_count / 2**24`` (a 24-bit value
taken mod ``slice_count``).

Every existing slice was filled with this function: changing it, or the slice count, means
rebuilding the slices (``archiver links reshard --slices N``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mmh3

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

SLICE_FUNCTION = "(low 64 bits of mmh3_x64_128(key, seed 0) >> 40) % partitions, v1"
MAX_SLICES = 1 << 24  # the bits 40-63 of lo give 2**24 values
_SHIFT = 40


def check_slice_count(slice_count: int) -> int:
    """``slice_count`` if it is a slice count this function can serve, else ValueError."""
    if not 1 <= slice_count <= MAX_SLICES:
        raise ValueError(f"a slice count must be 1 to {MAX_SLICES}, got {slice_count}")
    return slice_count


def slices_of(lo: NDArray[np.uint64], slice_count: int) -> NDArray[np.intp]:
    """The slice of each key, given the low halves of the keys' hashes (``bloom.hash_keys``)."""
    import numpy as np  # numpy only where the batch runs, as in archiver.queues.bloom

    check_slice_count(slice_count)
    return ((lo >> np.uint64(_SHIFT)) % np.uint64(slice_count)).astype(np.intp)


def slice_of(key: str, slice_count: int) -> int:
    """The slice of one key (what ``slices_of`` computes for many)."""
    check_slice_count(slice_count)
    low = int.from_bytes(mmh3.hash_bytes(key)[:8], "little")
    return (low >> _SHIFT) % slice_count
