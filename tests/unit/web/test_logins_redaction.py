"""archiver.web.logins redaction: no form of a secret survives, and the request still parses."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

import h11
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.web.logins import (
    REDACTED,
    basic_authorization,
    redact_request,
    redact_text,
    secret_forms,
)
from tests.support.fuzzing import examples


def request_bytes(target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """A POST as the crawler's HTTP client sends it (h11, Content-Length)."""
    client = h11.Connection(h11.CLIENT)
    head = h11.Request(method="POST", target=target,
                       headers=[("Host", "example.org"), *headers, ("Content-Length", str(len(body)))])
    return b"".join(client.send(event) or b"" for event in (head, h11.Data(data=body), h11.EndOfMessage()))


def parsed(request: bytes) -> tuple[h11.Request, bytes]:
    """The request as a server reads it (h11), and its body; fails if it does not parse."""
    server = h11.Connection(h11.SERVER)
    server.receive_data(request)
    server.receive_data(b"")
    head = server.next_event()
    assert isinstance(head, h11.Request)
    body = b""
    while not isinstance(event := server.next_event(), h11.EndOfMessage):
        assert isinstance(event, h11.Data)
        body += event.data
    return head, body


def test_a_form_login_request() -> None:
    secret = "p@ss w/rd~*\u00e9"
    body = f"user=ann&pass={quote_plus(secret)}&csrf=abc".encode()
    request = request_bytes("/login?next=%2F", [("Content-Type", "application/x-www-form-urlencoded"),
                                                ("Cookie", "sid=1")], body)
    redacted = redact_request(request, [secret])
    assert redacted == (
        b"POST /login?next=%2F HTTP/1.1\r\nHost: example.org\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nCookie: sid=1\r\n"
        b"Content-Length: 31\r\n\r\nuser=ann&pass=REDACTED&csrf=abc")
    head, sent = parsed(redacted)
    assert sent == b"user=ann&pass=REDACTED&csrf=abc" and head.target == b"/login?next=%2F"


def test_authorization_credentials_are_replaced_after_the_scheme() -> None:
    digest = ('Digest username="ann", realm="r", uri="/", nonce="n", response="6629fae49393a053"'
              ', qop=auth')
    request = request_bytes("/", [("Authorization", basic_authorization("ann", "pw-1")),
                                  ("Proxy-Authorization", digest), ("X-Other", "Basic stays")], b"")
    redacted = redact_request(request, [])
    assert b"\r\nAuthorization: Basic REDACTED\r\n" in redacted
    assert b"\r\nProxy-Authorization: Digest REDACTED\r\n" in redacted
    assert b"\r\nX-Other: Basic stays\r\n" in redacted
    assert b"YW5u" not in redacted and b"6629fae" not in redacted and b"username" not in redacted
    parsed(redacted)


def test_json_and_percent_encoded_forms() -> None:
    secret = 'q"\\/\u00e9\U0001f600 +'
    body = b"&".join([
        json.dumps({"password": secret}).encode(),  # ASCII-escaped
        json.dumps(secret, ensure_ascii=False).replace("/", "\\/").encode(),  # as PHP writes it
        quote(secret).encode(), quote(secret, safe="").lower().encode()])
    redacted = redact_request(request_bytes("/api", [], body), [secret])
    _, sent = parsed(redacted)
    assert all(form.encode() not in sent for form in secret_forms(secret))
    assert sent == b'{"password": "REDACTED"}&"REDACTED"&REDACTED&REDACTED'


def test_short_secrets_are_redacted_too() -> None:
    request = request_bytes("/l?k=ab", [("X-Key", "ab")], b"u=x&p=ab&q=9")
    redacted = redact_request(request, ["ab", ""])
    assert b"ab" not in redacted.replace(b"Host", b"")
    assert parsed(redacted)[1] == b"u=x&p=REDACTED&q=9"
    assert redact_text("login failed: p=ab (x)", ["ab"]) == "login failed: p=REDACTED (x)"


def test_method_version_and_header_names_are_kept() -> None:
    # A secret that is also a word of the protocol: only values, the target and the body change.
    request = request_bytes("/POST/x", [("Content-Type", "text/plain")], b"POST 1.1")
    redacted = redact_request(request, ["POST", "1.1", "Content", "Length"])
    assert redacted.startswith(b"POST /REDACTED/x HTTP/1.1\r\n")
    head, body = parsed(redacted)
    assert body == b"REDACTED REDACTED" and (b"content-type", b"text/plain") in head.headers


def test_overlapping_occurrences_leave_nothing() -> None:
    assert redact_text("aaaaa", ["aa"]) == REDACTED
    assert redact_text("xabcabx", ["abca", "cab"]) == f"x{REDACTED}x"
    assert redact_text("nothing here", ["secret"]) == "nothing here"


def test_text_with_encoded_forms() -> None:
    line = 'error: POST /login p=p%26w+x q=p%26w%20x {"p": "p&w x"}'
    assert redact_text(line, ["p&w x"]) == (
        'error: POST /login p=REDACTED q=REDACTED {"p": "REDACTED"}')


_PIECES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@st.composite
def embedded(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """A secret, a body holding it in some of its forms between random text, and a target."""
    secret = draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12))
    forms = secret_forms(secret)
    body = b""
    for _ in range(draw(st.integers(1, 4))):
        body += draw(_PIECES).encode() + draw(st.sampled_from(forms)).encode()
    body += draw(_PIECES).encode()
    return secret, body, "/login?p=" + quote_plus(secret) + "&n=1"


def _no_form_outside_replacements(data: bytes, secret: str) -> bool:
    pieces = data.split(REDACTED.encode())
    return all(form.encode() not in piece for piece in pieces for form in secret_forms(secret))


@settings(max_examples=examples(300), deadline=None)
@given(embedded())
def test_no_form_of_the_secret_survives_and_the_request_parses(case: tuple[str, bytes, str]) -> None:
    secret, body, target = case
    request = request_bytes(target, [("Cookie", f"pw={quote(secret, safe='')}"),
                                     ("Authorization", basic_authorization("u", "x"))], body)
    redacted = redact_request(request, [secret])
    head, sent = parsed(redacted)
    assert _no_form_outside_replacements(sent, secret)
    assert _no_form_outside_replacements(head.target, secret)
    headers = dict(head.headers)
    # The scheme and the body's new length are the request's own, whatever the secret.
    assert headers.pop(b"authorization") == b"Basic REDACTED"
    assert headers.pop(b"content-length") == str(len(sent)).encode()
    assert all(_no_form_outside_replacements(value, secret) for value in headers.values())
    text = body.decode("utf-8", "replace")
    assert all(form not in piece for piece in redact_text(text, [secret]).split(REDACTED)
               for form in secret_forms(secret))
