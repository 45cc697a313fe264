"""The relevance model (archiver.web.relevance): hashed word features, the score, and the model
file, whose every damaged form is refused with a ModelError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.relevance import (
    FEATURES,
    ModelError,
    RelevanceModel,
    features_of,
    model_bytes,
    parse_model,
    words_of,
)
from archiver.web.textquery import folded_words
from tests.support.fuzzing import examples


def small_model(bias: float = 0.25) -> RelevanceModel:
    weights = np.random.default_rng(7).normal(size=64).astype(np.float32)
    return RelevanceModel(weights, bias, seed=5, trained={"documents": {"relevant": 3}})


@settings(max_examples=examples(200))
@given(st.text())
def test_words_are_the_full_text_index_words(text):
    assert [w.decode() if isinstance(w, bytes) else w for w in words_of(text)] == folded_words(text)


@settings(max_examples=examples(100))
@given(st.text(st.characters(max_codepoint=127)))
def test_ascii_words_take_the_byte_path_and_split_as_the_regex(text):
    words = words_of(text)
    assert all(isinstance(w, bytes) for w in words)
    assert [w.decode() for w in words] == folded_words(text)


def test_features_are_unique_slots_of_unit_length_counted_logarithmically():
    slots, values = features_of("Comet comet COMET orbit, orbit; telescope!", 1024, 0)
    assert list(slots) == sorted(set(slots)) and len(slots) == 3
    assert np.isclose(float(values @ values), 1.0)
    by_count = sorted(values)
    assert np.isclose(by_count[2] / by_count[0], 1 + np.log(3))  # comet x3 vs telescope x1
    assert np.isclose(by_count[1] / by_count[0], 1 + np.log(2))
    assert all(0 <= s < 1024 for s in slots)
    empty = features_of("... ---", 1024, 0)
    assert len(empty[0]) == len(empty[1]) == 0
    # The seed moves the slots; case and accents do not.
    assert list(features_of("comet", FEATURES, 1)[0]) != list(features_of("comet", FEATURES, 2)[0])
    assert list(features_of("Café", 1024, 0)[0]) == list(features_of("cafe", 1024, 0)[0])


def test_score_is_the_logistic_of_the_weighted_words():
    weights = np.zeros(FEATURES, dtype=np.float32)
    slots, _ = features_of("nebula", FEATURES, 0)
    weights[slots] = 4.0
    model = RelevanceModel(weights, -1.0)
    assert model.score("nebula") == pytest.approx(1 / (1 + np.exp(-3.0)))
    assert model.score("soup") == pytest.approx(1 / (1 + np.exp(1.0)))
    assert model.score("") == model.score("soup")
    assert model.score("nebula nebula soup") > model.score("soup soup nebula") > model.score("soup")
    assert RelevanceModel(weights, -1e6).score("nebula") == 0.0


def test_model_file_round_trip():
    model = small_model()
    data = model_bytes(model)
    assert data.startswith(b"archiver-relevance 1 crc32=")
    again = parse_model(data)
    assert np.array_equal(again.weights, model.weights)
    assert (again.bias, again.seed, again.trained) == (model.bias, model.seed, model.trained)
    assert again.score("comet orbit") == model.score("comet orbit")
    assert model_bytes(again) == data


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: b"PK\x03\x04" + d, "not a relevance model"),
    (lambda d: d.replace(b"relevance 1", b"relevance 2", 1), "format '2' is not supported"),
    (lambda d: d.replace(b" crc32=", b" crc=", 1), "no checksum"),
    (lambda d: d[:-4], "does not match its checksum"),
    (lambda d: d[:25], "not a relevance model"),
])
def test_damaged_files_are_refused_with_the_reason(edit, message):
    with pytest.raises(ModelError, match=message):
        parse_model(edit(model_bytes(small_model())))


def _with_checksum(rest: bytes) -> bytes:
    import zlib
    return b"archiver-relevance 1 crc32=%08x\n" % zlib.crc32(rest) + rest


@pytest.mark.parametrize(("rest", "message"), [
    (b'{"features": 2, "seed": 0, "bias": 0, "trained": {}}' + b"\x00" * 8, "cut short"),
    (b"[1]\n", "not a JSON object"),
    (b"{nope\n", "not JSON"),
    (b"[" * 100_000 + b"\n", "not JSON"),
    (b'{"features": 2, "seed": 0, "bias": 0}\n' + b"\x00" * 8, "lacks 'trained'"),
    (b'{"features": 0, "seed": 0, "bias": 0, "trained": {}}\n', "'features' is out of range"),
    (b'{"features": 2, "seed": 0, "bias": NaN, "trained": {}}\n' + b"\x00" * 8, "'bias'"),
    (b'{"features": 2, "seed": 0, "bias": 0, "trained": {}}\n' + b"\x00" * 4, "need 8"),
    (b'{"features": 1, "seed": 0, "bias": 0, "trained": {}}\n\x00\x00\xc0\x7f', "not finite"),
])
def test_well_checksummed_nonsense_is_refused(rest, message):
    with pytest.raises(ModelError, match=message):
        parse_model(_with_checksum(rest))


@settings(max_examples=examples(300))
@given(st.data())
def test_any_damaged_byte_or_cut_is_a_model_error(data):
    good = model_bytes(small_model(data.draw(st.floats(-5, 5))))
    if data.draw(st.booleans()):
        damaged = good[: data.draw(st.integers(0, len(good) - 1))]
    else:
        at = data.draw(st.integers(0, len(good) - 1))
        byte = data.draw(st.integers(0, 255).filter(lambda b: b != good[at]))
        damaged = good[:at] + bytes([byte]) + good[at + 1 :]
    with pytest.raises(ModelError):
        parse_model(damaged)


@settings(max_examples=examples(200))
@given(st.binary(max_size=300))
def test_random_bytes_are_refused(data):
    for candidate in (data, b"archiver-relevance 1 crc32=00000000\n" + data):
        with pytest.raises(ModelError):
            parse_model(candidate)
