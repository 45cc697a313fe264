"""Fuzzy matching for replay: rules that map a URL a replayed page asks for to a captured one.

Scripts add cache-busting and session parameters (``?_=1764241000000``, ``callback=jQuery...``,
``ver=3``, ``PHPSESSID=...``), so a replayed page asks for URLs that differ from the captured ones.
A :class:`FuzzyRule` names the URLs it applies to (a host with its subdomains, a path prefix:
both optional) and the parameters it ignores, or the only ones it keeps. Under a rule a URL
:func:`reduce`\\s to itself without the parameters it ignores (in the query, and as ``;name=``
path parameters such as ``;jsessionid=``), the rest sorted; two URLs match under a rule when the
rule applies to both and their reductions, less the scheme (the catalog's key folds it too), are
equal. A reduction keeps scheme, host and path, so a rule never maps a URL to another host.
Plain string logic only: the work is linear in the URL's length.

Replay tries the operator's rules (``replay.fuzzy_rules``) first, in their order, then
:data:`DEFAULT_RULES`; the first rule under which some capture matches wins.

A JSONP response served under the ``jsonp-callback`` rule calls the callback named in the
captured URL, which the replayed page does not define: :func:`callback_names` gives the captured
and the asked name, and :func:`rename_callback` puts the asked one in the script's first call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit


class FuzzyError(ValueError):
    """A fuzzy rule given in the config is malformed; the message says how."""


@dataclass(frozen=True)
class FuzzyRule:
    """A named rule: where it applies (``host``: that host and its subdomains, ``path``: a path
    prefix; "" for any) and which parameter names (lower case) it ignores, or, when ``keep`` is
    not None, the only ones it keeps."""

    name: str
    ignore: frozenset[str] = frozenset()
    keep: frozenset[str] | None = None
    host: str = ""
    path: str = ""

    def drops(self, parameter: str) -> bool:
        """Whether this rule ignores the parameter named ``parameter`` (as written in the URL)."""
        name = parameter.lower()
        return name not in self.keep if self.keep is not None else name in self.ignore

    def applies(self, host: str, path: str) -> bool:
        """Whether this rule applies to a URL of ``host`` (lower case) and ``path``."""
        if self.host and host != self.host and not host.endswith("." + self.host):
            return False
        return path.startswith(self.path)


def _rule(name: str, *ignored: str) -> FuzzyRule:
    return FuzzyRule(name, ignore=frozenset(ignored))


# The query parameters that name a JSONP callback.
CALLBACK_PARAMETERS = ("callback", "jsonp", "jsoncallback")
JSONP_RULE = "jsonp-callback"
# The shipped rules, most specific first: jQuery's epoch-milliseconds cache buster; JSONP
# callbacks (jQuery adds "_" with them); common cache busters; session identifiers.
DEFAULT_RULES = (
    _rule("epoch-ms", "_"),
    _rule(JSONP_RULE, *CALLBACK_PARAMETERS, "_"),
    _rule("cache-buster", "v", "ver", "version", "t", "ts", "cb", "cachebust", "cachebuster", "_"),
    _rule("session-id", "sid", "sessionid", "session_id", "phpsessid", "jsessionid"),
)


def _kept(rule: FuzzyRule, parts: Iterable[str]) -> list[str]:
    return [part for part in parts if part and not rule.drops(part.partition("=")[0])]


def _segment(rule: FuzzyRule, segment: str) -> str:
    """A path segment without the ``;name=value`` parameters ``rule`` ignores."""
    head, *parameters = segment.split(";")
    return ";".join([head, *_kept(rule, parameters)])


def reduce(rule: FuzzyRule, url: str) -> str | None:
    """``url`` without the parameters ``rule`` ignores (query and path parameters), the query's
    kept parameters sorted, the host lower case, no fragment; None if the rule does not apply to
    ``url`` or it is no absolute URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    host = (parts.hostname or "").rstrip(".")
    if not parts.scheme or not host:
        return None
    path = "/".join(_segment(rule, segment) for segment in parts.path.split("/"))
    if not rule.applies(host, path):
        return None
    netloc = parts.netloc.rpartition("@")[2].lower()
    query = "&".join(sorted(_kept(rule, parts.query.split("&"))))
    return urlunsplit((parts.scheme.lower(), netloc, path, query, ""))


def match_key(rule: FuzzyRule, url: str) -> str | None:
    """What two URLs matching under ``rule`` share: their reduction less its scheme (None: the
    rule does not apply)."""
    reduced = reduce(rule, url)
    return None if reduced is None else reduced.partition("://")[2]


def stem(url: str) -> str:
    """``url`` up to its query, fragment and first path parameter: every URL a rule can match it
    with starts with this once its scheme is folded (the prefix replay lists candidates by)."""
    start = url.find("//") + 2 if "//" in url else 0
    cuts = [found for mark in "?#;" if (found := url.find(mark, start)) != -1]
    return url[:min(cuts, default=len(url))]


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_KEYS = ("name", "host", "path", "ignore", "keep")


def make_rule(table: Mapping[str, object]) -> FuzzyRule:
    """A rule from a ``[[replay.fuzzy_rules]]`` table; FuzzyError saying what is wrong."""
    for key in table:
        if key not in _KEYS:
            raise FuzzyError(f"{key}: unknown key (known in a fuzzy rule: {', '.join(_KEYS)})")
    name = table.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= 64 or not set(name) <= _NAME_CHARS:
        raise FuzzyError(f"name: expected 1 to 64 of a-z, 0-9, '-', '_', '.', got {name!r}")
    host = table.get("host", "")
    if not isinstance(host, str) or any(c in host for c in "/:@ ") or host != host.lower():
        raise FuzzyError(f"host: expected a lower-case host name (its subdomains match too), got {host!r}")
    path = table.get("path", "")
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise FuzzyError(f"path: expected a path prefix starting with '/', got {path!r}")
    if ("ignore" in table) == ("keep" in table):
        raise FuzzyError("give either ignore (parameters to ignore) or keep (the only ones to keep)")
    key = "ignore" if "ignore" in table else "keep"
    names = table[key]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise FuzzyError(f"{key}: expected a list of parameter names, got {names!r}")
    if key == "ignore" and not names:
        raise FuzzyError("ignore: name at least one parameter")
    lowered = frozenset(n.lower() for n in names)
    return FuzzyRule(name, ignore=lowered if key == "ignore" else frozenset(),
                     keep=lowered if key == "keep" else None, host=host, path=path)


# A callback name replay writes into a script: a plain JavaScript identifier (ASCII), bounded.
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,127}")
# What may come before a JSONP script's call: whitespace (a byte-order mark too) and comments.
_LEAD = re.compile(r"(?:[\s\ufeff]++|//[^\n]*+|/\*(?:[^*]|\*(?!/))*+\*/)*+")
_CALL = re.compile(r"[ \t\r\n]*+\(")


def _callback(url: str) -> tuple[str, str] | None:
    """The first parameter of ``url``'s query that names a JSONP callback, and its value."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return None
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name.lower() in CALLBACK_PARAMETERS:
            return name.lower(), unquote(value)
    return None


def callback_names(asked: str, captured: str) -> tuple[str, str] | None:
    """(the captured name, the asked name) of the JSONP callback when the URL ``asked`` names
    another callback than the URL ``captured``, in the same parameter, both plain identifiers;
    else None (nothing to rename)."""
    wanted, found = _callback(asked), _callback(captured)
    if wanted is None or found is None or wanted[0] != found[0] or wanted[1] == found[1]:
        return None
    if not (_IDENTIFIER.fullmatch(wanted[1]) and _IDENTIFIER.fullmatch(found[1])):
        return None
    return found[1], wanted[1]


def rename_callback(script: str, captured: str, asked: str) -> str | None:
    """``script`` with its leading call of ``captured`` (after whitespace and comments, the name
    then ``(``, spaces between allowed) calling ``asked`` instead; None if it does not start so or
    a name is no plain identifier. Only that first occurrence changes; linear in the script."""
    if not (_IDENTIFIER.fullmatch(captured) and _IDENTIFIER.fullmatch(asked)):
        return None
    start = _LEAD.match(script)
    at = start.end() if start else 0
    end = at + len(captured)
    if not script.startswith(captured, at) or not _CALL.match(script, end):
        return None
    return script[:at] + asked + script[end:]
