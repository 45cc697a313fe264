"""The login kit end to end on a loopback site: the crawler's HTTP client finds and submits a
login form and sends Basic credentials, and the recorded request keeps no secret."""

from __future__ import annotations

import base64
import functools
from urllib.parse import parse_qsl

import h11
import trio

from archiver.web.logins import (
    FORM_TYPE,
    REDACTED,
    basic_authorization,
    find_login_form,
    redact_request,
)
from tests.support.httpclient import client

LOCAL = "127.0.0.1"
PASSWORD = "s3cr3t p\u00e4ss&word"
LOGIN_PAGE = b"""<!doctype html><title>Members</title>
<form action="/search"><input name="q"></form>
<form method="post" action="/session?from=login">
  <input type="hidden" name="csrf" value="tok-42">
  <input name="login"> <input type="password" name="secret">
  <input type="checkbox" name="stay" value="yes" checked>
  <button name="submit" value="in">Log in</button>
</form>"""


async def members_site(nursery: trio.Nursery, posted: list[tuple[bytes, bytes]]) -> int:
    """GET /login: the form; POST /session: 303 to /members with a session cookie when the
    fields are right, else 403; GET /basic: 200 for the Basic credentials, else 401."""

    async def handler(stream: trio.abc.Stream) -> None:
        http = h11.Connection(h11.SERVER)
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await stream.receive_some())
                continue
            if isinstance(event, h11.ConnectionClosed):  # the client hung up
                return
            assert isinstance(event, h11.Request)
            body = b""
            while not isinstance(part := http.next_event(), h11.EndOfMessage):
                if part is h11.NEED_DATA:
                    http.receive_data(await stream.receive_some())
                else:
                    body += part.data
            status, headers = 404, []
            if event.method == b"GET" and event.target == b"/login":
                status = 200
            elif event.method == b"POST" and event.target == b"/session?from=login":
                posted.append((bytes(event.target), body))
                fields = dict(parse_qsl(body.decode()))
                if fields == {"csrf": "tok-42", "login": "ann", "secret": PASSWORD, "stay": "yes",
                              "submit": "in"}:
                    status, headers = 303, [("Location", "/members"), ("Set-Cookie", "sid=1")]
                else:
                    status = 403
            elif event.target == b"/basic":
                sent = dict(event.headers).get(b"authorization", b"")
                expected = b"Basic " + base64.b64encode(f"ann:{PASSWORD}".encode())
                status = 200 if sent == expected else 401
            content = LOGIN_PAGE if status == 200 else b""
            await stream.send_all(http.send(h11.Response(
                status_code=status, headers=[*headers, ("Content-Length", str(len(content)))])))
            await stream.send_all(http.send(h11.Data(data=content)) + http.send(h11.EndOfMessage()))
            http.start_next_cycle()

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host=LOCAL))
    return int(listeners[0].socket.getsockname()[1])


async def test_a_form_login_is_found_sent_and_recorded_without_the_password(
    nursery: trio.Nursery,
) -> None:
    posted: list[tuple[bytes, bytes]] = []
    origin = f"http://{LOCAL}:{await members_site(nursery, posted)}"
    http = client()
    page = await http.fetch(f"{origin}/login", LOCAL)
    form = find_login_form(page.body, f"{origin}/login", "login", "secret")
    assert form is not None and (form.action, form.method) == (f"{origin}/session?from=login", "POST")
    login = await http.fetch(
        form.action, LOCAL, method=form.method, body=form.body("ann", PASSWORD),
        headers=[("Content-Type", FORM_TYPE), ("Referer", f"{origin}/login")])
    await http.aclose()
    assert (login.status, login.header("Location"), login.error) == (303, "/members", None)
    assert len(posted) == 1 and login.request.endswith(posted[0][1])

    recorded = redact_request(login.request, [PASSWORD])
    forms = [PASSWORD, "s3cr3t+p%C3%A4ss%26word", "s3cr3t%20p%C3%A4ss%26word"]
    assert any(form.encode() in login.request for form in forms)
    assert not any(form.encode() in recorded for form in forms)
    server = h11.Connection(h11.SERVER)
    server.receive_data(recorded)
    head, data = server.next_event(), server.next_event()
    assert isinstance(head, h11.Request) and isinstance(data, h11.Data)
    assert dict(parse_qsl(data.data.decode()))["secret"] == REDACTED


async def test_basic_credentials_open_the_door_and_are_recorded_redacted(
    nursery: trio.Nursery,
) -> None:
    origin = f"http://{LOCAL}:{await members_site(nursery, [])}"
    http = client()
    refused = await http.fetch(f"{origin}/basic", LOCAL)
    admitted = await http.fetch(f"{origin}/basic", LOCAL,
                                headers=[("Authorization", basic_authorization("ann", PASSWORD))])
    await http.aclose()
    assert (refused.status, admitted.status) == (401, 200)
    recorded = redact_request(admitted.request, [PASSWORD])
    assert b"\r\nAuthorization: Basic REDACTED\r\n" in recorded
    assert base64.b64encode(f"ann:{PASSWORD}".encode()) not in recorded
