"""Bloom bitmaps for "have we seen this URL?" on bitarray, with mmh3 double hashing.

One 128-bit MurmurHash3 value per key gives h1 (low 64 bits) and h2 (high 64 bits, read as a signed
number: the bitmaps on disk were set that way); the k bit indexes are ``(h1 + i*h2) mod m`` for i in
0..k-1 (Kirsch and Mitzenmacher, "Less Hashing, Same Performance", 2006: two hashes lose nothing
asymptotically against k independent ones). ``BloomBitmap.add_hashes`` does this for many keys at
once in compiled code, given their hashes from ``hash_keys``.
``GrowingBloom`` stacks layers as in Almeida et al., "Scalable Bloom Filters" (2007), so a site
that outgrows its first 256 Kbit keeps its false-positive bound.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

import mmh3
from bitarray import bitarray

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_hash128 = mmh3.hash128
_LOW64 = (1 << 64) - 1

# Serialized layer: magic, bits, hashes, seed, count, then the bits (little-endian, zero-padded).
_LAYER = struct.Struct("<4sQBIQ")
_LAYER_MAGIC = b"ABL1"
# Each new layer gets this fraction r of the previous layer's fp share, so the shares
# max_fp * (1 - r) * r**i sum to max_fp (Almeida et al. 2007, section 4). With r = 0.5 the first
# layer, the only one most sites ever have, gets half the budget, and each later layer needs
# about one more hash (k is about log2(1 / share)).
_TIGHTENING = 0.5


def optimal_hashes(bits_per_item: float) -> int:
    """The k that minimises the false-positive rate at ``bits_per_item`` bits per key: ln2 * m/n."""
    return max(1, round(math.log(2) * bits_per_item))


def false_positive_rate(bits: int, items: int, hashes: int) -> float:
    """Expected false-positive rate (1 - e^(-kn/m))^k of ``bits`` bits holding ``items`` keys."""
    return abs(math.expm1(-hashes * items / bits)) ** hashes  # abs: no "-0.00e+00" when empty


def capacity(bits: int, hashes: int, max_fp: float) -> int:
    """How many keys ``bits`` bits with ``hashes`` hashes hold before the fp rate passes max_fp."""
    return math.floor(-bits / hashes * math.log1p(-(max_fp ** (1 / hashes))))


def _best_hashes(bits: int, max_fp: float) -> int:
    """The k giving the most capacity at ``max_fp``: an integer next to log2(1/max_fp)."""
    ideal = -math.log2(max_fp)
    candidates = {max(1, math.floor(ideal)), max(1, math.ceil(ideal))}
    return max(sorted(candidates), key=lambda k: capacity(bits, k, max_fp))


class BloomBitmap:
    """One fixed-size Bloom layer."""

    __slots__ = ("_array", "_range", "bits", "count", "hashes", "seed")

    def __init__(self, bits: int, hashes: int, seed: int = 0) -> None:
        if not 1 <= bits < 1 << 62 or not 1 <= hashes <= 255 or not 0 <= seed <= 0xFFFFFFFF:
            raise ValueError(f"bad Bloom parameters: bits={bits} hashes={hashes} seed={seed}")
        self.bits = bits
        self.hashes = hashes
        self.seed = seed
        self.count = 0
        self._array = bitarray(bits, endian="little")
        self._range = range(hashes)

    def add(self, key: str) -> bool:
        """Set the key's bits; True if the key was new (one of its bits was still unset)."""
        return self.add_hash(_hash128(key, self.seed, True, False))

    def __contains__(self, key: str) -> bool:
        return self.has_hash(_hash128(key, self.seed, True, False))

    def add_many(self, keys: list[str]) -> list[bool]:
        """``[add(k) for k in keys]``, the bit work compiled (``add_hashes``)."""
        halves = hash_keys(keys, self.seed)
        return self.add_hashes(halves[:, 0], halves[:, 1]).tolist()

    def add_hashes(self, lo: NDArray[np.uint64], hi: NDArray[np.uint64]) -> NDArray[np.bool_]:
        """Test and set many keys given their 128-bit hashes' halves (``hash_keys``, or
        ``bloomkernel.hash_strings``): True where a key was new. Exactly ``add`` key by key, in
        order (so a hash repeated is new at its first place only), in compiled code
        (archiver.queues.bloomkernel)."""
        import numpy as np  # see hash_keys

        from archiver.queues.bloomkernel import test_and_set

        new = np.zeros(len(lo), dtype=bool)
        bits = np.frombuffer(memoryview(self._array), dtype=np.uint8)  # bit i is 1 << (i % 8)
        self.count += test_and_set(bits, self.bits, self.hashes, np.ascontiguousarray(lo, np.uint64),
                                   np.ascontiguousarray(hi, np.uint64), new)
        return new

    def add_hash(self, h: int) -> bool:
        """``add`` given ``h = mmh3.hash128(key, seed, signed=False)``; a stack's layers share h."""
        m, array = self.bits, self._array
        index = (h & _LOW64) % m
        # A step of 0 would give one index k times; the chance is 1/m, the fix costs nothing.
        step = (h >> 64) % m or 1
        new = False
        for _ in self._range:
            if not array[index]:
                array[index] = 1
                new = True
            index = (index + step) % m
        if new:
            self.count += 1
        return new

    def has_hash(self, h: int) -> bool:
        """``in`` given the key's 128-bit hash, as ``add_hash``; stops at the first unset bit."""
        m, array = self.bits, self._array
        index = (h & _LOW64) % m
        step = (h >> 64) % m or 1
        for _ in self._range:
            if not array[index]:
                return False
            index = (index + step) % m
        return True

    def fp_rate(self) -> float:
        """Estimated false-positive rate at the current count."""
        return false_positive_rate(self.bits, self.count, self.hashes)

    def write(self, f: BinaryIO) -> None:
        """Write the layer (a header, then the bits) to ``f`` without a copy of the bits in memory."""
        f.write(_LAYER.pack(_LAYER_MAGIC, self.bits, self.hashes, self.seed, self.count))
        self._array.tofile(f)

    @classmethod
    def read(cls, f: BinaryIO) -> BloomBitmap:
        """Read what ``write`` wrote; ValueError if ``f`` holds anything else or is cut short."""
        bits, hashes, seed, count = read_header(f.read(HEADER_SIZE))
        layer = cls.__new__(cls)
        layer.bits, layer.hashes, layer.seed, layer.count = bits, hashes, seed, count
        layer._range = range(hashes)
        array = bitarray(endian="little")
        try:
            array.fromfile(f, (bits + 7) // 8)
        except EOFError:
            raise ValueError("Bloom layer: truncated bits") from None
        if f.read(1):
            raise ValueError("Bloom layer: bytes after the bits")
        del array[bits:]
        layer._array = array
        return layer


class LayerHeader(NamedTuple):
    """What a saved layer's header says: its size, hash count, seed and keys."""

    bits: int
    hashes: int
    seed: int
    keys: int


HEADER_SIZE = _LAYER.size


def read_header(header: bytes) -> LayerHeader:
    """The header at the start of what ``BloomBitmap.write`` wrote (its first ``HEADER_SIZE``
    bytes); ValueError if it is cut short or not a layer's."""
    if len(header) < _LAYER.size:
        raise ValueError("Bloom layer: truncated header")
    magic, bits, hashes, seed, count = _LAYER.unpack(header[:_LAYER.size])
    if magic != _LAYER_MAGIC:
        raise ValueError(f"Bloom layer: bad magic {bytes(magic)!r}")
    return LayerHeader(bits, hashes, seed, count)


def hash_keys(keys: Iterable[str | bytes], seed: int = 0) -> NDArray[np.uint64]:
    """The 128-bit MurmurHash3 (x64) of each key (a string is hashed as its UTF-8 bytes) as an
    array of shape (keys, 2): the low and the high 64 bits, unsigned; ``add_hashes`` takes the
    two columns."""
    # Imported here: only the external-link batch needs numpy, and it would add ~15 MiB to
    # every crawler process, whose per-site bitmaps add one key at a time.
    import numpy as np

    digest = mmh3.hash_bytes if seed == 0 else partial(mmh3.hash_bytes, seed=seed)
    return np.frombuffer(b"".join(map(digest, keys)), dtype="<u8").reshape(-1, 2)


class GrowingBloom:
    """A stack of Bloom layers that grows when the newest one is full ("scalable Bloom filter")."""

    __slots__ = (
        "_capacity",
        "_newest",
        "_older",
        "count",
        "growth",
        "initial_bits",
        "layers",
        "max_fp",
        "seed",
    )

    def __init__(
        self, initial_bits: int, max_fp: float, growth: int = 4, seed: int = 0
    ) -> None:
        if not 0 < max_fp < 1 or growth < 1:
            raise ValueError(f"bad GrowingBloom parameters: max_fp={max_fp} growth={growth}")
        self.initial_bits = initial_bits
        self.max_fp = max_fp
        self.growth = growth
        self.seed = seed
        self.count = 0
        self.layers: list[BloomBitmap] = []
        self._grow()

    def _layer_shape(self, i: int) -> tuple[int, int, int]:
        """Bits, hashes and capacity of layer ``i``, whose fp share is max_fp * (1 - r) * r**i."""
        bits = self.initial_bits * self.growth**i
        share = self.max_fp * (1 - _TIGHTENING) * _TIGHTENING**i
        hashes = _best_hashes(bits, share)
        return bits, hashes, max(1, capacity(bits, hashes, share))

    def _grow(self) -> None:
        bits, hashes, self._capacity = self._layer_shape(len(self.layers))
        self._older = tuple(self.layers)
        self._newest = BloomBitmap(bits, hashes, self.seed)
        self.layers.append(self._newest)

    def add(self, key: str) -> bool:
        """Add the key; True if it was in no layer. A full newest layer gets a larger successor."""
        h = _hash128(key, self.seed, True, False)
        for layer in self._older:
            if layer.has_hash(h):
                return False
        newest = self._newest
        if not newest.add_hash(h):
            return False
        self.count += 1
        if newest.count >= self._capacity:
            self._grow()
        return True

    def __contains__(self, key: str) -> bool:
        h = _hash128(key, self.seed, True, False)
        for layer in self.layers:  # noqa: SIM110 - any(genexpr) costs ~0.4 µs more
            if layer.has_hash(h):
                return True
        return False

    @property
    def bits(self) -> int:
        return sum(layer.bits for layer in self.layers)

    def fp_rate(self) -> float:
        """Compound estimate: a key is a false positive if any layer says yes."""
        return 1 - math.prod(1 - layer.fp_rate() for layer in self.layers)

