"""Server-side rewriting of JavaScript (pure logic, no I/O): what the client script cannot reach.

Replay injects a client script (``client.js``, see archiver.replay.rewrite) that keeps a page's
requests and navigations inside the archive. Two things are out of its reach: a document's own
``location`` cannot be redefined (it is [LegacyUnforgeable]) and, in the sandbox's opaque origins,
the Navigation API fires no ``navigate`` event, so ``location.href = url`` would leave the
archive; and ``otherWindow.postMessage(message, targetOrigin)`` names an origin that no replayed
document has (each runs in an opaque origin), so the browser drops the message. In scripts (script
elements, event handler attributes, ``javascript:`` URLs and JavaScript files) this module
therefore rewrites two forms, and leaves every other byte as it was:

- a write to the document's location: ``location = u``, ``location.href = u``,
  ``location.assign(u)``, ``location.replace(u)``, bare or after ``window.``, ``self.`` or
  ``document.``: ``location`` becomes ``__archiverLocation``, which the client script defines to
  navigate to ``u``'s archive URL at the page's date;
- a method call ``x.postMessage(args)`` becomes ``x.postMessage(...__archiverPost(args))``: the
  client script wraps a window message with the sender's archived origin and sends it to ``*``;
  the receiving document's client script checks the target origin as a browser would and
  dispatches the message with the sender's archived origin.

Only code is rewritten: a small lexer skips strings, template literal text, comments and regular
expression literals (a ``/`` starts one where an expression may begin: the usual heuristic, which
a ``/`` right after a block's ``}`` defeats). What it does not see: a location reached through an
alias (``var l = location; l.href = u``) or a computed member (``window["location"]``), a
location of another window (``top.location``, ``parent.location``), and code built at run time
(``eval``, ``new Function``).
"""

from __future__ import annotations

import codecs
import contextlib
import re
from collections.abc import Iterator

LOCATION = "__archiverLocation"
POST = "__archiverPost"

# Code tokens: white space, comments, names, numbers, punctuators (longest first), or one character.
_CODE = re.compile(
    r"""(?P<space>\s+)
      | (?P<comment>//[^\n\r\u2028\u2029]*|/\*[\s\S]*?(?:\*/|\Z))
      | (?P<name>[A-Za-z_$\u0080-\U0010ffff][\w$\u0080-\U0010ffff]*)
      | (?P<number>\.?\d[\w.]*)
      | (?P<punct>>>>=|\.\.\.|===|!==|\*\*=|<<=|>>=|>>>|&&=|\|\|=|\?\?=|=>|==|!=|<=|>=|&&|\|\||\?\?|\?\.
                  |\+\+|--|[-+*/%&|^]=|[\s\S])""",
    re.X,
)
_STRING = {
    '"': re.compile(r'"(?:[^"\\\n\r]|\\[\s\S])*(?:"|(?=[\n\r])|\Z)'),
    "'": re.compile(r"'(?:[^'\\\n\r]|\\[\s\S])*(?:'|(?=[\n\r])|\Z)"),
}
_TEMPLATE_TEXT = re.compile(r"(?:[^`\\$]|\\[\s\S]|\$(?!\{))*")
_REGEX = re.compile(r"/(?![*/])(?:[^/\\\[\n\r]|\\.|\[(?:[^\]\\\n\r]|\\.)*\])+/[A-Za-z]*")
# After these a "/" starts a regular expression, not a division.
_BEFORE_EXPRESSION = frozenset((
    "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do",
    "else", "yield", "await",
))  # fmt: skip
_WINDOW_NAMES = frozenset(("window", "self", "document"))
_DECLARING = frozenset(("var", "let", "const", "function", "class", ",", "?.", "...", "++", "--"))


def _tokens(text: str) -> Iterator[tuple[str, int, int]]:
    """(kind, start, end) of the significant tokens of ``text``: "name", "punct" or "other"
    (strings, numbers, regular expressions, template text); white space and comments skipped."""
    pos, length = 0, len(text)
    braces: list[bool] = []  # one per open "{": True if it opened a template's "${"
    last: tuple[str, str] | None = None  # (kind, text) of the previous significant token
    while pos < length:
        char = text[pos]
        if char == "`" or (char == "}" and braces and braces[-1]):
            if char == "}":
                braces.pop()
            end = _TEMPLATE_TEXT.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text.startswith("${", end):
                braces.append(True)
                end += 2
            elif end < length:
                end += 1  # the closing backquote
            yield "other", pos, end
            last, pos = ("other", ""), end
            continue
        if char in _STRING:
            end = _STRING[char].match(text, pos).end()  # type: ignore[union-attr]
            yield "other", pos, end
            last, pos = ("other", ""), end
            continue
        if char == "/" and _expression_may_start(last):
            regex = _REGEX.match(text, pos)
            if regex is not None:
                yield "other", pos, regex.end()
                last, pos = ("other", ""), regex.end()
                continue
        match = _CODE.match(text, pos)
        assert match is not None  # the last alternative takes any character
        kind = match.lastgroup or "punct"
        pos = match.end()
        if kind in ("space", "comment"):
            continue
        value = match.group()
        if value == "{":
            braces.append(False)
        elif value == "}" and braces:
            braces.pop()
        kind = "other" if kind == "number" else kind
        yield kind, match.start(), pos
        last = (kind, value)


def _expression_may_start(last: tuple[str, str] | None) -> bool:
    if last is None:
        return True
    kind, value = last
    if kind == "name":
        return value in _BEFORE_EXPRESSION
    return kind == "punct" and value not in (")", "]", "}")


def rewrite_js(text: str) -> str:
    """``text`` with its location writes and postMessage calls rewritten (see the module)."""
    if "location" not in text and "postMessage" not in text:
        return text
    tokens = [(kind, start, end, text[start:end]) for kind, start, end in _tokens(text)]
    closing = _closing_parens(tokens)
    edits: list[tuple[int, int, str]] = []
    for i, (kind, start, end, value) in enumerate(tokens):
        if kind != "name":
            continue
        if value == "location" and _location_write(tokens, i):
            edits.append((start, end, LOCATION))
        elif value == "postMessage" and i > 0 and tokens[i - 1][3] in (".", "?."):
            close = closing.get(i + 1)
            if close is not None:
                opening = tokens[i + 1][2]
                edits += [(opening, opening, f"...{POST}("), (close, close, ")")]
    if not edits:
        return text
    edits.sort(key=lambda edit: edit[0])
    out: list[str] = []
    last = 0
    for start, end, new in edits:
        out += [text[last:start], new]
        last = end
    out.append(text[last:])
    return "".join(out)


def _location_write(tokens: list[tuple[str, int, int, str]], i: int) -> bool:
    """Whether the name token ``i`` ("location") is the window's location, written to."""
    before = tokens[i - 1][3] if i > 0 else ""
    if before in (".", "?."):
        if i < 2 or tokens[i - 2][3] not in _WINDOW_NAMES or (i > 2 and tokens[i - 3][3] in (".", "?.")):
            return False
    elif before in _DECLARING:
        return False
    after = [token[3] for token in tokens[i + 1 : i + 4]]
    if after[:1] == ["="]:
        return True
    if after[:1] == ["."] and len(after) == 3:
        if after[1] == "href":
            return after[2] == "="
        return after[1] in ("assign", "replace") and after[2] == "("
    return False


def _closing_parens(tokens: list[tuple[str, int, int, str]]) -> dict[int, int]:
    """Token index of each "(" that is closed -> the offset of its ")" (one pass, a stack)."""
    found: dict[int, int] = {}
    opened: list[int] = []
    for i, (kind, start, _end, value) in enumerate(tokens):
        if kind != "punct":
            continue
        if value == "(":
            opened.append(i)
        elif value == ")" and opened:
            found[opened.pop()] = start
    return found


def rewrite_js_body(body: bytes, charset: str | None) -> bytes | None:
    """A script file (content-coding undone) rewritten, in UTF-8; None when nothing in it needs
    rewriting (then serve it as archived). Decoded by its byte-order mark, else its charset, else
    as UTF-8; bytes that do not decode pass through unchanged. Only scripts whose bytes spell
    "location" or "postMessage" in ASCII are read (UTF-16 scripts are served as archived)."""
    if b"location" not in body and b"postMessage" not in body:
        return None
    codec = "utf-8"
    if body.startswith(codecs.BOM_UTF8):
        body = body[len(codecs.BOM_UTF8) :]
    elif charset:
        with contextlib.suppress(LookupError):
            codec = codecs.lookup(charset).name
    try:
        text = body.decode(codec, "surrogateescape")
    except UnicodeDecodeError:  # a multi-byte codec cut short: read it as UTF-8
        codec, text = "utf-8", body.decode("utf-8", "surrogateescape")
    new = rewrite_js(text)
    if new == text:
        return None
    return new.encode("utf-8", "surrogateescape" if codec == "utf-8" else "replace")
