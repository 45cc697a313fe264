"""Gatekeeper pages: answers that are a bot challenge, a rate limit or a firewall's block page
rather than the site's content (docs/gatekeepers.md lists the shipped rules and their sources).

A :class:`GatekeeperRule` has a ``kind`` (:data:`KINDS`), a ``name`` (for logs and docs) and
conditions that must all hold: the answer's ``status`` among those listed (any when none), a
``header`` present (and, with ``header_value``, a value of it that the expression finds), and a
``body`` expression found in the first :data:`SCANNED` bytes of the payload (a bytes expression:
the operator's text is encoded as UTF-8, so a non-ASCII letter matches its UTF-8 bytes).
:func:`recognise` tries the rules in order and names the first that holds.

The crawler tries the operator's rules (``crawl.gatekeeper_rules``) first, then
:data:`DEFAULT_RULES`. Work is bounded whatever the answer: at most :data:`HEADERS` header fields
of at most :data:`HEADER_CHARS` characters each and :data:`SCANNED` bytes of body are examined,
and the shipped expressions are literals and alternations, linear in what they scan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice

# The kinds of gatekeeper, as the capture's ``gatekeeper`` label holds them.
CHALLENGE, RATE_LIMIT, BLOCK = "challenge", "rate-limit", "block"
KINDS = (CHALLENGE, RATE_LIMIT, BLOCK)
# Bytes of the body a rule's expression searches: challenge and block pages are small.
SCANNED = 64 * 1024
# Header fields examined at most, and characters of each value.
HEADERS = 256
HEADER_CHARS = 4096


class GatekeeperError(ValueError):
    """A gatekeeper rule given in the config is malformed; the message says how."""


@dataclass(frozen=True)
class GatekeeperRule:
    """A named rule of one ``kind``: every condition given must hold (``status``: any of those
    codes; ``header``: a lower-case field name present, with ``header_value`` found in one of its
    values when given; ``body``: found in the first SCANNED bytes of the payload)."""

    kind: str
    name: str
    status: frozenset[int] = frozenset()
    header: str = ""
    header_value: re.Pattern[str] | None = None
    body: tuple[re.Pattern[bytes], ...] = ()  # any of them found

    def holds(self, status: int | None, headers: Mapping[str, list[str]], body: bytes) -> bool:
        """Whether the answer (``headers`` by lower-case name, ``body`` already cut to SCANNED
        bytes) meets every condition of this rule."""
        if self.status and status not in self.status:
            return False
        if self.header:
            values = headers.get(self.header)
            if values is None:
                return False
            if self.header_value is not None and not any(
                    self.header_value.search(value) for value in values):
                return False
        return not self.body or any(pattern.search(body) is not None for pattern in self.body)


@dataclass(frozen=True)
class Match:
    """What :func:`recognise` found: the gatekeeper's kind and the name of the rule."""

    kind: str
    rule: str


def _rule(kind: str, name: str, *, status: Iterable[int] = (), header: str = "",
          header_value: str | None = None, body: str | tuple[str, ...] = ()) -> GatekeeperRule:
    """A rule; ``body``: an expression, or several of which any may be found (each searched
    alone: an expression that starts with a literal is found by a fast scan for it, an
    alternation is tried at every byte, ten times slower on a page of the site)."""
    bodies = (body,) if isinstance(body, str) else body
    return GatekeeperRule(kind, name, frozenset(status), header,
                          None if header_value is None else re.compile(header_value, re.I),
                          tuple(re.compile(pattern.encode()) for pattern in bodies))


# Akamai's block page writes its reference URL with HTML entities ("errors&#46;edgesuite&#46;net").
_EDGESUITE = r"errors(?:\.|&#46;)edgesuite(?:\.|&#46;)net"
# The shipped rules, challenges first (Cloudflare answers a managed challenge with 403, 429 or 503
# and cf-mitigated: that is a challenge, not a rate limit). Each is described in docs/gatekeepers.md.
DEFAULT_RULES = (
    _rule(CHALLENGE, "cloudflare-mitigated", header="cf-mitigated", header_value=r"^\s*challenge\s*$"),
    _rule(CHALLENGE, "cloudflare-challenge-page",
          body=(r"window\._cf_chl_opt", r"<title>Just a moment\.\.\.</title>")),
    _rule(CHALLENGE, "aws-waf-challenge", header="x-amzn-waf-action",
          header_value=r"^\s*(?:challenge|captcha)\s*$"),
    _rule(CHALLENGE, "datadome-header", status=[403], header="x-datadome"),
    _rule(CHALLENGE, "datadome-page", status=[403], body=r"captcha-delivery\.com"),
    _rule(CHALLENGE, "perimeterx", status=[403], body=r"px-captcha"),
    _rule(CHALLENGE, "incapsula", body=(r"_Incapsula_Resource", r"Incapsula incident ID")),
    _rule(RATE_LIMIT, "too-many-requests", status=[429]),
    _rule(BLOCK, "cloudflare-block", status=[403], header="cf-ray",
          body=(r"Sorry, you have been blocked", r"Attention Required! \| Cloudflare")),
    # Both texts, anywhere: two lookaheads from the start (linear, however often either occurs).
    _rule(BLOCK, "akamai-block", status=[403],
          body=rf"\A(?=[\s\S]*?Access Denied)(?=[\s\S]*?{_EDGESUITE})"),
    _rule(BLOCK, "sucuri-header", header="x-sucuri-block"),
    _rule(BLOCK, "sucuri-page", status=[403], body=r"Sucuri WebSite Firewall - Access Denied"),
    _rule(BLOCK, "modsecurity", status=[403, 406], body=r"This error was generated by Mod_Security"),
)


def recognise(status: int | None, headers: Iterable[tuple[str, str]], body: bytes,
              rules: Iterable[GatekeeperRule] = DEFAULT_RULES) -> Match | None:
    """The first of ``rules`` the answer meets, or None: the answer is the site's own.
    ``body`` is its payload with content codings undone (``archiver.web.http.decode_body(body,
    content_encoding, SCANNED)``); only its first SCANNED bytes are read."""
    fields: dict[str, list[str]] = {}
    for name, value in islice(headers, HEADERS):
        fields.setdefault(name.strip().lower(), []).append(value[:HEADER_CHARS])
    scanned = body[:SCANNED]
    for rule in rules:
        if rule.holds(status, fields, scanned):
            return Match(rule.kind, rule.name)
    return None


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_KEYS = ("kind", "name", "status", "header", "header_value", "body")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]{1,128}")


def _pattern(key: str, text: object) -> str:
    if not isinstance(text, str) or not text:
        raise GatekeeperError(f"{key}: expected a regular expression (a non-empty string), got {text!r}")
    try:
        re.compile(text)
    except re.error as e:
        raise GatekeeperError(f"{key}: not a regular expression ({e}): {text!r}") from None
    return text


def make_rule(table: Mapping[str, object]) -> GatekeeperRule:
    """A rule from a ``[[crawl.gatekeeper_rules]]`` table; GatekeeperError saying what is wrong."""
    for key in table:
        if key not in _KEYS:
            raise GatekeeperError(f"{key}: unknown key (known in a gatekeeper rule: {', '.join(_KEYS)})")
    kind = table.get("kind")
    if kind not in KINDS:
        raise GatekeeperError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    name = table.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 64 or not set(name) <= _NAME_CHARS:
        raise GatekeeperError(f"name: expected 1 to 64 of a-z, 0-9, '-', '_', '.', got {name!r}")
    status = table.get("status", [])
    if not isinstance(status, list) or not all(
            isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 999
            for code in status):
        raise GatekeeperError(f"status: expected a list of HTTP status codes (100-999), got {status!r}")
    header = table.get("header", "")
    if not isinstance(header, str) or (header and not _HEADER_NAME.fullmatch(header.lower())):
        raise GatekeeperError(f"header: expected a header field name, got {header!r}")
    header_value = table.get("header_value")
    if header_value is not None:
        if not header:
            raise GatekeeperError("header_value: give the header it is a value of")
        header_value = _pattern("header_value", header_value)
    body = table.get("body")
    if body is not None:
        body = _pattern("body", body)
    if not status and not header and body is None:
        raise GatekeeperError("give at least one condition: status, header or body")
    try:
        return _rule(kind, name, status=status, header=header.lower(),
                     header_value=header_value, body=() if body is None else body)
    except re.error as e:  # an expression valid as text, not as bytes
        raise GatekeeperError(f"body: not a regular expression over bytes ({e}): {body!r}") from None
