"""Scope rules (``[scope]`` in the config): which URLs the crawl may request, without I/O.

A rule is one string:

``com,example)/news/``
    a SURT prefix: the URL's SURT key (the catalog's key, ``archiver.store.catalogkeys.surt_key``)
    starts with it. The key drops the scheme, userinfo, default ports and a leading ``www``,
    ``www2``... label, lower-cases everything and sorts the query's parameters, so
    ``com,example)/news/`` holds ``http://www.example.com/News/a`` and
    ``https://example.com/news/``. The key drops a path's last slash, so that prefix also
    holds ``/news`` (the catalog files ``/news`` and ``/news/`` under one key). A host alone:
    ``com,example)`` is example.com (and its ``www`` names) on the default ports,
    ``com,example:8080)`` its port 8080, ``com,example,`` its subdomains but not example.com;
    ``com,example`` without a closing character is a plain text prefix and also holds
    ``examplefoo.com``.
``host:example.org``
    the URL's host is example.org (any scheme and port; ``www.example.org`` is another host).
``domain:example.org``
    the host is example.org or ends in ``.example.org``.
``re:<regex>``
    the whole normalised URL matches the expression (RE2: time linear in the URL, no
    backreferences or lookaround).

Host names in rules are read as URLs' hosts are (``urls.normalize``): case folded, IDNA-encoded.
``Scope.decide`` applies the rules: a URL matching an exclude rule is out (the first such rule
decides); else, with include rules, it is in only if one matches (the first that does decides,
and an out-of-scope URL that matched none has no deciding rule); with no include rules it is in.

surt (and the tldextract and requests it loads) is imported where a SURT key is made, not at the
top: the config imports this module, and a command whose config has no SURT rule should not pay
for it (start-up time, see ``archiver.cli``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

from archiver.web import urls

KINDS = ("host", "domain", "re")  # the named prefixes; a rule without one is a SURT prefix
# An RE2 program's size grows with the pattern's; operators' patterns are short.
MAX_PATTERN = 1000
# The host part of a SURT prefix: reversed labels (or an address) and an optional port.
_SURT_HOST = re.compile(r"[0-9a-z_\-.,:\[\]]+")
_SURT_PATH = re.compile(r"/[\x21-\x7e]*")
# "word:" at the start names a rule kind, unless a digit follows (a SURT prefix's port:
# "localhost:8080)/").
_PREFIX = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*):")
# ...or unless it is a group of an IPv6 address, which SURT keys write bare ("ffff:a000::)/"); no
# rule kind is made of hex digits only.
_HEX_GROUP = re.compile(r"[0-9a-fA-F]{1,4}")
_RE2 = re2.Options()
_RE2.log_errors = False  # the ScopeError says why


class ScopeError(ValueError):
    """A rule that cannot be used; the message quotes it."""


@dataclass(frozen=True)
class Rule:
    """One parsed rule: ``text`` as written, ``kind`` ("surt" or one of KINDS) and ``value``
    (the SURT prefix, host or domain as URLs carry them, or the expression)."""

    text: str
    kind: str
    value: str
    regex: Any = None  # the compiled RE2 program of a "re" rule

    def matches(self, url: str, host: str, keys: UrlKeys) -> bool:
        """Does the rule hold ``url`` (normalised), of ``host``, whose SURT keys are ``keys``?"""
        if self.kind == "surt":
            host_part, close, _ = self.value.partition(")")
            if not close:
                return keys.host().startswith(self.value)
            if keys.host() != host_part:  # most URLs: no need for the whole key
                return False
            # The key drops a path's last "/" ("/news/" -> "com,example)/news"): "/news/" is
            # under "com,example)/news/" (and "/news", the same key, with it).
            return (keys.whole() + "/").startswith(self.value)
        if self.kind == "host":
            return host == self.value
        if self.kind == "domain":
            return host == self.value or host.endswith("." + self.value)
        return self.regex.fullmatch(url) is not None


class UrlKeys:
    """The SURT key of one URL, made only if a rule needs it: the host part (before ")", the
    same for every URL of an origin) or the whole key."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._whole: str | None = None

    def host(self) -> str:
        if self._whole is not None:
            return self._whole.partition(")")[0]
        return _host_key(urls.origin(self.url))

    def whole(self) -> str:
        if self._whole is None:
            self._whole = surt_of(self.url)
        return self._whole


@functools.lru_cache(maxsize=4096)
def _host_key(origin: str) -> str:
    """The host part of the SURT keys of an origin's URLs."""
    return surt_of(origin + "/").partition(")")[0]


@dataclass(frozen=True)
class ScopeDecision:
    """``in_scope``, and the text of the rule that decided (None when none did)."""

    in_scope: bool
    rule: str | None

    @property
    def word(self) -> str:
        return "in" if self.in_scope else "out"


def parse_rule(text: str) -> Rule:
    """The rule ``text`` stands for; ScopeError (quoting it) if it is not one."""
    if not isinstance(text, str) or not text.strip():
        raise ScopeError(f"scope rule {text!r}: empty")
    if not text.isprintable():
        raise ScopeError(f"scope rule {text!r}: control characters are not allowed")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise ScopeError(f"scope rule {text!r}: not valid Unicode (a lone surrogate)") from None
    prefix = _PREFIX.match(text)
    kind, value = (prefix.group(1), text[prefix.end():]) if prefix else ("", text)
    if kind == "re":
        return _regex_rule(text, value)
    if kind in ("host", "domain"):
        return Rule(text, kind, _host(text, value))
    if not kind or value[:1].isdigit() or _HEX_GROUP.fullmatch(kind):
        return _surt_rule(text)
    if kind.lower() in ("http", "https"):
        raise ScopeError(f"scope rule {text!r}: the catalog's SURT keys have no scheme: write the "
                         'key\'s prefix, such as "com,example)/news/", or "host:example.com"')
    raise ScopeError(f"scope rule {text!r}: unknown kind {kind + ':'!r} (known: host:, domain:, "
                     're:, or a SURT prefix such as "com,example)/news/")')


def _surt_rule(text: str) -> Rule:
    value = text.lower()
    host, close, path = value.partition(")")
    if not _SURT_HOST.fullmatch(host):
        raise ScopeError(f"scope rule {text!r}: not a SURT prefix (its host part {host!r} must be "
                         'reversed labels such as "com,example", then ")" and a path)')
    if close and path and not _SURT_PATH.fullmatch(path):
        raise ScopeError(f"scope rule {text!r}: not a SURT prefix (after \")\" comes a path "
                         'starting with "/", printable ASCII, such as "com,example)/news/")')
    return Rule(text, "surt", value)


def _regex_rule(text: str, pattern: str) -> Rule:
    if not pattern:
        raise ScopeError(f"scope rule {text!r}: no expression after re:")
    if len(pattern) > MAX_PATTERN:
        raise ScopeError(f"scope rule {text[:80]!r}...: the expression is longer than "
                         f"{MAX_PATTERN} characters")
    try:
        regex = re2.compile(pattern, _RE2)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(
            exc.args[0], bytes) else str(exc)
        raise ScopeError(f"scope rule {text!r}: bad regular expression for RE2 ({reason}); RE2 "
                         "has no backreferences or lookaround") from None
    return Rule(text, "re", pattern, regex)


def _host(text: str, value: str) -> str:
    """A rule's host as normalised URLs carry it (no brackets around an IPv6 address)."""
    url = urls.normalize(f"http://{value}/") if value and not any(
        c in value for c in "/?#@\\ ") else None
    authority = urls.origin(url)[len("http://"):] if url is not None else ""
    if not authority or ":" in authority.rpartition("]")[2]:
        raise ScopeError(f"scope rule {text!r}: {value!r} is not a host name (no scheme, port or "
                         'path: write "host:example.org"; a SURT prefix "org,example:8080)" '
                         "names one port)")
    return urls.origin_parts("http://" + authority)[1]


class Scope:
    """The include and exclude rules of a config, parsed."""

    def __init__(self, include: Iterable[Rule] = (), exclude: Iterable[Rule] = ()) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)

    @property
    def everything(self) -> bool:
        """No rule: every URL is in scope."""
        return not self.include and not self.exclude

    def decide(self, url: str) -> ScopeDecision:
        """The decision about a normalised URL."""
        if self.everything:
            return ScopeDecision(True, None)
        host = urls.origin_parts(urls.origin(url))[1]
        keys = UrlKeys(url)
        for rule in self.exclude:
            if rule.matches(url, host, keys):
                return ScopeDecision(False, rule.text)
        if not self.include:
            return ScopeDecision(True, None)
        for rule in self.include:
            if rule.matches(url, host, keys):
                return ScopeDecision(True, rule.text)
        return ScopeDecision(False, None)

    def allows(self, url: str) -> bool:
        return self.everything or self.decide(url).in_scope


def surt_of(url: str) -> str:
    """The SURT key of a normalised URL, as the catalog makes it ("" if surt cannot read it)."""
    import surt

    try:
        return str(surt.surt(url))
    except Exception:  # surt raises whatever its parsers raise; such a URL matches no prefix
        return ""


@functools.lru_cache(maxsize=8)
def scope_of(include: tuple[str, ...], exclude: tuple[str, ...]) -> Scope:
    """The Scope of a config's rule lists (parsed once per distinct lists); ScopeError."""
    return Scope([parse_rule(r) for r in include], [parse_rule(r) for r in exclude])
