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
- a read of one of its parts (``location.pathname``, ``.href``, ``.search``, ``.hash``, ``.host``,
  ``.hostname``, ``.port``, ``.origin``, ``.protocol``), bare or after ``window.`` or
  ``document.``: the archived URL's part, as a single-page app reads its route; a bare one as
  ``(self.__archiverLocation||location)``, so that a worker, where the client script does not
  run, still reads its own;
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

import bisect
import codecs
import contextlib
import re

from archiver.web.fuzzy import rename_callback

LOCATION = "__archiverLocation"
POST = "__archiverPost"

_STRING = {
    '"': re.compile(r'"(?:[^"\\\n\r]|\\[\s\S]?)*(?:"|(?=[\n\r])|\Z)'),  # a lone "\" may end it
    "'": re.compile(r"'(?:[^'\\\n\r]|\\[\s\S]?)*(?:'|(?=[\n\r])|\Z)"),
}
_TEMPLATE_TEXT = re.compile(r"(?:[^`\\$]|\\[\s\S]|\$(?!\{))*")
_REGEX = re.compile(r"/(?![*/])(?:[^/\\\[\n\r]|\\.|\[(?:[^\]\\\n\r]|\\.)*\])+/[A-Za-z]*")
_LINE_COMMENT = re.compile(r"//[^\n\r\u2028\u2029]*")
_BLOCK_COMMENT = re.compile(r"/\*[\s\S]*?(?:\*/|\Z)")
# Where code may stop being code: quotes, template backquotes, slashes, and braces (which matter
# only to find the end of a template's substitutions, so only in a script with a backquote).
_TURN = re.compile(r"[\"'`/{}]")
_TURN_WITHOUT_TEMPLATES = re.compile(r"[\"'/]")
_LAST_WORD = re.compile(r"[\w$\u0080-\U0010ffff]+\Z")
# After these words a "/" starts a regular expression, not a division.
_BEFORE_EXPRESSION = frozenset((
    "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do",
    "else", "yield", "await",
))  # fmt: skip
# The two forms rewritten, each found from its name (str.find, at C speed); a match counts if it
# is code. What comes before "location" (a window name, or nothing that makes it a member or a
# declaration) and after it (an assignment, href assignment, assign or replace call):
_WINDOW_MEMBER = re.compile(r"(?<![\w$.])(?:window|self|document)\s*\.\s*\Z")
_WRITTEN = re.compile(r"\s*(?:=(?![=>])|\.\s*href\s*=(?![=>])|\.\s*(?:assign|replace)\s*\()")
# A read of one of the location's parts (not an assignment to it).
_READ = re.compile(r"\s*\.\s*(?:href|pathname|search|hash|host|hostname|port|origin|protocol)"
                   r"(?![\w$])(?!\s*=(?![=>]))")
# A bare location read becomes this: the archived location in a document, where the client script
# defines it, and the worker's own location in a worker, where nothing does.
GUARDED = f"(self.{LOCATION}||location)"
_CALLED = re.compile(r"\s*\(")
_MEMBER = re.compile(r"\.\s*\Z")
# What declares a name rather than writing the window's location ("var location = ...").
_DECLARING = re.compile(r"(?:(?<![\w$])(?:var|let|const|function|class)|,|\.\.\.|\+\+|--)\s*\Z")
_PAREN = re.compile(r"[()]")


def _ends_expression(code: str) -> bool:
    """Whether code (right-stripped, not empty) ends an expression: then "/" divides."""
    last = code[-1]
    if last in ")]}":
        return True
    word = _LAST_WORD.search(code)
    return word is not None and word.group() not in _BEFORE_EXPRESSION


def _literals(text: str, limit: int) -> list[tuple[int, int]]:
    """Spans, in order, of what is not code up to offset ``limit`` at least: strings, template text
    (with the ``${``/``}`` around substitutions), comments and regular expression literals."""
    spans: list[tuple[int, int]] = []
    braces: list[bool] = []  # one per open "{": True if it opened a template's "${"
    divides = False  # whether a "/" here would divide (the code before it ends an expression)
    pos, length = 0, len(text)
    turns = _TURN if "`" in text else _TURN_WITHOUT_TEMPLATES
    while pos <= limit and (turn := turns.search(text, pos)) is not None:
        at = turn.start()
        code = text[pos:at].rstrip()
        if code:
            divides = _ends_expression(code)
        char = text[at]
        end = at + 1
        if char in _STRING:
            end = _STRING[char].match(text, at).end()  # type: ignore[union-attr]
            spans.append((at, end))
            divides = True
        elif char == "`" or (char == "}" and braces and braces[-1]):
            if char == "}":
                braces.pop()
            end = _TEMPLATE_TEXT.match(text, at + 1).end()  # type: ignore[union-attr]
            divides = not text.startswith("${", end)
            if not divides:
                braces.append(True)
                end += 2
            elif end < length:
                end += 1  # the closing backquote
            spans.append((at, end))
        elif char == "{":
            braces.append(False)
            divides = False
        elif char == "}":
            if braces:
                braces.pop()
            divides = True
        elif (comment := _LINE_COMMENT.match(text, at) or _BLOCK_COMMENT.match(text, at)) is not None:
            end = comment.end()
            spans.append((at, end))
        elif not divides and (regex := _REGEX.match(text, at)) is not None:
            end = regex.end()
            spans.append((at, end))
            divides = True
        else:
            divides = False  # a division sign
        pos = end
    return spans


def _found(text: str, name: str) -> list[int]:
    """Offsets of ``name`` in ``text``, as a whole word."""
    found, at = [], text.find(name)
    while at >= 0:
        after = at + len(name)
        before_ok = at == 0 or not (text[at - 1].isalnum() or text[at - 1] in "_$")
        if before_ok and not (after < len(text) and (text[after].isalnum() or text[after] in "_$")):
            found.append(at)
        at = text.find(name, after)
    return found


def _location_use(text: str, at: int) -> str | None:
    """What the word "location" at ``at`` becomes if it is the window's location written to, or
    one of its parts read (``location.pathname``), else None. A bare read is guarded (GUARDED);
    ``self.location.<part>`` is left alone as a worker's own location may be."""
    after = at + len("location")
    written = _WRITTEN.match(text, after) is not None
    if not written and not _READ.match(text, after):
        return None
    window = _WINDOW_MEMBER.search(text, max(0, at - 40), at)
    if window is not None:
        if not written and window.group().startswith("self"):
            return None
        declared = _DECLARING.search(text, max(0, window.start() - 24), window.start())
        return None if declared else LOCATION
    before = text[max(0, at - 24) : at].rstrip()
    if before.endswith(".") or _DECLARING.search(before):
        return None
    return LOCATION if written else GUARDED


def rewrite_js(text: str) -> str:
    """``text`` with its location writes and postMessage calls rewritten (see the module)."""
    writes = [(at, new) for at in _found(text, "location")
              if (new := _location_use(text, at)) is not None]
    posts = [
        at for at in _found(text, "postMessage")
        if _CALLED.match(text, at + len("postMessage")) and _MEMBER.search(text, max(0, at - 40), at)
    ]  # fmt: skip
    if not writes and not posts:
        return text
    literals = _literals(text, len(text) if posts else max(at for at, _ in writes))
    starts = [start for start, _ in literals]

    def code_at(offset: int) -> bool:
        k = bisect.bisect_right(starts, offset) - 1
        return k < 0 or offset >= literals[k][1]

    edits = [(at, at + len("location"), new) for at, new in writes if code_at(at)]
    posts = [at for at in posts if code_at(at)]
    if posts:
        closing = _closing_parens(text, literals)
        for at in posts:
            opening = _CALLED.match(text, at + len("postMessage")).end() - 1  # type: ignore[union-attr]
            close = closing.get(opening)
            if close is not None:
                edits += [(opening + 1, opening + 1, f"...{POST}("), (close, close, ")")]
    if not edits:
        return text
    edits.sort(key=lambda edit: edit[:2])  # an insertion before a replacement at the same place
    out: list[str] = []
    last = 0
    for start, end, new in edits:
        out += [text[last:start], new]
        last = end
    out.append(text[last:])
    return "".join(out)


def _closing_parens(text: str, literals: list[tuple[int, int]]) -> dict[int, int]:
    """Offset of each "(" in code that is closed -> the offset of its ")" (one pass, a stack)."""
    found: dict[int, int] = {}
    opened: list[int] = []
    pos = 0
    for start, end in [*literals, (len(text), len(text))]:
        for paren in _PAREN.finditer(text, pos, start):
            if paren.group() == "(":
                opened.append(paren.start())
            elif opened:
                found[opened.pop()] = paren.start()
        pos = end
    return found


def rewrite_js_body(body: bytes, charset: str | None, callback: tuple[str, str] | None = None
                    ) -> bytes | None:
    """A script file (content-coding undone) rewritten, in UTF-8; None when nothing in it needs
    rewriting (then serve it as archived). Decoded by its byte-order mark, else its charset, else
    as UTF-8; bytes that do not decode pass through unchanged. Only scripts whose bytes spell
    "location" or "postMessage" in ASCII, or ``callback`` (the captured and the asked name of a
    JSONP callback, archiver.web.fuzzy.callback_names), are read (UTF-16 scripts are served as
    archived); a JSONP script's leading call of the captured name then calls the asked one."""
    if b"location" not in body and b"postMessage" not in body and callback is None:
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
    renamed = rename_callback(text, *callback) if callback is not None else None
    new = rewrite_js(text if renamed is None else renamed)
    if new == text:
        return None
    return new.encode("utf-8", "surrogateescape" if codec == "utf-8" else "replace")
