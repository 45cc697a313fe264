"""Fuzz tests for archiver.web.robots: any body parses, any path gets a verdict, in linear time.

parse_robots and RobotsRules.allowed have no error to raise: whatever a server sends is rules.
Besides "never raises", rules that only disallow (or only allow) are checked against a naive
reference matcher (RFC 9309 §2.2.2-2.2.3 read literally, through a regular expression), which does
not depend on how the parser ranks rules.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.robots import MAX_ROBOTS_BYTES, RobotsRules, deciding_rule, parse_robots
from tests.support.fuzzing import assert_cost_bounded, examples, repeat_to

AGENT = "archiver"

# --- a naive reference matcher -----------------------------------------------------------------


def _reference_canon(raw: bytes) -> str:
    """RFC 9309 §2.2.2's comparison form: %XX decoded, then every octet that is not printable
    non-space ASCII other than "%" written as an upper-case escape."""
    octets = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x25 and re.fullmatch(rb"[0-9A-Fa-f]{2}", raw[i + 1 : i + 3]):
            octets.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            octets.append(raw[i])
            i += 1
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in octets)


def _reference_matches(pattern: bytes, path: str) -> bool:
    """Does one rule value match a path: "*" is any run, a final "$" the end, all else literal."""
    anchored = pattern.endswith(b"$")
    if anchored:
        pattern = pattern[:-1]
    if not pattern.startswith((b"/", b"*")):
        pattern = b"/" + pattern
    regex = ".*".join(re.escape(_reference_canon(piece)) for piece in pattern.split(b"*"))
    target = _reference_canon(path.encode("utf-8", "surrogatepass"))
    return re.match(regex + ("\\Z" if anchored else ""), target, re.S) is not None


# --- generators --------------------------------------------------------------------------------

_EOL = st.sampled_from([b"\n", b"\r\n", b"\r"])
_KEYS = st.sampled_from(
    [b"user-agent", b"User-Agent", b"useragent", b"user agent", b"allow", b"ALLOW", b"disallow",
     b"dissallow", b"disalow", b"crawl-delay", b"sitemap", b"site-map", b"host", b"noindex", b"",
     b"user-agent ", b" disallow"]
)  # fmt: skip
_AGENTS = st.sampled_from(
    [b"*", b"archiver", b"Archiver/1.0", b"archiverbot", b"other", b"* archiver", b"", b"arch", b"*bot"]
)
# Path pieces: plain, escaped (valid, lower-case, invalid), non-ASCII, the two special characters.
_PIECES = st.sampled_from(
    [b"/", b"a", b"b", b"/a", b"x.html", b"?", b"=", b"*", b"$", b"%", b"%2", b"%2F", b"%2f", b"%41",
     b"%2A", b"%24", b"%zz", b"%E3%83%84", "ツ".encode(), b"\xff", b"\x00", b" ", b"~", b"&", b"#"]
)  # fmt: skip
_PATTERN = st.lists(_PIECES, max_size=8).map(b"".join)
_DELAYS = st.sampled_from(
    [b"1", b"2.5", b".5", b"3.", b"0", b"-1", b"nan", b"inf", b"1e309", b"9" * 400, b"x"]
)


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    key = draw(_KEYS)
    if key.strip().lower() in (b"user-agent", b"useragent", b"user agent"):
        value = draw(_AGENTS)
    elif key == b"crawl-delay":
        value = draw(_DELAYS)
    else:
        value = draw(_PATTERN)
    separator = draw(st.sampled_from([b":", b": ", b" : ", b"", b"::"]))
    comment = draw(st.sampled_from([b"", b" # note", b"#", b"#:"]))
    return key + separator + value + comment + draw(_EOL)


_ROBOTS = st.builds(
    lambda bom, lines: bom + b"".join(lines),
    st.sampled_from([b"", b"\xef\xbb\xbf"]),
    st.lists(_line(), max_size=25),
)
_PATHS = st.lists(_PIECES, max_size=10).map(lambda pieces: "/" + b"".join(pieces).decode("latin-1"))


def _check_rules(robots: RobotsRules, paths: list[str]) -> None:
    """The contract of a parse: verdicts are booleans, /robots.txt is allowed, delays are sane."""
    for path in paths:
        assert isinstance(robots.allowed(path), bool)
    assert robots.allowed("/robots.txt")
    assert robots.crawl_delay is None or (math.isfinite(robots.crawl_delay) and robots.crawl_delay >= 0)
    assert all(isinstance(sitemap, str) for sitemap in robots.sitemaps)


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=2000), st.lists(st.text(max_size=30).map(lambda t: "/" + t), max_size=5))
def test_any_bytes_parse_and_any_path_gets_a_verdict(body: bytes, paths: list[str]) -> None:
    _check_rules(parse_robots(body, AGENT), paths)


@settings(max_examples=examples(120), deadline=None)
@given(_ROBOTS, st.lists(_PATHS, max_size=5), st.sampled_from([AGENT, "Archiver/2.0", "", " ", "*", "é"]))
def test_near_valid_files_parse(body: bytes, paths: list[str], agent: str) -> None:
    _check_rules(parse_robots(body, agent), paths)


@settings(max_examples=examples(150), deadline=None)
@given(_ROBOTS, st.lists(_PATHS, max_size=6), st.sampled_from([AGENT, "Archiver/2.0", "*"]))
def test_the_deciding_line_gives_the_matchers_verdict(body: bytes, paths: list[str], agent: str) -> None:
    """``archiver why`` names the line that decided: it must be a rule line of the file, of the
    verdict's kind, and no line at all exactly when the matcher found no rule (allowed)."""
    rules = parse_robots(body, agent)
    lines = body.removeprefix(b"\xef\xbb\xbf").splitlines()
    for path in paths:
        line = deciding_rule(body, agent, path)
        if line is None:
            assert rules.allowed(path)
            continue
        assert line.allow == rules.allowed(path)
        assert line.text == lines[line.number - 1].decode("utf-8", "replace")
        key = line.text.partition(":")[0].strip().lower()
        assert (key == "allow") == line.allow


@settings(max_examples=examples(120), deadline=None)
@given(st.lists(_PATTERN.filter(bool), min_size=1, max_size=4), st.booleans(), st.lists(_PATHS, max_size=8))
def test_one_kind_of_rule_matches_as_the_reference_does(
    patterns: list[bytes], allow: bool, paths: list[str]
) -> None:
    """Only Disallow rules: a path is refused exactly when one matches; only Allow: never refused."""
    key = b"allow" if allow else b"disallow"
    body = b"user-agent: archiver\n" + b"".join(key + b": " + p + b"\n" for p in patterns)
    robots = parse_robots(body, AGENT)
    # The parser sees the value as the line gives it: stripped, cut at "#" (a comment).
    values = [v for v in (p.partition(b"#")[0].strip() for p in patterns) if v]
    for path in paths:
        if path == "/robots.txt":
            continue
        expected = allow or not any(_reference_matches(v, path) for v in values)
        assert robots.allowed(path) == expected, (values, path)


# --- bounded time ------------------------------------------------------------------------------



def _benign(size: int) -> bytes:
    """A large but ordinary robots.txt: one group of distinct plain rules, as big sites have."""
    lines = [b"user-agent: *\n"]
    total = len(lines[0])
    while total < size:
        lines.append(b"disallow: /private/%d/\nallow: /private/%d/ok.html\n" % (total, total))
        total += len(lines[-1])
    return b"".join(lines)[:size]


def _parse_and_match(body: bytes) -> None:
    robots = parse_robots(body, AGENT)
    for path in ("/", "/private/x", "/" + "a" * 2000, "/" + "*a" * 1000 + "b"):
        robots.allowed(path)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("one long line", b"user-agent: *\ndisallow: /" + b"a" * (MAX_ROBOTS_BYTES - 30) + b"\n"),
        ("long line over the limit", b"user-agent: *\ndisallow: /" + b"a" * 2**20 + b"\n"),
        ("many stars", b"user-agent: *\ndisallow: /" + b"*a" * (MAX_ROBOTS_BYTES // 2 - 30) + b"\n"),
        ("many escapes", b"user-agent: *\ndisallow: /" + b"%E3%83%84" * (MAX_ROBOTS_BYTES // 9 - 5) + b"\n"),
        ("many groups", repeat_to(b"user-agent: archiver\nuser-agent: *\n", MAX_ROBOTS_BYTES // 4)),
        ("many rules", b"user-agent: *\n" + b"".join(b"disallow: /%d/\n" % i for i in range(10_000))),
        ("many globs", b"user-agent: *\n" + b"".join(b"disallow: /*%d*x$\n" % i for i in range(10_000))),
        ("bare CRs", repeat_to(b"disallow: /a\r", MAX_ROBOTS_BYTES // 4)),
        ("no line breaks", repeat_to(b"user-agent: * disallow: / ", 2**20)),
    ],
)
def test_pathological_files_cost_what_a_benign_file_of_their_size_does(name: str, body: bytes) -> None:
    benign = _benign(len(body))
    assert_cost_bounded(_parse_and_match, body, benign, factor=10, label=name)
