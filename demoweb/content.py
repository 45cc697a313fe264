"""Deterministic bytes for the demo web: prose, images, binaries and a gzip bomb (pure).

A topical web (``WebSpec.topical``) writes its prose on one of TOPICS: sentences of common
words with about a third of each topic's own words (TOPIC_WORDS), so the topics share their
grammar and differ in what they are about, as real pages on two subjects do.
"""

from __future__ import annotations

import functools
import random
import struct
import zlib

_VOCABULARY = (
    "archive web crawl page site link record capture harvest library museum memory history "
    "index catalog document image script style server client request response header body "
    "network protocol address domain robots rule agent queue frontier bitmap bundle replay "
    "time date version change copy store keep read write open close search find river "
    "mountain garden city harbour island forest meadow winter summer autumn spring morning "
    "evening quiet bright careful patient gentle steady curious ancient modern simple rare "
    "small large many few every other the a of and to in for with on by from about under "
    "over between through during before after while because although however therefore"
)
_WORDS = tuple(_VOCABULARY.split())
# The topics of a topical web: the first is the one a focused crawl looks for.
TOPICS = ("astronomy", "cooking")
_ASTRONOMY = (
    "telescope orbit comet galaxy nebula planet star eclipse meteor crater asteroid lunar "
    "solar spectrum observatory constellation cosmic gravity satellite supernova quasar "
    "pulsar zenith equinox celestial astronomer moon sky light year dwarf giant cluster "
    "redshift parallax magnitude ecliptic perihelion aurora mars jupiter saturn venus "
    "mercury neptune uranus orbit rings dust probe launch rocket dark matter infrared"
)
_COOKING = (
    "recipe flour butter oven simmer garlic onion pepper bake dough sauce roast spice "
    "kitchen skillet broth vinegar salt sugar cream cheese tomato basil lemon olive oil "
    "chop stir whisk knead boil fry grill stew soup bread pastry dessert dinner lunch "
    "breakfast taste flavour herb thyme rosemary carrot potato rice noodle honey egg"
)
TOPIC_WORDS = {"astronomy": tuple(_ASTRONOMY.split()), "cooking": tuple(_COOKING.split())}
_COMMON_WORDS = (
    "the a of and to in for with on by from about under over between through during before "
    "after while because although however therefore this that these those it its we our you "
    "your they their is are was were be been has have had will would can could should may "
    "might very more most some many few every other new old good great long little own same "
    "first last next early late often always never again also only just still even then now "
    "here there today people time way day part place world life hand week work kind"
)
_COMMON = tuple(_COMMON_WORDS.split())


@functools.cache
def paragraphs(seed: int, count: int = 256) -> tuple[str, ...]:
    """A pool of prose paragraphs (about 150 to 1,300 characters each) pages pick from."""
    rng = random.Random(f"prose:{seed}")
    pool = []
    for _ in range(count):
        sentences = (
            " ".join(rng.choices(_WORDS, k=rng.randint(6, 18))).capitalize() + "."
            for _ in range(rng.randint(2, 12))
        )
        pool.append(" ".join(sentences))
    return tuple(pool)


@functools.cache
def topic_paragraphs(seed: int, topic: str, count: int = 256) -> tuple[str, ...]:
    """A pool of prose paragraphs on ``topic`` (one of TOPICS), sized as ``paragraphs``."""
    rng = random.Random(f"prose:{seed}:{topic}")
    own = TOPIC_WORDS[topic]
    pool = []
    for _ in range(count):
        sentences = (
            " ".join(rng.choice(own) if rng.random() < 0.35 else rng.choice(_COMMON)
                     for _ in range(rng.randint(6, 18))).capitalize() + "."
            for _ in range(rng.randint(2, 12))
        )
        pool.append(" ".join(sentences))
    return tuple(pool)


def png(seed: str, width: int, height: int) -> bytes:
    """A valid RGB PNG of noise: incompressible, so its size is about width*height*3 bytes."""
    rng = random.Random(seed)
    raw = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def ico(seed: str, size: int = 16) -> bytes:
    """A Windows icon holding one PNG image (allowed since Windows Vista)."""
    image = png(seed, size, size)
    entry = struct.pack("<BBBBHHII", size, size, 0, 0, 1, 24, len(image), 6 + 16)
    return struct.pack("<HHH", 0, 1, 1) + entry + image


def binary(seed: str, magic: bytes, size: int) -> bytes:
    """Random bytes behind a file-type magic number (class files, SWF, WOFF2, PDF...)."""
    return magic + random.Random(seed).randbytes(size - len(magic))


# An affine map on CRC-32 values, x -> L(x) ^ k, stored as (images of the 32 bit vectors, k).
_Affine = tuple[tuple[int, ...], int]


def _apply(m: _Affine, x: int) -> int:
    cols, k = m
    for bit in range(32):
        if x >> bit & 1:
            k ^= cols[bit]
    return k


def _compose(outer: _Affine, inner: _Affine) -> _Affine:
    cols = tuple(_apply(outer, c) ^ outer[1] for c in inner[0])
    return cols, _apply(outer, inner[1])


def _crc32_of_zeros(count: int) -> int:
    """zlib.crc32(bytes(count)) without touching count bytes (square-and-multiply on the map)."""
    k = zlib.crc32(b"\x00", 0)
    step: _Affine = (tuple(zlib.crc32(b"\x00", 1 << b) ^ k for b in range(32)), k)
    result: _Affine = (tuple(1 << b for b in range(32)), 0)
    while count:
        if count & 1:
            result = _compose(step, result)
        step = _compose(step, step)
        count >>= 1
    return _apply(result, 0)


@functools.cache
def gzip_bomb(inflated: int = 1 << 30, block: int = 1 << 20) -> bytes:
    """A gzip member of `inflated` zero bytes (a multiple of `block`).

    Deflate cannot beat about 1032:1, so 1 GiB of zeros still takes about 1 MiB on the wire.
    After a full flush the compressor has forgotten its history, so every block compresses to
    the same bytes and the member is built by repetition instead of compressing 1 GiB.
    """
    if inflated % block:
        raise ValueError("inflated must be a multiple of block")
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = comp.compress(bytes(block)) + comp.flush(zlib.Z_FULL_FLUSH)
    final = comp.flush(zlib.Z_FINISH)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03"
    trailer = struct.pack("<II", _crc32_of_zeros(inflated), inflated & 0xFFFFFFFF)
    return header + piece * (inflated // block) + final + trailer
