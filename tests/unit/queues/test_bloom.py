import io
import math
import random

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.queues.bloom import (
    HEADER_SIZE,
    BloomBitmap,
    GrowingBloom,
    LayerHeader,
    capacity,
    false_positive_rate,
    hash_keys,
    optimal_hashes,
    read_header,
)
from archiver.queues.bloomkernel import first_appearances, hash_pairs, hash_strings, origin_lengths
from tests.support.fuzzing import examples


def keys(prefix: str, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{prefix}/{rng.getrandbits(64):016x}" for _ in range(n)]


def measured_fp(bloom: BloomBitmap | GrowingBloom, probes: list[str]) -> float:
    return sum(key in bloom for key in probes) / len(probes)


def test_sizing_math_known_values():
    assert false_positive_rate(16_000, 1_000, 10) == pytest.approx(4.66e-4, rel=0.01)
    assert false_positive_rate(16_000, 1_000, 11) == pytest.approx(4.59e-4, rel=0.01)
    assert optimal_hashes(16) == 11
    assert optimal_hashes(8) == 6
    assert false_positive_rate(8_000, 1_000, optimal_hashes(8)) == pytest.approx(0.0216, rel=0.01)
    assert optimal_hashes(0.1) == 1
    assert false_positive_rate(1_000, 0, 5) == 0


def test_capacity_is_the_last_count_within_the_bound():
    for bits, hashes, max_fp in [(262_144, 11, 5e-4), (65_536, 7, 1e-2), (1_000, 3, 0.1)]:
        n = capacity(bits, hashes, max_fp)
        assert false_positive_rate(bits, n, hashes) <= max_fp
        assert false_positive_rate(bits, n + 1, hashes) > max_fp
    # The default first layer (256 Kbit at 5e-4, the first half of a 1e-3 budget): ~16.5 k URLs.
    assert 16_000 < capacity(262_144, 11, 5e-4) < 17_000


def test_add_is_test_and_set():
    bloom = BloomBitmap(1_024, 4)
    assert bloom.add("http://a/") is True
    assert bloom.add("http://a/") is False
    assert "http://a/" in bloom
    assert "http://b/" not in bloom
    assert bloom.count == 1
    assert bloom.fp_rate() == false_positive_rate(1_024, 1, 4)


def test_layer_at_design_capacity_meets_its_bound():
    bits, hashes, max_fp = 65_536, 7, 0.01  # 7 = ceil(log2(1 / max_fp)), the best k here
    n = capacity(bits, hashes, max_fp)
    bloom = BloomBitmap(bits, hashes, seed=7)
    added = keys("in", n, seed=1)
    assert all(bloom.add(key) for key in added[:100])
    for key in added[100:]:
        bloom.add(key)
    assert all(key in bloom for key in added)  # no false negatives
    # count leaves out the few keys that were false positives when added.
    assert n - 100 < bloom.count < n
    assert bloom.fp_rate() == pytest.approx(max_fp, rel=0.02)
    # 100 k probes: about 1 000 expected hits, one standard deviation ~3 %.
    fp = measured_fp(bloom, keys("out", 100_000, seed=2))
    assert 0.85 * max_fp < fp < 1.15 * max_fp


def test_growing_bloom_stays_under_max_fp_across_growths():
    max_fp = 0.01
    bloom = GrowingBloom(initial_bits=4_096, max_fp=max_fp, seed=3)
    added: list[str] = []
    new = 0
    source = iter(keys("in", 10_000, seed=4))
    probes = keys("out", 100_000, seed=5)
    for layers in (2, 3, 4):
        while len(bloom.layers) < layers:
            key = next(source)
            added.append(key)
            new += bloom.add(key)
        # Just after a growth every older layer is full: the worst point of the compound rate.
        estimate = bloom.fp_rate()
        assert estimate < max_fp
        fp = measured_fp(bloom, probes)
        assert fp < max_fp
        assert fp == pytest.approx(estimate, rel=0.15)
    assert [layer.bits for layer in bloom.layers] == [4_096, 16_384, 65_536, 262_144]
    assert [layer.hashes for layer in bloom.layers] == [8, 9, 10, 11]
    assert bloom.bits == sum(layer.bits for layer in bloom.layers)
    assert bloom.count == new
    assert all(key in bloom for key in added)
    assert not any(bloom.add(key) for key in added)


def test_growing_bloom_layer_shares_sum_to_max_fp():
    bloom = GrowingBloom(initial_bits=2_048, max_fp=1e-3)
    i = 0
    while len(bloom.layers) < 6:
        bloom.add(f"k{i}")
        i += 1
    full = bloom.layers[:-1]
    # Full layers sit at their shares 1e-3 * 0.5**(i+1): 5e-4, 2.5e-4, ... summing to < 1e-3.
    for n, layer in enumerate(full):
        assert layer.fp_rate() == pytest.approx(1e-3 * 0.5 ** (n + 1), rel=0.05)
    assert bloom.fp_rate() < 1e-3
    assert bloom.fp_rate() == pytest.approx(1 - math.prod(1 - x.fp_rate() for x in full), rel=0.01)


def round_trip(layer: BloomBitmap) -> BloomBitmap:
    buffer = io.BytesIO()
    layer.write(buffer)
    buffer.seek(0)
    return BloomBitmap.read(buffer)


def test_layer_round_trip():
    bloom = BloomBitmap(1_001, 5, seed=99)  # not a whole number of bytes
    for key in keys("k", 100, seed=6):
        bloom.add(key)
    copy = round_trip(bloom)
    assert (copy.bits, copy.hashes, copy.seed, copy.count) == (1_001, 5, 99, bloom.count)
    probes = keys("k", 100, seed=6) + keys("p", 1_000, seed=7)
    assert [key in copy for key in probes] == [key in bloom for key in probes]
    assert [copy.add(key) for key in probes] == [bloom.add(key) for key in probes]


def test_read_rejects_damage():
    buffer = io.BytesIO()
    BloomBitmap(64, 3).write(buffer)
    layer = buffer.getvalue()
    for bad in (layer[:-1], layer + b"\0", b"XXXX" + layer[4:], layer[:10]):
        with pytest.raises(ValueError):
            BloomBitmap.read(io.BytesIO(bad))


def test_bad_parameters():
    for args in ((0, 3), (64, 0), (64, 256), (64, 3, -1)):
        with pytest.raises(ValueError):
            BloomBitmap(*args)
    for kwargs in ({"max_fp": 0}, {"max_fp": 1}, {"max_fp": 1e-3, "growth": 0}):
        with pytest.raises(ValueError):
            GrowingBloom(initial_bits=1024, **kwargs)


# -- many keys at once -------------------------------------------------------------------------

@settings(max_examples=examples(100))
@given(st.lists(st.one_of(st.text(max_size=30), st.binary(max_size=30)), max_size=40),
       st.integers(0, 0xFFFFFFFF))
def test_bulk_hashes_are_hash128_halves(keys, seed):
    halves = hash_keys(keys, seed)
    assert halves.shape == (len(keys), 2) and halves.dtype == np.uint64
    for key, (lo, hi) in zip(keys, halves.tolist(), strict=True):
        h = mmh3.hash128(key, seed, True, signed=False)
        assert (lo, hi) == (h & (2**64 - 1), h >> 64)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.binary(max_size=70), max_size=40), st.binary(max_size=20))
def test_compiled_hashes_are_mmh3s(keys, before):
    # Every length around the 8- and 16-byte blocks and tails, from any place in a buffer.
    data = np.frombuffer(before + b"".join(keys), dtype=np.uint8)
    offsets = np.cumsum([len(before), *map(len, keys)], dtype=np.int64)
    got = hash_strings(data, offsets)
    assert got.shape == (len(keys), 2) and got.dtype == np.uint64
    assert [lo.to_bytes(8, "little") + hi.to_bytes(8, "little") for lo, hi in got.tolist()] == \
        [mmh3.hash_bytes(key) for key in keys]


def _column(values: list[bytes], before: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Values laid out as hash_strings takes them, after ``before`` in the buffer."""
    data = np.frombuffer(before + b"".join(values), dtype=np.uint8)
    return data, np.cumsum([len(before), *map(len, values)], dtype=np.int64)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=10),
       st.lists(st.binary(max_size=40), min_size=1, max_size=10),
       st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=30), st.binary(max_size=9))
def test_compiled_pair_hashes_are_those_of_the_joined_keys(first, second, pairs, before):
    pairs = [(i % len(first), k % len(second)) for i, k in pairs]
    rows = [np.array(side, dtype=np.intp) for side in zip(*pairs, strict=True)] or \
        [np.zeros(0, dtype=np.intp)] * 2
    got = hash_pairs(_column(first, before), rows[0], _column(second, before[:3]), rows[1])
    assert got.shape == (len(pairs), 2) and got.dtype == np.uint64
    assert [lo.to_bytes(8, "little") + hi.to_bytes(8, "little") for lo, hi in got.tolist()] == \
        [mmh3.hash_bytes(b"\0" + first[i] + b"\0" + second[k]) for i, k in pairs]


@given(st.lists(st.from_regex(r"https?://[a-z0-9.:-]{0,20}(/[a-z/]{0,10})?", fullmatch=True),
                max_size=20), st.binary(max_size=9))
def test_origin_lengths_end_at_the_first_slash_after_the_scheme(found, before):
    got = origin_lengths(*_column([url.encode() for url in found], before))
    assert got.tolist() == [len(url) if url.find("/", 8) < 0 else url.find("/", 8) for url in found]


@given(st.lists(st.integers(-2**63, 2**63 - 1) | st.sampled_from([0, -1, 7, 2**40, -2**63]),
                max_size=300))
def test_first_appearances_keep_each_distinct_value_once_in_order(values):
    got = first_appearances(np.array(values, dtype=np.int64))
    first: dict[int, int] = {}
    for at, value in enumerate(values):
        first.setdefault(value, at)
    assert got.dtype == np.intp and got.tolist() == list(first.values())


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.sampled_from([f"k{n}" for n in range(40)]) | st.text(max_size=8), max_size=60),
       st.integers(1, 5_000), st.integers(1, 12), st.integers(0, 3))
def test_add_hashes_is_add_key_by_key(keys, bits, hashes, seed):
    one_by_one, at_once = BloomBitmap(bits, hashes, seed), BloomBitmap(bits, hashes, seed)
    for key in keys[:3]:                                   # some bits set before
        one_by_one.add(key)
        at_once.add(key)
    expected = [one_by_one.add(key) for key in keys[3:]]
    halves = hash_keys(keys[3:], seed)
    assert at_once.add_hashes(halves[:, 0], halves[:, 1]).tolist() == expected
    assert at_once._array == one_by_one._array              # the same bits
    assert at_once.count == one_by_one.count


@pytest.mark.parametrize("bits", [1, 7, 64, 100_003])
def test_add_hashes_places_bits_as_add_hash_for_any_high_half(bits):
    # The high half is read as signed: its top bit set or not, a step of 0, a start next to m.
    his = [0, 1, bits, 2**63 - 1, 2**63, 2**63 + 5, 2**64 - bits, 2**64 - 1]
    los = [0, bits - 1, 2**64 - 1, 12345]
    hashes = [(lo, hi) for lo in los for hi in his]
    one_by_one, at_once = BloomBitmap(bits, 3), BloomBitmap(bits, 3)
    # As add gives it: hash128 as a signed number.
    expected = [one_by_one.add_hash(lo | (hi - (hi >> 63 << 64)) << 64) for lo, hi in hashes]
    got = at_once.add_hashes(np.array([lo for lo, _ in hashes], dtype=np.uint64),
                             np.array([hi for _, hi in hashes], dtype=np.uint64)).tolist()
    assert got == expected and at_once._array == one_by_one._array


def test_add_many_is_add_hashes_on_the_keys_hashes():
    bloom = BloomBitmap(100_003, 7)
    keys = [f"http://a.test/{n % 500}" for n in range(1_000)]
    assert bloom.add_many(keys) == [n < 500 for n in range(1_000)]
    assert bloom.count == 500 and all(key in bloom for key in keys)
    assert bloom.add_many([]) == []


def test_a_header_says_what_the_layer_holds():
    bloom = BloomBitmap(1_001, 5, seed=9)
    bloom.add_many(["a", "b"])
    buffer = io.BytesIO()
    bloom.write(buffer)
    assert read_header(buffer.getvalue()[:HEADER_SIZE]) == LayerHeader(1_001, 5, 9, 2)
    with pytest.raises(ValueError, match="truncated header"):
        read_header(buffer.getvalue()[:HEADER_SIZE - 1])


def test_an_empty_bitmap_has_a_false_positive_rate_of_plain_zero():
    assert f"{false_positive_rate(1 << 20, 0, 11):.2e}" == "0.00e+00"
