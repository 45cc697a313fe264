"""Logins, pure: a page's login form, Basic and Digest credentials, and secrets kept out of records.

- `find_login_form` reads a login page (its first `MAX_READ` bytes, parsed with selectolax's
  lexbor as link extraction does) and returns the form holding the username and password
  inputs: where and how it is sent, and the default values of its other successful controls
  (hidden CSRF tokens, checked boxes, selected options, the submit button), per the HTML
  Standard's form submission rules as far as login forms need them. `LoginForm.body` is the
  ``application/x-www-form-urlencoded`` body (UTF-8) with the credentials filled in.
- `basic_authorization` (RFC 7617) and `digest_challenge` / `digest_authorization` (RFC 7616:
  MD5, SHA-256, SHA-512-256 and their ``-sess`` forms, ``qop=auth`` or none, ``userhash``,
  opaque, stale) give ``Authorization`` header values; the caller keeps the nonce count.
- `redact_request` and `redact_text` replace every secret by `REDACTED` in the bytes of a
  request (for its WARC record) and in a log or error line (see docs/sessions.md).

Nothing here does I/O; nothing raises on a page's or a server's content.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets as random
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import AnyStr
from urllib.parse import quote, quote_plus, urlencode

from selectolax.lexbor import LexborHTMLParser, LexborNode

from archiver.web import urls
from archiver.web.extract import html_as_utf8, linear_parts

MAX_READ = 2**20  # bytes of a login page parsed
MAX_FORMS = 200  # forms looked at on one page
MAX_CONTROLS = 5000  # form controls of one page looked at
MAX_CHALLENGE = 16 * 1024  # characters of WWW-Authenticate values read
REDACTED = "REDACTED"
FORM_TYPE = "application/x-www-form-urlencoded"

_CONTROLS = "input, select, textarea, button"
_FORM_OR_CONTROL = ":is(form, input, select, textarea, button)"  # once each, in document order
_NOT_SENT_INPUTS = frozenset(("file", "reset", "button", "image", "submit"))
_SUBMIT_INPUTS = frozenset(("submit", "image"))


@dataclass(frozen=True)
class LoginForm:
    """A login form: its absolute action URL, its method, and its fields in document order
    (name, default value), the username's and password's among them."""

    action: str
    method: str
    fields: tuple[tuple[str, str], ...]
    username_field: str
    password_field: str

    def body(self, username: str, password: str, extra: Mapping[str, str] | None = None) -> bytes:
        """The form's fields, URL-encoded in UTF-8, with the username and password filled in;
        each of ``extra`` replaces the first field of its name (dropping later ones of that
        name) or is added at the end."""
        values = {**(extra or {}), self.username_field: username, self.password_field: password}
        pairs: list[tuple[str, str]] = []
        sent: set[str] = set()
        for name, value in self.fields:
            if name not in values:
                pairs.append((name, value))
            elif name not in sent:
                pairs.append((name, values[name]))
                sent.add(name)
        present = {name for name, _ in self.fields}
        pairs += [(name, value) for name, value in values.items() if name not in present]
        return urlencode(pairs, quote_via=quote_plus).encode("ascii")


@dataclass
class _Form:
    """A form of the page: its element (in the part it starts in) and its enabled controls."""

    node: LexborNode
    controls: list[LexborNode] = field(default_factory=list)


def find_login_form(html: bytes, page_url: str, username_field: str, password_field: str,
                    charset: str | None = None) -> LoginForm | None:
    """The first form of the page with an input named ``password_field`` and one named
    ``username_field`` (inside it or bound to it by ``form=``), or None. ``page_url``: the
    page's normalised URL, the base of the action with the page's ``<base href>``; a form whose
    action is not an http(s) URL (``javascript:``) or whose method is ``dialog`` is skipped.

    The page is parsed in `extract.linear_parts` (parsing a deeply nested document whole costs
    time quadratic in its depth); a form cut by a part boundary is reopened at the start of the
    next part, so that its controls there are still its own."""
    forms: list[_Form] = []
    # The controls in document order: each, the form it is inside, whether a fieldset disables it.
    controls: list[tuple[LexborNode, _Form | None, bool]] = []
    base: str | None = None
    carried: _Form | None = None  # the form still open at the end of the last part
    carry = b""  # its start tag, put in front of the next part
    for prefix, part in linear_parts(html_as_utf8(html[:MAX_READ], charset)):
        root = LexborHTMLParser(carry + prefix + part).root
        if root is None:
            continue
        if base is None and (node := root.css_first("base[href]")) is not None:
            base = urls.normalize(_attribute(node, "href").strip(), page_url) or page_url
        owner: dict[int, _Form] = {}  # control (mem_id) -> the form it is inside
        here: list[_Form] = []
        pointer: tuple[_Form, set[int]] | None = None  # an empty form, the controls it may own
        parents: set[int] = set()
        disabled = _disabled_by_fieldsets(root)
        for node in root.css(_FORM_OR_CONTROL):
            if node.tag != "form":
                if len(controls) < MAX_CONTROLS:
                    form = owner.get(node.mem_id)
                    if form is None and pointer is not None and node.mem_id in pointer[1]:
                        form = pointer[0]
                    controls.append((node, form, node.mem_id in disabled))
                continue
            if carried is not None and not here:
                form = carried
            elif len(forms) < MAX_FORMS:
                form = _Form(node)
                forms.append(form)
            else:
                pointer = None
                continue
            here.append(form)
            descendants = node.css(_CONTROLS)
            owner.update((control.mem_id, form) for control in descendants)
            # A form opened in a table is left empty by the parser, which gives it the controls
            # that follow in the table (HTML's "form element pointer").
            pointer = None
            if not descendants and (parent := node.parent) is not None and parent.mem_id not in parents:
                parents.add(parent.mem_id)
                pointer = (form, {control.mem_id for control in parent.css(_CONTROLS)})
        carried, carry = _open_at_end(prefix + part, carried, carry, here[-1] if here else None)
    by_id: dict[str, _Form] = {}
    for form in forms:
        by_id.setdefault(_attribute(form.node, "id"), form)
    for control, inside, off in controls:
        # HTML: a control with a form attribute belongs to the form it names, or to none.
        owned = by_id.get(_attribute(control, "form")) if "form" in control.attributes else inside
        if owned is not None and not off and "disabled" not in control.attributes:
            owned.controls.append(control)
    for form in forms:
        names = {_attribute(c, "name") for c in form.controls if c.tag == "input"}
        if username_field in names and password_field in names:
            login = _login_form(form, base or page_url, page_url, username_field, password_field)
            if login is not None:
                return login
    return None


_FORM_TAG = re.compile(rb"<(/?)form(?=[\t\n\f\r />])[^>]*>?", re.I)


def _open_at_end(part: bytes, carried: _Form | None, carry: bytes, last: _Form | None
                 ) -> tuple[_Form | None, bytes]:
    """The form open at the end of a part and its start tag, from the part's last form tag (read
    in the bytes: the parsed tree does not say whether a form was closed); ``last``: the part's
    last form."""
    tag = next(iter(deque(_FORM_TAG.finditer(part), maxlen=1)), None)
    if tag is None:
        return carried, carry
    if tag[1] or last is None:
        return None, b""
    return last, tag[0] if tag[0].endswith(b">") else tag[0] + b">"


def _disabled_by_fieldsets(root: LexborNode) -> set[int]:
    """The controls (mem_id) a disabled fieldset disables: all inside it but those in its first
    legend. A fieldset inside one already looked at is skipped: each control is visited once or
    twice, however deep they nest."""
    disabled: set[int] = set()
    covered: set[int] = set()
    for fieldset in root.css("fieldset[disabled]"):
        if fieldset.mem_id in covered:
            continue
        legend = next((c for c in fieldset.iter() if c.tag == "legend"), None)
        spared = {c.mem_id for c in legend.css(f"{_CONTROLS}, fieldset")} if legend else set()
        covered.update(c.mem_id for c in fieldset.css("fieldset") if c.mem_id not in spared)
        disabled.update(c.mem_id for c in fieldset.css(_CONTROLS) if c.mem_id not in spared)
    return disabled


def _login_form(form: _Form, base: str, page_url: str, username_field: str,
                password_field: str) -> LoginForm | None:
    controls = form.controls  # the enabled ones
    submitter = next((c for c in controls if _is_submit(c)), None)
    action = _attribute(form.node, "action")
    method = _attribute(form.node, "method").lower()
    if submitter is not None:
        action = _attribute(submitter, "formaction") or action
        method = _attribute(submitter, "formmethod").lower() or method
    if method == "dialog":
        return None
    target = urls.normalize(action.strip(), base) if action.strip() else page_url
    if target is None:
        return None
    fields: list[tuple[str, str]] = []
    for control in controls:
        fields.extend(_submitter_fields(control) if control is submitter else _control_fields(control))
    return LoginForm(target, "POST" if method == "post" else "GET", tuple(fields),
                     username_field, password_field)


def _control_fields(control: LexborNode) -> list[tuple[str, str]]:
    """The name-value pairs a control that is not the submitter adds (HTML Standard,
    "constructing the entry list"), for the controls a login form has."""
    name = _attribute(control, "name")
    if not name or control.tag == "button":
        return []
    if control.tag == "textarea":
        return [(name, control.text(deep=True))]
    if control.tag == "select":
        options = [o for o in control.css("option") if "disabled" not in o.attributes]
        chosen = [o for o in options if "selected" in o.attributes]
        if not chosen and options and "multiple" not in control.attributes:
            chosen = options[:1]
        return [(name, _option_value(option)) for option in chosen]
    kind = _attribute(control, "type").lower()
    if kind in _NOT_SENT_INPUTS:
        return []
    if kind in ("checkbox", "radio"):
        return [(name, _attribute(control, "value", "on"))] if "checked" in control.attributes else []
    if kind == "hidden" and name.lower() == "_charset_":
        return [(name, "UTF-8")]
    return [(name, _attribute(control, "value"))]


def _submitter_fields(control: LexborNode) -> list[tuple[str, str]]:
    name = _attribute(control, "name")
    if _attribute(control, "type").lower() == "image":
        prefix = f"{name}." if name else ""
        return [(f"{prefix}x", "0"), (f"{prefix}y", "0")]
    return [(name, _attribute(control, "value"))] if name else []


def _is_submit(control: LexborNode) -> bool:
    kind = _attribute(control, "type").lower()
    if control.tag == "button":  # a missing or unknown type is submit
        return kind not in ("reset", "button")
    return control.tag == "input" and kind in _SUBMIT_INPUTS


def _option_value(option: LexborNode) -> str:
    if "value" in option.attributes:
        return _attribute(option, "value")
    return " ".join(option.text(deep=True).split())


def _attribute(node: LexborNode, name: str, default: str = "") -> str:
    value = node.attributes.get(name)
    return default if value is None and name not in node.attributes else value or ""


# --- HTTP authentication ----------------------------------------------------------------------

def basic_authorization(username: str, password: str) -> str:
    """The ``Authorization`` value of RFC 7617 Basic, UTF-8; ValueError (naming neither) if the
    username holds a colon or either holds a control character."""
    if ":" in username:
        raise ValueError("a Basic username cannot contain ':'")
    if _CONTROL.search(username) or _CONTROL.search(password):
        raise ValueError("a Basic username or password cannot contain control characters")
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HASHES: dict[str, Callable[[bytes], str]] = {
    "MD5": lambda data: hashlib.md5(data, usedforsecurity=False).hexdigest(),
    "SHA-256": lambda data: hashlib.sha256(data).hexdigest(),
}
if "sha512_256" in hashlib.algorithms_available:  # OpenSSL's; RFC 7616's SHA-512/256
    _HASHES["SHA-512-256"] = lambda data: hashlib.new("sha512_256", data).hexdigest()
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_NAME = re.compile(rf"[\s,]*({_TOKEN})")
_VALUE = re.compile(rf'\s*=\s*("(?:[^"\\]|\\.)*"|{_TOKEN})')
_ESCAPED = re.compile(r"\\(.)")


@dataclass(frozen=True)
class DigestChallenge:
    """A usable RFC 7616 challenge: ``algorithm`` as RFC 7616 spells it, ``qop`` True when
    ``auth`` was offered (False: an RFC 2069 server, no qop); ``stale`` True when the
    credentials were right and only the nonce expired."""

    realm: str
    nonce: str
    algorithm: str = "MD5"
    qop: bool = False
    opaque: str | None = None
    stale: bool = False
    userhash: bool = False


def digest_challenge(www_authenticate: Iterable[str]) -> DigestChallenge | None:
    """The first usable Digest challenge in a 401's ``WWW-Authenticate`` values (servers list
    the one they prefer first, RFC 7616 3.7), or None: one needs a realm and a nonce, an
    algorithm this module knows and, if it names a qop, ``auth``."""
    budget = MAX_CHALLENGE
    for value in www_authenticate:
        text, budget = value[:budget], budget - len(value)
        for scheme, params in _challenges(text):
            if scheme.lower() == "digest" and (challenge := _digest(params)) is not None:
                return challenge
        if budget <= 0:
            break
    return None


def _challenges(text: str) -> list[tuple[str, dict[str, str]]]:
    """The challenges of one header value (RFC 9110 11.6.1): scheme, then lower-cased params;
    a token68 is skipped, and so is anything unparsable, one character at a time."""
    found: list[tuple[str, dict[str, str]]] = []
    position = 0
    while position < len(text):
        name = _NAME.match(text, position)
        if name is None:
            position += 1
            continue
        value = _VALUE.match(text, name.end())
        if value is not None and found:
            raw = value[1]
            if raw.startswith('"'):
                raw = _ESCAPED.sub(r"\1", raw[1:-1])
            found[-1][1].setdefault(name[1].lower(), raw)
            position = value.end()
        else:
            found.append((name[1], {}))
            position = name.end()
    return found


def _digest(params: dict[str, str]) -> DigestChallenge | None:
    algorithm = params.get("algorithm", "MD5")
    session = algorithm.lower().endswith("-sess")
    known = {name.lower(): name for name in _HASHES}.get(algorithm.lower().removesuffix("-sess"))
    qops = {q.strip().lower() for q in params["qop"].split(",")} if "qop" in params else None
    if not params.get("realm") or not params.get("nonce") or known is None:
        return None
    if qops is not None and "auth" not in qops:
        return None
    return DigestChallenge(
        realm=params["realm"], nonce=params["nonce"],
        algorithm=known + ("-sess" if session else ""), qop=qops is not None,
        opaque=params.get("opaque"), stale=params.get("stale", "").lower() == "true",
        userhash=params.get("userhash", "").lower() == "true")


def digest_authorization(username: str, password: str, challenge: DigestChallenge, method: str,
                         target: str, *, nc: int = 1, cnonce: str | None = None) -> str:
    """The ``Authorization`` value answering ``challenge`` for ``method`` and request ``target``
    (path and query exactly as sent: ``archiver.crawl.http.request_target``); ``nc``: how many
    requests this nonce has served, this one included; ``cnonce`` (tests): a random one by
    default."""
    digest = _HASHES[challenge.algorithm.removesuffix("-sess")]
    cnonce = cnonce or random.token_urlsafe(24)
    secret = digest(f"{username}:{challenge.realm}:{password}".encode())
    if challenge.algorithm.endswith("-sess"):
        secret = digest(f"{secret}:{challenge.nonce}:{cnonce}".encode())
    exchange = digest(f"{method}:{target}".encode())
    count = f"{nc:08x}"
    if challenge.qop:
        response = digest(f"{secret}:{challenge.nonce}:{count}:{cnonce}:auth:{exchange}".encode())
    else:
        response = digest(f"{secret}:{challenge.nonce}:{exchange}".encode())
    if challenge.userhash:
        user = f"username={_quoted(digest(f'{username}:{challenge.realm}'.encode()))}"
    elif username.isascii() and not _CONTROL.search(username):
        user = f"username={_quoted(username)}"
    else:  # RFC 7616 3.4.4: the extended notation of RFC 8187
        user = f"username*=UTF-8''{quote(username, safe='')}"
    parts = [user, f"realm={_quoted(challenge.realm)}", f"uri={_quoted(target)}",
             f"algorithm={challenge.algorithm}", f"nonce={_quoted(challenge.nonce)}"]
    if challenge.qop:
        parts += [f"nc={count}", f"cnonce={_quoted(cnonce)}", "qop=auth"]
    parts.append(f"response={_quoted(response)}")
    if challenge.opaque is not None:
        parts.append(f"opaque={_quoted(challenge.opaque)}")
    if challenge.userhash:
        parts.append("userhash=true")
    return "Digest " + ", ".join(parts)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- redaction --------------------------------------------------------------------------------

_AUTHORIZATION = frozenset((b"authorization", b"proxy-authorization"))


def secret_forms(secret: str) -> list[str]:
    """The ways a secret is written in a request or a line: raw, percent-encoded as forms,
    Python and JavaScript do (either case of hex digits), JSON-escaped."""
    if not secret:
        return []
    encoded = [
        quote_plus(secret, safe=""),
        quote_plus(secret, safe="*").replace("~", "%7E"),  # WHATWG urlencoded serializer
        quote(secret, safe=""),
        quote(secret, safe="/"),
        quote(secret, safe="!'()*~"),  # encodeURIComponent
    ]
    lower = [re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), form) for form in encoded]
    escaped = [json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]]
    escaped += [form.replace("/", "\\/") for form in escaped]
    return sorted({secret, *encoded, *lower, *escaped}, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every form of every secret (`secret_forms`) replaced by `REDACTED`."""
    forms = [form for secret in secrets for form in secret_forms(secret)]
    return _redacted(text, forms, REDACTED)


def redact_request(request: bytes, secrets: Iterable[str]) -> bytes:
    """An HTTP/1.1 request's exact bytes with the secrets replaced by `REDACTED`: the
    credentials of ``Authorization`` and ``Proxy-Authorization`` after their scheme, every form
    of every secret (`secret_forms`) in the request target, the header values and the body,
    and ``Content-Length`` set to the new body's length (the crawler's client sends no chunked
    request). Method, version and header names are left as they are, so the result parses as
    the request did."""
    forms = [form.encode() for secret in secrets for form in secret_forms(secret)]
    replacement = REDACTED.encode()
    head, separator, body = request.partition(b"\r\n\r\n")
    if not separator:
        return _redacted(request, forms, replacement)
    body = _redacted(body, forms, replacement)
    first, *lines = head.split(b"\r\n")
    method, _, rest = first.partition(b" ")
    target, _, version = rest.rpartition(b" ")
    out = [b" ".join((method, _redacted(target, forms, replacement), version))]
    for line in lines:
        name, colon, value = line.partition(b":")
        key = name.strip().lower()
        if not colon:
            out.append(_redacted(line, forms, replacement))
        elif key in _AUTHORIZATION:
            scheme = value.split(None, 1)[0] if value.split(None, 1)[1:] else b""
            out.append(name + b": " + (scheme + b" " if scheme else b"") + replacement)
        elif key == b"content-length":
            out.append(name + b": " + str(len(body)).encode())
        else:
            out.append(name + colon + _redacted(value, forms, replacement))
    return b"\r\n".join(out) + separator + body


def _redacted(text: AnyStr, forms: list[AnyStr], replacement: AnyStr) -> AnyStr:
    """``text`` with every occurrence of a form, overlapping ones included, replaced by one
    ``replacement`` per run of overlapping or touching occurrences."""
    spans: list[tuple[int, int]] = []
    for form in forms:
        start = text.find(form)
        while start >= 0:
            spans.append((start, start + len(form)))
            start = text.find(form, start + 1)
    if not spans:
        return text
    spans.sort()
    pieces: list[AnyStr] = []
    kept = 0
    begin, end = spans[0]
    for start, stop in spans[1:]:
        if start > end:
            pieces += [text[kept:begin], replacement]
            kept, begin = end, start
        end = max(end, stop)
    pieces += [text[kept:begin], replacement, text[end:]]
    return text[:0].join(pieces)
