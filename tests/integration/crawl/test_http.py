"""Tests for archiver.crawl.http against small, often misbehaving, servers on 127.0.0.1."""

from __future__ import annotations

import base64
import contextlib
import functools
import gzip
import hashlib
import io
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable

import pytest
import trio
import trustme
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from archiver.crawl.http import ACCEPT, ACCEPT_ENCODING, FetchResult, request_target
from archiver.web.http import decode_body
from tests.support.httpclient import client

LOCAL = "127.0.0.1"
Handler = Callable[[trio.abc.Stream], Awaitable[None]]


def quiet(handler: Handler) -> Handler:
    """Let a handler meet a client that hung up without failing the test's nursery."""

    async def wrapped(stream: trio.abc.Stream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await handler(stream)

    return wrapped


async def serve(nursery: trio.Nursery, handler: Handler) -> int:
    listeners = await nursery.start(
        functools.partial(trio.serve_tcp, quiet(handler), 0, host=LOCAL)
    )
    return listeners[0].socket.getsockname()[1]


async def read_request(stream: trio.abc.Stream) -> bytes | None:
    """One request head, or None at EOF (the client sends one request at a time)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some()
        if not chunk:
            return None
        data += chunk
    return data


def response(body: bytes, *headers: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def keep_alive_server(nursery: trio.Nursery, connections: list[int]) -> int:
    """Answers every request on a connection with its ordinal; counts connections."""

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        served = 0
        while await read_request(stream) is not None:
            served += 1
            await stream.send_all(response(b"reply %d" % served))

    return await serve(nursery, handler)


async def test_plain_response_keeps_exact_bytes(nursery: trio.Nursery) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n"
        b"X-Mixed-Case: v\r\n\r\n"
    )
    seen = []

    async def handler(stream: trio.abc.Stream) -> None:
        seen.append(await read_request(stream))
        await stream.send_all(head + b"hello")

    port = await serve(nursery, handler)
    http = client()
    result = await http.fetch(f"http://{LOCAL}:{port}/a/b?x=1", LOCAL)
    await http.aclose()
    assert (result.error, result.truncated) == (None, None)
    assert (result.status, result.reason) == (200, "OK")
    assert result.head == head and result.body == b"hello"
    assert result.headers == [
        ("Content-Type", "text/html"),
        ("Content-Length", "5"),
        ("X-Mixed-Case", "v"),
    ]
    assert result.header("x-mixed-case") == "v" and result.header("Location") is None
    assert seen == [result.request]
    assert result.request.startswith(b"GET /a/b?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
    assert b"\r\nUser-Agent: archiver-test/1.0\r\n" in result.request
    assert b"\r\nAccept-Encoding: gzip, deflate, br\r\n" in result.request
    assert result.ip == LOCAL and result.started > 0
    assert result.first_byte is not None and 0 <= result.first_byte <= result.elapsed < 1


async def test_interim_response_skipped_and_bare_lf_head_kept(nursery: trio.Nursery) -> None:
    final = b"HTTP/1.1 301 Moved\nLocation: /there\nX-Folded: a\n b\nContent-Length: 0\n\n"

    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n" + final
        )

    port = await serve(nursery, handler)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.header("location")) == (301, "/there")
    assert result.head == final and result.body == b""


async def test_chunked_body_dechunked_and_header_renamed(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nX-After: 1\r\n\r\n"
            b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
        )

    port = await serve(nursery, handler)
    url = f"http://{LOCAL}:{port}/"
    result = await client().fetch(url, LOCAL)
    assert result.body == b"hello world" and result.truncated is None
    assert result.head == (
        b"HTTP/1.1 200 OK\r\nX-Archiver-Transfer-Encoding: chunked\r\nX-After: 1\r\n\r\n"
    )
    assert result.header("Transfer-Encoding") == "chunked"

    # Stored with the digest of the de-chunked entity, the record passes warcio's check.
    digest = "sha1:" + base64.b32encode(hashlib.sha1(result.body).digest()).decode()
    stream = io.BytesIO(result.head + result.body)
    http_headers = StatusAndHeadersParser(["HTTP/1.0", "HTTP/1.1"]).parse(stream)
    warc = io.BytesIO()
    writer = WARCWriter(warc, gzip=False)
    record = writer.create_warc_record(
        url,
        "response",
        payload=stream,
        http_headers=http_headers,
        warc_headers_dict={"WARC-Payload-Digest": digest},
    )
    writer.write_record(record)
    warc.seek(0)
    checked = []
    for stored in ArchiveIterator(warc, check_digests=True):
        payload = stored.content_stream().read()
        checked.append((payload, stored.digest_checker.passed, stored.digest_checker.problems))
    assert checked == [(result.body, True, [])]


async def test_keep_alive_reuses_one_connection(nursery: trio.Nursery) -> None:
    connections: list[int] = []
    port = await keep_alive_server(nursery, connections)
    http = client()
    bodies = [(await http.fetch(f"http://{LOCAL}:{port}/{i}", LOCAL)).body for i in range(3)]
    assert bodies == [b"reply 1", b"reply 2", b"reply 3"] and len(connections) == 1
    # Another host at the same address gets its own connection.
    other = await http.fetch(f"http://localhost:{port}/", LOCAL)
    assert other.body == b"reply 1" and len(connections) == 2
    await http.aclose()


async def test_connection_close_and_http10_reconnect(nursery: trio.Nursery) -> None:
    connections: list[int] = []

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        await read_request(stream)
        if len(connections) == 1:
            await stream.send_all(response(b"first", "Connection: close"))
            await trio.sleep_forever()  # the client, not the server, must end the connection
        await stream.send_all(b"HTTP/1.0 200 OK\r\n\r\nto the end")
        await stream.aclose()

    port = await serve(nursery, handler)
    http = client()
    results = [await http.fetch(f"http://{LOCAL}:{port}/", LOCAL) for _ in range(3)]
    assert [r.body for r in results] == [b"first", b"to the end", b"to the end"]
    assert [r.truncated for r in results] == [None, None, None]
    assert len(connections) == 3


async def test_idle_connection_closed_by_server_reconnects(nursery: trio.Nursery) -> None:
    connections: list[int] = []

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        await read_request(stream)
        await stream.send_all(response(b"once"))

    port = await serve(nursery, handler)
    http = client()
    results = [await http.fetch(f"http://{LOCAL}:{port}/", LOCAL) for _ in range(2)]
    assert [(r.body, r.error) for r in results] == [(b"once", None)] * 2
    assert len(connections) == 2


async def test_reused_connection_dying_before_response_is_retried_once(
    nursery: trio.Nursery,
) -> None:
    connections: list[int] = []

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        if len(connections) == 1:
            await read_request(stream)
            await stream.send_all(response(b"one"))
        await read_request(stream)  # a first connection ends here, as if idle too long
        if len(connections) == 2:
            await stream.send_all(response(b"two"))

    port = await serve(nursery, handler)
    http = client()
    first = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    second = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (first.body, second.body, second.error) == (b"one", b"two", None)
    assert len(connections) == 2
    # A new connection that dies the same way is not retried.
    third = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (third.status, third.error) == (None, "reset: closed before response")
    assert len(connections) == 3


async def test_gzip_body_kept_raw_and_decoded_on_request(nursery: trio.Nursery) -> None:
    page = b"<html>" + b"<p>archive</p>" * 1000 + b"</html>"
    packed = gzip.compress(page)

    async def handler(stream: trio.abc.Stream) -> None:
        request = await read_request(stream)
        assert request is not None and b"Accept-Encoding: gzip, deflate, br" in request
        await stream.send_all(response(packed, "Content-Encoding: gzip"))

    port = await serve(nursery, handler)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert result.body == packed
    assert decode_body(result.body, result.header("content-encoding"), 10**6) == page


async def test_gzip_bomb_is_limited(nursery: trio.Nursery) -> None:
    bomb = gzip.compress(bytes(16 * 2**20), compresslevel=1)
    assert len(bomb) < 200_000

    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(response(bomb, "Content-Encoding: gzip"))

    port = await serve(nursery, handler)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert result.body == bomb
    assert decode_body(result.body, "gzip", 2**20) == bytes(2**20)


async def test_size_cap_truncates_and_closes(nursery: trio.Nursery) -> None:
    connections: list[int] = []

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        while (request := await read_request(stream)) is not None:
            big = request.startswith(b"GET /big ")
            await stream.send_all(response(b"x" * 100_000 if big else b"small"))

    port = await serve(nursery, handler)
    http = client(max_response_size=1000)
    result = await http.fetch(f"http://{LOCAL}:{port}/big", LOCAL)
    assert (result.status, result.truncated, result.body) == (200, "length", b"x" * 1000)
    after = await http.fetch(f"http://{LOCAL}:{port}/small", LOCAL)
    assert (after.body, after.truncated, len(connections)) == (b"small", None, 2)
    at_cap = await client(max_response_size=5).fetch(f"http://{LOCAL}:{port}/small", LOCAL)
    assert (at_cap.body, at_cap.truncated) == (b"small", None)


async def test_drip_feed_ends_at_total_timeout(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
        while True:
            await stream.send_all(b"x")
            await trio.sleep(0.01)

    port = await serve(nursery, handler)
    result = await client(total_timeout=0.3).fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.truncated, result.error) == (200, "time", None)
    assert result.body and set(result.body) == {ord("x")}
    assert 0.3 <= result.elapsed < 1


async def test_drip_feed_head_ends_in_error(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while True:
            await stream.send_all(b"x")
            await trio.sleep(0.01)

    port = await serve(nursery, handler)
    url = f"http://{LOCAL}:{port}/"
    by_total = await client(total_timeout=0.2, first_byte_timeout=5).fetch(url, LOCAL)
    by_head = await client(total_timeout=5, first_byte_timeout=0.2).fetch(url, LOCAL)
    assert (by_total.status, by_total.error) == (None, "timeout: total")
    assert (by_head.status, by_head.error) == (None, "timeout: first-byte")
    assert by_head.first_byte is not None and by_head.first_byte < 0.2 <= by_head.elapsed


async def test_silent_server_hits_first_byte_timeout(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await trio.sleep_forever()

    port = await serve(nursery, handler)
    result = await client(first_byte_timeout=0.2).fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.error, result.first_byte) == (None, "timeout: first-byte", None)
    assert result.request.startswith(b"GET / HTTP/1.1\r\n")
    assert 0.2 <= result.elapsed < 1


async def test_silent_tls_server_hits_connect_timeout(nursery: trio.Nursery) -> None:
    port = await serve(nursery, lambda stream: trio.sleep_forever())
    result = await client(connect_timeout=0.2).fetch(f"https://{LOCAL}:{port}/", LOCAL)
    assert (result.error, result.request) == ("timeout: connect", b"")


async def test_cancellation_propagates(nursery: trio.Nursery) -> None:
    port = await serve(nursery, lambda stream: trio.sleep_forever())
    http = client(first_byte_timeout=10, total_timeout=10)
    with trio.move_on_after(0.1) as scope:
        await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert scope.cancelled_caught


async def test_huge_headers_rejected(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\n")
        for _ in range(1000):
            await stream.send_all(b"X-Filler: " + b"y" * 1000 + b"\r\n")

    port = await serve(nursery, handler)
    result = await client(max_header_size=8192).fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.error) == (None, "protocol: headers too large")


@pytest.mark.parametrize(
    "reply", [b"garbage\r\n\r\n", b"HTTP/1.1 2000 OK\r\n\r\n", b"\x16\x03\x01"]
)
async def test_bad_status_line(nursery: trio.Nursery, reply: bytes) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(reply)

    port = await serve(nursery, handler)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert result.status is None and result.head == b""
    assert result.error is not None and result.error.startswith("protocol: ")


async def test_reset_mid_body_keeps_partial_body(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"z" * 100)
        # Linger 0: close() sends a TCP reset instead of a FIN.
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        stream.socket.close()

    port = await serve(nursery, handler)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.error, result.truncated) == (200, None, "disconnect")
    assert result.body == b"z" * 100


async def test_content_length_longer_than_body(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")

    port = await serve(nursery, handler)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.truncated, result.body) == (200, "disconnect", b"only ten b")


async def test_bytes_past_content_length_are_not_a_response(nursery: trio.Nursery) -> None:
    connections: list[int] = []

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        await read_request(stream)
        if len(connections) == 1:
            await stream.send_all(response(b"hello") + response(b"smuggled"))
            await trio.sleep_forever()
        await stream.send_all(response(b"real"))

    port = await serve(nursery, handler)
    http = client()
    results = [await http.fetch(f"http://{LOCAL}:{port}/", LOCAL) for _ in range(2)]
    assert [r.body for r in results] == [b"hello", b"real"] and len(connections) == 2


async def test_stray_bytes_on_idle_connection_are_not_a_response(nursery: trio.Nursery) -> None:
    connections: list[int] = []
    stray_sent = trio.Event()

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        await read_request(stream)
        if len(connections) == 1:
            await stream.send_all(response(b"hello"))
            await stream.send_all(response(b"unasked"))
            stray_sent.set()
            await trio.sleep_forever()
        await stream.send_all(response(b"real"))

    port = await serve(nursery, handler)
    http = client()
    first = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    await stray_sent.wait()
    second = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (first.body, second.body, len(connections)) == (b"hello", b"real", 2)


async def test_broken_chunk_is_unspecified_truncation(nursery: trio.Nursery) -> None:
    async def handler(stream: trio.abc.Stream) -> None:
        await read_request(stream)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n"
        )
        await trio.sleep_forever()

    port = await serve(nursery, handler)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.truncated, result.body) == (200, "unspecified", b"abc")


async def test_connection_refused() -> None:
    with socket.socket() as placeholder:  # bound, never listening: connecting is refused
        placeholder.bind((LOCAL, 0))
        port = placeholder.getsockname()[1]
        result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL)
    assert (result.status, result.error) == (None, "connect: Connection refused")


async def test_empty_query_is_sent_as_given(nursery: trio.Nursery) -> None:
    seen: list[bytes | None] = []

    async def handler(stream: trio.abc.Stream) -> None:
        while (request := await read_request(stream)) is not None:
            seen.append(request.split(b"\r\n", 1)[0])
            await stream.send_all(response(b"ok"))

    port = await serve(nursery, handler)
    http = client()
    for target in ["/p?", "/?", "/p?a=1", "?x"]:
        assert (await http.fetch(f"http://{LOCAL}:{port}{target}#frag", LOCAL)).status == 200
    await http.aclose()
    assert seen == [b"GET /p? HTTP/1.1", b"GET /? HTTP/1.1", b"GET /p?a=1 HTTP/1.1", b"GET /?x HTTP/1.1"]


async def test_tls_with_sni_and_keep_alive(nursery: trio.Nursery) -> None:
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("archiver.test").configure_cert(server_context)
    names: list[str | None] = []
    server_context.sni_callback = lambda _sock, name, _context: names.append(name)
    connections: list[int] = []

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        while await read_request(stream) is not None:
            await stream.send_all(response(b"secret"))

    listeners = await nursery.start(
        functools.partial(trio.serve_ssl_over_tcp, quiet(handler), 0, server_context, host=LOCAL)
    )
    port = listeners[0].transport_listener.socket.getsockname()[1]
    url = f"https://archiver.test:{port}/page"
    http = client()
    results: list[FetchResult] = [await http.fetch(url, LOCAL) for _ in range(2)]
    await http.aclose()
    assert [(r.status, r.body, r.error) for r in results] == [(200, b"secret", None)] * 2
    assert b"\r\nHost: archiver.test:%d\r\n" % port in results[0].request
    assert names == ["archiver.test"] and len(connections) == 1

    refused = await client(verify_tls=True).fetch(url, LOCAL)
    assert refused.status is None
    assert refused.error is not None and refused.error.startswith("tls: certificate: ")


async def read_message(stream: trio.abc.Stream) -> bytes | None:
    """One whole request as sent: its head and the ``Content-Length`` bytes of body after it."""
    data = await read_request(stream)
    if data is None:
        return None
    head = data.partition(b"\r\n\r\n")[0]
    length = next((int(line.partition(b":")[2]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(data) < len(head) + 4 + length:
        data += await stream.receive_some()
    return data


async def recording_server(nursery: trio.Nursery, requests: list[bytes]) -> int:
    """Keeps every request whole, answers each with ``reply``; one entry per request."""

    async def handler(stream: trio.abc.Stream) -> None:
        while (message := await read_message(stream)) is not None:
            requests.append(message)
            await stream.send_all(response(b"reply"))

    return await serve(nursery, handler)


async def test_post_sends_body_and_headers_exactly(nursery: trio.Nursery) -> None:
    requests: list[bytes] = []
    port = await recording_server(nursery, requests)
    http = client()
    form = b"user=ann&pass=p%C3%A4ss+word&csrf=a%2Fb"
    result = await http.fetch(
        f"http://{LOCAL}:{port}/login?next=/", LOCAL, method="POST", body=form,
        headers=[("Content-Type", "application/x-www-form-urlencoded"),
                 ("Cookie", "sid=1; lang=en"), ("Referer", f"http://{LOCAL}:{port}/login")])
    await http.aclose()
    assert (result.status, result.body, result.error) == (200, b"reply", None)
    assert requests == [result.request]
    head, _, body = result.request.partition(b"\r\n\r\n")
    assert body == form
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /login?next=/ HTTP/1.1"
    assert lines[1:] == [
        b"Host: 127.0.0.1:%d" % port, b"User-Agent: archiver-test/1.0",
        b"Accept: " + ACCEPT.encode(), b"Accept-Encoding: " + ACCEPT_ENCODING.encode(),
        b"Content-Type: application/x-www-form-urlencoded", b"Cookie: sid=1; lang=en",
        b"Referer: http://127.0.0.1:%d/login" % port, b"Content-Length: %d" % len(form)]


async def test_post_with_empty_body_sends_content_length_zero(nursery: trio.Nursery) -> None:
    requests: list[bytes] = []
    port = await recording_server(nursery, requests)
    http = client()
    result = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL, method="POST",
                              headers=[("Content-Length", "99")])
    await http.aclose()
    assert result.error is None and requests == [result.request]
    assert result.request.endswith(b"\r\nContent-Length: 0\r\n\r\n")
    assert result.request.count(b"Content-Length") == 1


async def test_request_headers_replace_defaults_and_configured_ones(nursery: trio.Nursery) -> None:
    requests: list[bytes] = []
    port = await recording_server(nursery, requests)
    http = client(extra_headers=[("From", "ops@example.org"), ("X-Crawl", "a")])
    replaced = await http.fetch(
        f"http://{LOCAL}:{port}/", LOCAL, conditions=[("If-None-Match", '"e1"')],
        headers=[("user-agent", "login-agent/2"), ("ACCEPT", "text/html"), ("x-crawl", "b"),
                 ("Authorization", "Basic YTpi")])
    plain = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)  # nothing kept for the next one
    await http.aclose()
    assert requests == [replaced.request, plain.request]
    assert replaced.request.split(b"\r\n")[1:-2] == [
        b"Host: 127.0.0.1:%d" % port, b"Accept-Encoding: " + ACCEPT_ENCODING.encode(),
        b"From: ops@example.org", b'If-None-Match: "e1"', b"user-agent: login-agent/2",
        b"ACCEPT: text/html", b"x-crawl: b", b"Authorization: Basic YTpi"]
    assert plain.request.split(b"\r\n")[1:-2] == [
        b"Host: 127.0.0.1:%d" % port, b"User-Agent: archiver-test/1.0",
        b"Accept: " + ACCEPT.encode(), b"Accept-Encoding: " + ACCEPT_ENCODING.encode(),
        b"From: ops@example.org", b"X-Crawl: a"]


async def test_head_reads_no_body_and_keeps_the_connection(nursery: trio.Nursery) -> None:
    connections: list[int] = []
    heads: list[bytes] = []

    async def handler(stream: trio.abc.Stream) -> None:
        connections.append(1)
        while (request := await read_request(stream)) is not None:
            heads.append(request)
            reply = response(b"0123456789")  # a HEAD's answer: the head alone
            await stream.send_all(reply[:-10] if request.startswith(b"HEAD ") else reply)

    port = await serve(nursery, handler)
    http = client()
    head = await http.fetch(f"http://{LOCAL}:{port}/doc", LOCAL, method="HEAD")
    get = await http.fetch(f"http://{LOCAL}:{port}/doc", LOCAL)
    await http.aclose()
    assert head.request.startswith(b"HEAD /doc HTTP/1.1\r\n") and heads[0] == head.request
    assert (head.status, head.header("Content-Length"), head.body, head.truncated, head.error) == (
        200, "10", b"", None, None)
    assert (get.body, get.error, len(connections)) == (b"0123456789", None, 1)


async def test_post_goes_on_a_new_connection(nursery: trio.Nursery) -> None:
    connections: list[int] = []
    port = await keep_alive_server(nursery, connections)
    http = client()
    first = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    posted = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL, method="POST", body=b"a=1")
    after = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)  # the POST's connection, kept
    await http.aclose()
    assert [r.body for r in (first, posted, after)] == [b"reply 1", b"reply 1", b"reply 2"]
    assert len(connections) == 2


async def test_post_on_a_dying_connection_is_not_sent_twice(nursery: trio.Nursery) -> None:
    posts: list[bytes] = []

    async def handler(stream: trio.abc.Stream) -> None:
        while (message := await read_message(stream)) is not None:
            if message.startswith(b"POST "):
                posts.append(message)
                return  # closes without an answer, as a server dropping the connection would
            await stream.send_all(response(b"page"))  # and keeps the connection open

    port = await serve(nursery, handler)
    http = client()
    page = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL)
    posted = await http.fetch(f"http://{LOCAL}:{port}/", LOCAL, method="POST", body=b"a=1")
    await http.aclose()
    assert page.body == b"page"
    assert (posted.status, posted.error) == (None, "reset: closed before response")
    assert posts == [posted.request]


@pytest.mark.parametrize(("method", "body", "error"), [
    ("GET", b"a=1", "request: a GET has no body"),
    ("HEAD", b"a=1", "request: a HEAD has no body"),
    ("PUT", b"", "request: unsupported method 'PUT'"),
    ("get", b"", "request: unsupported method 'get'"),
])
async def test_refused_requests_send_nothing(
    nursery: trio.Nursery, method: str, body: bytes, error: str
) -> None:
    requests: list[bytes] = []
    port = await recording_server(nursery, requests)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL, method=method, body=body)
    assert (result.status, result.request, result.error, requests) == (None, b"", error, [])


@pytest.mark.parametrize("path", ["/", "/a/b?c=d&e=%2F", "/p?", "/x;y?z#frag", ""])
async def test_request_target_is_what_the_request_line_carries(
    nursery: trio.Nursery, path: str
) -> None:
    requests: list[bytes] = []
    port = await recording_server(nursery, requests)
    url = f"http://{LOCAL}:{port}{path}"
    result = await client().fetch(url, LOCAL)
    target = result.request.split(b" ")[1].decode()
    assert result.error is None and request_target(url) == target
    assert request_target("ftp://example.org/") is None and request_target("http://a b/") is None


async def test_the_host_header_is_always_the_url_s(nursery: trio.Nursery) -> None:
    requests: list[bytes] = []
    port = await recording_server(nursery, requests)
    result = await client().fetch(f"http://{LOCAL}:{port}/", LOCAL, headers=[("host", "other.example")])
    assert (result.request, result.error, requests) == (b"", "request: Found multiple Host: headers", [])
