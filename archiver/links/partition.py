"""Which slice of the global bitmap holds a key: a stable on-disk contract.

The links batch splits its global Bloom bitmap into ``partitions`` slices (``links.slices``),
each a bitmap of its own (archiver.links.slices). A key (a normalised URL, or a site pair's key)
belongs to slice

    ``(lo >> 40) % partitions``

where ``lo`` is the low 64 bits of the key's 128-bit MurmurHash3 (x64, seed 0, unsigned: the
first 8 bytes of ``mmh3.hash_bytes(key)``, little-endian), the very hash the slice's bitmap then
uses to place the key's bits (archiver.queues.bloom), so no second hash is computed.

Why bits 40-63 do not bias a slice's bit positions: inside a slice of m bits a key's first bit
is ``lo mod m`` and its step comes from the high 64 bits. Choosing the slice fixes only bits
40-63 of ``lo``; its bits 0-39, uniform and independent of the slice, add a uniform value below
2**40 to a constant, so ``lo mod m`` stays uniform up to a relative bias of ``m / 2**40`` (2**40
is q * m + r: r residues get q + 1 of the values, the others q). A slice of 1 Gbit (67 million
URLs at 16 bits each) sees a bias under 0.1 %; the step is not constrained at all. The slices
themselves get shares of the keys that differ by at most ``partitions / 2**24`` (a 24-bit value
taken mod ``partitions``).

Every existing slice was filled with this function: changing it, or the slice count, means
rebuilding the slices (``archiver links reshard --slices N``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mmh3

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

PARTITION_FUNCTION = "(low 64 bits of mmh3_x64_128(key, seed 0) >> 40) % partitions, v1"
MAX_PARTITIONS = 1 << 24  # the bits 40-63 of lo give 2**24 values
_SHIFT = 40


def check_partitions(partitions: int) -> int:
    """``partitions`` if it is a slice count this function can serve, else ValueError."""
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions must be 1 to {MAX_PARTITIONS}, got {partitions}")
    return partitions


def partitions_of(lo: NDArray[np.uint64], partitions: int) -> NDArray[np.intp]:
    """The slice of each key, given the low halves of the keys' hashes (``bloom.hash_keys``)."""
    import numpy as np  # numpy only where the batch runs, as in archiver.queues.bloom

    check_partitions(partitions)
    return ((lo >> np.uint64(_SHIFT)) % np.uint64(partitions)).astype(np.intp)


def partition_of(key: str, partitions: int) -> int:
    """The slice of one key (what ``partitions_of`` computes for many)."""
    check_partitions(partitions)
    low = int.from_bytes(mmh3.hash_bytes(key)[:8], "little")
    return (low >> _SHIFT) % partitions
