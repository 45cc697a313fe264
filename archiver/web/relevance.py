"""A page's relevance to a topic: hashed word features, a linear model, its file (pure logic).

The focused crawl (``crawl.focus``) scores each page it captures with a ``RelevanceModel`` that
``archiver focus train`` fitted to example documents. Scoring needs numpy and mmh3 only:

- features: the page's words, split and folded as the full-text index splits them
  (``textquery.folded_words``: letters and digits, no case, no accents), each hashed with
  32-bit MurmurHash3 (``seed``) into one of ``features`` slots, so there is no vocabulary to
  keep or grow; a slot's value is ``1 + log(count)``, and the vector is scaled to length 1 so
  that a long page weighs as much as a short one;
- score: the logistic of ``bias + weights . features``, in [0, 1]: the model's estimate of the
  chance that the page is like the relevant examples rather than the others.

The model file (``model_bytes`` / ``parse_model``) is not a pickle: three parts,

1. the line ``archiver-relevance 1 crc32=5e0f93a1`` (say): the format, its version, and the CRC-32 (8
   hex digits) of everything after this line, so that any damaged byte is found;
2. one line of JSON: ``features``, ``seed``, ``bias`` and ``trained`` (a free-form object about
   the training: documents per class, accuracy, method);
3. ``features`` little-endian float32 weights.

A file that differs from this in any way is refused with a ``ModelError`` saying what is wrong.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mmh3
import numpy as np

from archiver.web.textquery import folded_words

MAGIC = b"archiver-relevance"
FORMAT_VERSION = 1
FEATURES = 2**18
MAX_FEATURES = 2**24
_CHECKSUM = re.compile(rb"crc32=[0-9a-f]{8}")
# ASCII letters and digits lower-cased, every other byte a space: what ``[^\W_]+`` finds in
# lower-cased ASCII text is what ``bytes.split`` then finds.
_ASCII_WORDS = bytes(
    (b | 0x20) if chr(b).isalpha() else b if chr(b).isdigit() else 0x20 for b in range(128)
) + b" " * 128


class ModelError(ValueError):
    """A relevance model file that cannot be used; the message says why."""


def words_of(text: str) -> Sequence[str | bytes]:
    """The folded words of ``text`` as ``textquery.folded_words`` splits them; ASCII text as
    bytes, split by a byte table (several times faster than the regex; the same words)."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_WORDS).split()
    return folded_words(text)


def features_of(text: str, features: int = FEATURES, seed: int = 0
                ) -> tuple[np.ndarray, np.ndarray]:
    """The hashed feature vector of ``text`` as (slot indices, values), slots ascending and
    unique, values of unit length (both empty for a text without words). A word hashes as its
    UTF-8 bytes, whichever form ``words_of`` gave it in."""
    counts: Counter[str | bytes] = Counter(words_of(text))
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    slots = np.fromiter((mmh3.hash(word, seed, signed=False) for word in counts),
                        dtype=np.int64, count=len(counts)) % features
    values = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
    unique, where = np.unique(slots, return_inverse=True)
    summed = np.bincount(where, weights=values, minlength=len(unique))  # words sharing a slot
    return unique, (summed / math.sqrt(float(summed @ summed))).astype(np.float32)


@dataclass(frozen=True)
class RelevanceModel:
    """A linear model over hashed words: ``score(text)`` in [0, 1]."""

    weights: np.ndarray  # float32, one per feature slot
    bias: float
    seed: int = 0
    trained: dict[str, Any] = field(default_factory=dict)

    @property
    def features(self) -> int:
        return len(self.weights)

    def score(self, text: str) -> float:
        """The chance, as the model sees it, that ``text`` is like the relevant examples."""
        slots, values = features_of(text, self.features, self.seed)
        margin = self.bias + float(self.weights[slots] @ values)
        return 1.0 / (1.0 + math.exp(-margin)) if margin > -700 else 0.0


def model_bytes(model: RelevanceModel) -> bytes:
    """The model file's bytes (see the module docstring)."""
    header = {"features": model.features, "seed": model.seed, "bias": model.bias,
              "trained": model.trained}
    weights = np.ascontiguousarray(model.weights, dtype="<f4").tobytes()
    rest = json.dumps(header, sort_keys=True).encode() + b"\n" + weights
    return MAGIC + b" %d crc32=%08x\n" % (FORMAT_VERSION, zlib.crc32(rest)) + rest


def parse_model(data: bytes) -> RelevanceModel:
    """The model in a file's bytes, or ``ModelError`` saying what is wrong with them."""
    first, newline, rest = data.partition(b"\n")
    fields = first.split(b" ")
    if not newline or fields[0] != MAGIC:
        raise ModelError("not a relevance model (it does not start with 'archiver-relevance')")
    if len(fields) < 2 or fields[1] != b"%d" % FORMAT_VERSION:
        shown = b" ".join(fields[1:2])[:20].decode("ascii", "replace")
        raise ModelError(f"relevance model format {shown!r} is not supported (this archiver reads "
                         f"format {FORMAT_VERSION}; train the model again)")
    if len(fields) != 3 or not _CHECKSUM.fullmatch(fields[2]):
        raise ModelError("the relevance model's first line has no checksum (crc32=8 hex digits)")
    if int(fields[2][6:], 16) != zlib.crc32(rest):
        raise ModelError("the relevance model does not match its checksum: the file is damaged "
                         "or cut short")
    line, newline, weights = rest.partition(b"\n")
    if not newline:
        raise ModelError("the relevance model's header line is cut short")
    header = _header(line)
    count = header["features"]
    if len(weights) != 4 * count:
        raise ModelError(f"the relevance model holds {len(weights)} bytes of weights; "
                         f"{count} features need {4 * count}")
    array = np.frombuffer(weights, dtype="<f4").astype(np.float32)
    if not np.isfinite(array).all():
        raise ModelError("the relevance model holds weights that are not finite numbers")
    return RelevanceModel(array, header["bias"], header["seed"], header["trained"])


def _header(line: bytes) -> dict[str, Any]:
    """The header's JSON, each field checked."""
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        raise ModelError("the relevance model's header is not JSON") from None
    if not isinstance(header, dict):
        raise ModelError("the relevance model's header is not a JSON object")
    checks: dict[str, Callable[[Any], bool]] = {
        "features": lambda v: _is_int(v) and 1 <= v <= MAX_FEATURES,
        "seed": lambda v: _is_int(v) and 0 <= v < 2**32,
        "bias": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
        and math.isfinite(v),
        "trained": lambda v: isinstance(v, dict),
    }
    for name, valid in checks.items():
        if name not in header:
            raise ModelError(f"the relevance model's header lacks {name!r}")
        if not valid(header[name]):
            raise ModelError(f"the relevance model's {name!r} is out of range: {header[name]!r}")
    return {**header, "bias": float(header["bias"])}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
