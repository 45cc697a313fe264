"""robots.txt per RFC 9309: a tolerant parser and a fast matcher (pure logic, no I/O).

`parse_robots` keeps only what concerns our product token: the merged rules of the groups
naming it (else of the `*` groups), their Crawl-delay, and the file's Sitemap URLs.
`RobotsRules.allowed` then answers for one path-and-query with a few dictionary look-ups.
"""

import math
import re
from collections.abc import Iterable
from typing import NamedTuple
from urllib.parse import quote_from_bytes, unquote_to_bytes

# RFC 9309 §2.5: parse at least 500 KiB; we parse exactly the first 500 KiB.
MAX_ROBOTS_BYTES = 500 * 1024
MAX_ROBOTS_REDIRECTS = 5  # RFC 9309 §2.3.1.2

# Canonical form of a path, applied to both rule patterns and URLs (RFC 9309 §2.2.2): every
# octet that is printable, non-space ASCII other than "%" stands as itself, every other octet
# as an upper-case %XX escape. So "https://" equals "https%3A%2F%2F", UTF-8 "ツ" equals
# "%E3%83%84" and "%62az" equals "baz", as in the RFC's table. A "%" that starts no escape
# is the octet "%" itself, written "%25".
_KEEP = "".join(chr(c) for c in range(0x21, 0x7F) if c != 0x25)
# A path with nothing outside _KEEP and only escapes of octets that stay escaped is canonical.
_NEEDS_CANON = re.compile(r"[^!-~]|%(?![01][0-9A-F]|2[05]|7F|[89A-F][0-9A-F])").search

# Product tokens are letters, "_" and "-" (RFC 9309 §2.2.1); a user-agent value is read up to
# its first other character, so "archiver/1.0" names product "archiver" (the product/version
# form of RFC 9110 §10.1.5) while "archiverbot" is another product. Google's parser does the same.
_TOKEN = re.compile(rb"[A-Za-z_-]+")

# Misspellings seen in the wild; Google's open-source parser accepts the same ones. Typos are
# read for "disallow" and "user-agent" only: honouring them can only make us more polite,
# whereas a misspelt "allow" would widen access on a guess.
_USER_AGENT = frozenset({b"user-agent", b"useragent", b"user agent"})
_DISALLOW = frozenset(
    {b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw"}
)
_CRAWL_DELAY = re.compile(rb"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_BOM = b"\xef\xbb\xbf"


def _canon(text: str | bytes) -> str:
    """Canonical form of a path or pattern piece (see _KEEP); a str is read as UTF-8."""
    return quote_from_bytes(unquote_to_bytes(text), safe=_KEEP)


def _canon_path(path: str) -> str:
    """_canon for a URL's path, skipping the work when it is canonical already."""
    # C-level tests first: most paths are printable ASCII without "%" or space.
    if path.isascii() and path.isprintable() and " " not in path and "%" not in path:
        return path
    return _canon(path) if _NEEDS_CANON(path) else path


def _canon_octets(raw: bytes) -> str:
    """_canon for bytes, skipping the work when they are canonical already."""
    text = raw.decode("latin-1")  # one character per octet
    return _canon(raw) if _NEEDS_CANON(text) else text


class _Rule(NamedTuple):
    """One allow/disallow line, ready to match against canonical paths."""

    # 2 * priority + allow: the highest rank among matching rules decides, so the most octets
    # win and Allow wins a tie (RFC 9309 §2.2.2); the verdict is the rank's low bit.
    rank: int
    head: str  # literal text before the first "*"
    middle: tuple[str, ...]  # literal text between "*"s, empty runs dropped
    last: str | None  # literal text after the last "*"; None without "*"
    anchored: bool  # ends with "$"


def _compile_rule(value: bytes, allow: bool) -> _Rule:
    """Turn a non-empty rule value into a _Rule.

    `*` matches any run of octets and a final `$` anchors the end (RFC 9309 §2.2.3); their
    escapes %2A and %24, and a `$` elsewhere, are literal. Priority is the length of the
    canonical pattern, wildcards included, as in Google's parser.
    """
    anchored = value.endswith(b"$")
    if anchored:
        value = value[:-1]
    if not value.startswith((b"/", b"*")):
        value = b"/" + value  # "Disallow: private/" is read as the path the author meant
    head, *rest = [_canon_octets(part) for part in value.split(b"*")]
    if not rest:
        return _Rule(2 * (len(head) + anchored) + allow, head, (), None, anchored)
    *between, last = rest
    middle = tuple(part for part in between if part)
    rank = 2 * (len("*".join((head, *middle, last))) + anchored) + allow
    if not middle and not last:  # "/a*" and "/a*$" match what "/a" does
        return _Rule(rank, head, (), None, False)
    return _Rule(rank, head, middle, last, anchored)


def _glob_matches(path: str, pos: int, middle: tuple[str, ...], last: str, anchored: bool) -> bool:
    """Does a wildcard rule match from `pos`, the end of its head in `path`?

    Finding each segment leftmost is exact for `*`-only globs and linear in the path, so no
    pattern, however many stars it holds, can make matching blow up.
    """
    for part in middle:
        pos = path.find(part, pos)
        if pos < 0:
            return False
        pos += len(part)
    if anchored:
        return len(path) - len(last) >= pos and path.endswith(last)
    return path.find(last, pos) >= 0


class _Glob(NamedTuple):
    """A wildcard rule as matching wants it."""

    rank: int
    start: int  # length of the head
    key: str  # its longest segment: a path without it cannot match, a cheap first test
    middle: tuple[str, ...]
    last: str
    anchored: bool


class _Head:
    """The rules whose literal head is one string."""

    __slots__ = ("globs", "prefix")

    def __init__(self) -> None:
        self.prefix = -1  # best rank of plain rules: they match any path starting with the head
        self.globs: list[_Glob] = []  # best rank first


class RobotsRules:
    """The rules of one robots.txt for one crawler."""

    __slots__ = ("_exact", "_heads", "_lengths", "_short", "_size", "crawl_delay", "sitemaps")

    def __init__(
        self,
        rules: Iterable[_Rule] = (),
        crawl_delay: float | None = None,
        sitemaps: Iterable[str] = (),
    ) -> None:
        # Rules by head, and the distinct head lengths: the heads a path can match are its
        # prefixes of those lengths, a few dictionary look-ups even for files of 20,000 rules.
        self._heads: dict[str, _Head] = {}
        self._exact: dict[str, int] = {}  # "$"-anchored plain rules: best rank by path
        unique = set(rules)
        for rule in unique:
            if rule.last is None and rule.anchored:
                self._exact[rule.head] = max(self._exact.get(rule.head, -1), rule.rank)
                continue
            head = self._heads.get(rule.head) or self._heads.setdefault(rule.head, _Head())
            if rule.last is None:
                head.prefix = max(head.prefix, rule.rank)
            else:
                key = max((*rule.middle, rule.last), key=len)
                glob = _Glob(rule.rank, len(rule.head), key, rule.middle, rule.last, rule.anchored)
                head.globs.append(glob)
        for head in self._heads.values():
            head.globs.sort(reverse=True)
        # Head lengths to try, by the path's first two characters ("/" and one more).
        short = {len(text) for text in self._heads if len(text) < 2}
        by_start: dict[str, set[int]] = {}
        for text in self._heads:
            if len(text) >= 2:
                by_start.setdefault(text[:2], set(short)).add(len(text))
        self._lengths = {start: sorted(lengths) for start, lengths in by_start.items()}
        self._short = sorted(short)
        self._size = len(unique)
        self.crawl_delay = crawl_delay
        self.sitemaps = list(sitemaps)

    @classmethod
    def allow_all(cls) -> "RobotsRules":
        return cls()

    @classmethod
    def disallow_all(cls) -> "RobotsRules":
        return cls([_compile_rule(b"/", allow=False)])

    def allowed(self, path: str) -> bool:
        """May we fetch `path` (path and query of a normalised URL, starting with "/")?"""
        if path == "/robots.txt":  # implicitly allowed, RFC 9309 §2.2.2
            return True
        path = _canon_path(path)
        best = self._exact.get(path, -1)
        globs: list[list[_Glob]] = []
        heads = self._heads
        for length in self._lengths.get(path[:2], self._short):
            if length > len(path):
                break
            head = heads.get(path[:length])
            if head is not None:
                best = max(best, head.prefix)
                if head.globs:
                    globs.append(head.globs)
        for candidates in globs:
            for rank, start, key, middle, last, anchored in candidates:
                if rank <= best:
                    break
                if key in path and _glob_matches(path, start, middle, last, anchored):
                    best = rank
                    break
        return best < 0 or bool(best & 1)

    def __repr__(self) -> str:
        return f"<RobotsRules {self._size} rules, crawl_delay={self.crawl_delay}>"


def _lines(content: bytes) -> list[bytes]:
    """The lines to parse: cut at MAX_ROBOTS_BYTES, any cut-off last line dropped, BOM dropped.

    A body of MAX_ROBOTS_BYTES or more may have been capped by its reader, so its last line
    counts only if a line break follows it within the limit or right after it.
    """
    if len(content) >= MAX_ROBOTS_BYTES:
        complete = content[MAX_ROBOTS_BYTES : MAX_ROBOTS_BYTES + 1] in (b"\r", b"\n")
        content = content[:MAX_ROBOTS_BYTES]
        if not complete:
            content = content[: max(content.rfind(b"\n"), content.rfind(b"\r")) + 1]
    return content.removeprefix(_BOM).splitlines()


def _product_token(value: bytes) -> bytes | None:
    found = _TOKEN.match(value)
    return found.group().lower() if found else None


class RuleLine(NamedTuple):
    """A rule as it stands in the file, for telling which line decided (``deciding_rule``)."""

    number: int  # 1-based, counting the lines after the BOM is dropped
    text: str  # the line as written, comment included
    allow: bool


class _Chosen(NamedTuple):
    """What concerns one crawler in a robots.txt: its rules (each with its line), its delay."""

    rules: list[tuple[_Rule, int]]  # (rule, index of its line)
    crawl_delay: float | None
    sitemaps: list[str]
    lines: list[bytes]


def _choose(content: bytes, agent: str) -> _Chosen:
    """Read the groups of a robots.txt that apply to `agent` (see ``parse_robots``)."""
    token = _product_token(agent.strip().encode())
    rules: dict[bool, list[tuple[_Rule, int]]] = {True: [], False: []}  # by "names our token"
    delays: dict[bool, list[float]] = {True: [], False: []}
    named = False  # has any group named our token (even one without rules)?
    sitemaps: dict[str, None] = {}
    targets: list[bool] = []  # which of rules/delays the current group feeds
    in_agent_lines = False
    lines = _lines(content)
    for index, line in enumerate(lines):
        key, colon, value = line.partition(b"#")[0].partition(b":")
        if not colon:
            continue
        key = key.strip().lower()
        value = value.strip()
        if key in _USER_AGENT:
            if not in_agent_lines:
                targets = []
                in_agent_lines = True
            word = value.split(None, 1)[0] if value else b""
            if word == b"*":
                targets.append(False)
            elif token is not None and _product_token(value) == token:
                targets.append(True)
                named = True
        elif key == b"allow" or key in _DISALLOW or key == b"crawl-delay":
            in_agent_lines = False
            if not targets:
                continue
            if key == b"crawl-delay":
                if _CRAWL_DELAY.fullmatch(value) and math.isfinite(delay := float(value)):
                    for target in set(targets):
                        delays[target].append(delay)
            elif value:  # an empty value is no rule (RFC 9309 §2.2.2)
                rule = _compile_rule(value, allow=key == b"allow")
                for target in set(targets):
                    rules[target].append((rule, index))
        elif key in (b"sitemap", b"site-map") and value:
            sitemaps[value.decode("utf-8", "replace")] = None
    return _Chosen(rules[named], max(delays[named], default=None), list(sitemaps), lines)


def parse_robots(content: bytes, agent: str) -> RobotsRules:
    """Parse a robots.txt body for the crawler whose product token is `agent`.

    Groups naming our token are merged; if none does, the `*` groups are; with neither,
    everything is allowed (RFC 9309 §2.2.1). Blank lines do not end a group: a user-agent
    line after a group's rules does. Rules before the first user-agent line, lines without
    a colon and unknown keys are ignored; Sitemap lines count wherever they stand.
    Crawl-delay (non-standard) is the largest valid value among the chosen groups.
    Any bytes are a robots.txt: this never raises, in time linear in the body's first 500 KiB.
    """
    chosen = _choose(content, agent)
    return RobotsRules((rule for rule, _ in chosen.rules), chosen.crawl_delay, chosen.sitemaps)


def deciding_rule(content: bytes, agent: str, path: str) -> RuleLine | None:
    """The line of a robots.txt body that decides whether `agent` may fetch `path` (the rule
    ``parse_robots(content, agent).allowed(path)`` follows), or None when no rule matches.

    For explaining a decision after the fact (``archiver why``), not for crawling: it tries
    every rule in turn.
    """
    if path == "/robots.txt":
        return None
    chosen = _choose(content, agent)
    canon = _canon_path(path)
    best: tuple[int, int] | None = None  # (rank, line index); the first line of a rank wins
    for rule, index in chosen.rules:
        if (best is None or rule.rank > best[0]) and _rule_matches(rule, canon):
            best = (rule.rank, index)
    if best is None:
        return None
    text = chosen.lines[best[1]].decode("utf-8", "replace")
    return RuleLine(best[1] + 1, text, bool(best[0] & 1))


def _rule_matches(rule: _Rule, path: str) -> bool:
    """Does one rule match a canonical path (as ``RobotsRules.allowed`` matches it)?"""
    if not path.startswith(rule.head):
        return False
    if rule.last is None:
        return not rule.anchored or path == rule.head
    return _glob_matches(path, len(rule.head), rule.middle, rule.last, rule.anchored)


def rules_for_status(status: int, content: bytes, agent: str) -> RobotsRules:
    """Rules from the final status of the robots.txt fetch (RFC 9309 §2.3.1).

    2xx: parse the body. 3xx here means redirects were exhausted: unavailable, allow all
    (§2.3.1.2). 429 Too Many Requests is read as the server struggling, not as a missing
    file, so it disallows like 5xx (Google's documented behaviour); other 4xx allow all
    (§2.3.1.3). 5xx, and any status outside 200-599, disallow all (§2.3.1.4).
    """
    if 200 <= status < 300:
        return parse_robots(content, agent)
    if 300 <= status < 500 and status != 429:
        return RobotsRules.allow_all()
    return RobotsRules.disallow_all()


def unreachable() -> RobotsRules:
    """Rules when robots.txt could not be fetched at all (network error, timeout): disallow all."""
    return RobotsRules.disallow_all()
