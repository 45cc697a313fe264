"""Property tests (hypothesis): HttpClient.fetch returns a FetchResult for any URL and any bytes
a server sends, against real servers on 127.0.0.1; it never raises."""

from __future__ import annotations

import contextlib
import functools
import ssl
import struct
from collections.abc import Awaitable, Callable

import trio
import trustme
from hypothesis import example, given, settings
from hypothesis import strategies as st

from archiver.config import CrawlConfig
from archiver.crawl.http import FetchResult, HttpClient
from archiver.web.urls import normalize, origin_parts, split_origin
from tests.support.crawls import LOOPBACK
from tests.support.fuzzing import examples
from tests.support.urlstrategies import bases, hosts, links, normal_bases, odd_text, paths, queries, userinfo

LOCAL = "127.0.0.1"
# The kinds before ':' in FetchResult.error that the crawler counts.
ERROR_KINDS = {"url", "request", "connect", "timeout", "tls", "reset", "protocol"}
EXAMPLES = settings(max_examples=examples(80), deadline=None)
Handler = Callable[[trio.SocketStream], Awaitable[None]]


def fetch_all(handler: Handler, make_urls: Callable[[int], list[str]],
              tls: ssl.SSLContext | None = None) -> list[FetchResult]:
    """Serve `handler` on a free loopback port (over TLS with `tls`) and fetch each URL
    `make_urls(port)` gives, in order, with one client (so a kept-alive connection is reused or
    found dead)."""

    async def handle(stream: trio.abc.Stream) -> None:
        try:
            await handler(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client hung up first, or the handshake failed: the client is under test
        finally:
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.aclose()

    async def main() -> list[FetchResult]:
        async with trio.open_nursery() as nursery:
            if tls is None:
                serve = functools.partial(trio.serve_tcp, handle, 0, host=LOCAL)
            else:
                serve = functools.partial(trio.serve_ssl_over_tcp, handle, 0, tls, host=LOCAL)
            listeners = await nursery.start(serve)
            listener = listeners[0]
            port = getattr(listener, "transport_listener", listener).socket.getsockname()[1]
            http = HttpClient(CrawlConfig(user_agent="archiver-test/1.0", connect_timeout=2,
                                          first_byte_timeout=2, total_timeout=4),
                              allowed_networks=LOOPBACK)
            results = [await http.fetch(url, LOCAL) for url in make_urls(port)]
            await http.aclose()
            nursery.cancel_scope.cancel()
        return results

    return trio.run(main)


def check(result: FetchResult) -> None:
    assert isinstance(result, FetchResult)
    if result.status is None:
        assert result.error is not None and result.error.split(":", 1)[0] in ERROR_KINDS, result.error
    else:
        assert result.error is None and 100 <= result.status <= 999


# -- any URL -----------------------------------------------------------------------------------
def recording_server(seen: list[bytes]) -> Handler:
    """Answers each request on a connection with a small page; keeps each request line."""

    async def handler(stream: trio.SocketStream) -> None:
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some()
                if not chunk:
                    return
                data += chunk
            head, _, data = data.partition(b"\r\n\r\n")
            seen.append(head.split(b"\r\n", 1)[0])
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    return handler


@st.composite
def local_urls(draw: st.DrawFn) -> Callable[[int], str]:
    """A URL whose port is the test server's (so a well-formed one is answered), or an odd one."""
    scheme = draw(st.sampled_from(["http", "http", "https", "HTTP", "ftp", ""]))
    port = draw(st.one_of(st.just("{port}"), st.sampled_from(["", "0", "65536", "x", "-1", "\uff18"])))
    tail = draw(paths)
    if draw(st.booleans()):
        tail += "?" + draw(queries(1))
    if draw(st.integers(0, 3)) == 0:
        tail += "#" + draw(odd_text)
    url = f"{scheme}://{draw(userinfo)}{draw(hosts)}:{port}{tail}"
    return lambda real: url.replace("{port}", str(real))


@EXAMPLES
@given(local_urls())
@example(lambda port: f"http://a.test:{port}/q?http://example.org/é")
@example(lambda port: f"http://a.test:{port}/p?http://example.org/a b")
@example(lambda port: f"http://[::1]:{port}/")
@example(lambda port: f"http://a.test:{port}:1/")
def test_fetch_of_any_url_returns_a_result(make_url: Callable[[int], str]) -> None:
    seen: list[bytes] = []
    results = fetch_all(recording_server(seen), lambda port: [make_url(port)])
    check(results[0])
    for line in seen:  # whatever reached the server was a valid request line
        assert all(0x21 <= b <= 0x7E or b == 0x20 for b in line), line


@EXAMPLES
@given(st.one_of(normal_bases, st.builds(normalize, links, bases).filter(bool)))
@example("http://a.test/p?")
@example("http://a.test/q?http://example.org/%C3%A9")
def test_every_normalised_url_is_fetched_verbatim(url: str) -> None:
    """What normalize returns goes on the wire as it is: the request target is its path and
    query, and the server answers it."""
    head, target = split_origin(url)
    _, host, _ = origin_parts(head)
    bracketed = f"[{host}]" if ":" in host else host
    seen: list[bytes] = []
    [result] = fetch_all(recording_server(seen), lambda port: [f"http://{bracketed}:{port}{target}"])
    assert (result.error, result.status) == (None, 200)
    assert seen == [b"GET " + target.encode("ascii") + b" HTTP/1.1"]


# -- any server behaviour ----------------------------------------------------------------------
_STATUS_LINES = [b"HTTP/1.1 200 OK", b"HTTP/1.0 404 Not Found", b"HTTP/1.1 301 Moved",
                 b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", b"HTTP/1.1 999 ?", b"HTTP/1.1 20 x",
                 b"HTTP/2 200", b"ICY 200 OK", b"HTTP/1.1 200 \xff\xfe", b"", b"\x00\x01",
                 b"HTTP/1.1 101 Switching Protocols", b"HTTP/1.1 204 No Content"]  # fmt: skip
_NAMES = [b"Content-Length", b"Transfer-Encoding", b"Content-Type", b"Location", b"Connection",
          b"Content-Encoding", b"Retry-After", b"X-\xff", b"Bad Name", b"", b" Folded"]  # fmt: skip
_VALUES = [b"chunked", b"gzip, chunked", b"identity", b"0", b"2", b"5", b"-1", b"1, 2",
           b"99999999999999999999", b"close", b"keep-alive", b"/next\xe9", b"text/html; charset=\xff",
           b"", b"\x00", b"a\rb", b"br"]  # fmt: skip
_BODIES = [b"ok", b"hello world", b"5\r\nhello\r\n0\r\n\r\n", b"zz\r\nhello\r\n", b"5;ext=1\r\nhe",
           b"ffffffffffffffffff\r\n", b"0\r\nTrailer: x\r\n\r\n", b"\x1f\x8b\x08garbage",
           b"HTTP/1.1 200 OK\r\n\r\n"]  # fmt: skip
header_lines = st.tuples(
    st.one_of(st.sampled_from(_NAMES), st.binary(max_size=8)),
    st.one_of(st.sampled_from(_VALUES), st.binary(max_size=12)),
).map(lambda nv: nv[0] + b": " + nv[1])


@st.composite
def responses(draw: st.DrawFn) -> bytes:
    newline = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"]))
    lines = [draw(st.one_of(st.sampled_from(_STATUS_LINES), st.binary(max_size=20)))]
    lines += draw(st.lists(header_lines, max_size=6))
    body = draw(st.one_of(st.sampled_from(_BODIES), st.binary(max_size=40)))
    cut = draw(st.integers(0, 3))  # sometimes the bytes stop anywhere
    data = newline.join(lines) + newline + newline + body
    return data[: draw(st.integers(0, len(data)))] if cut == 0 else data


def raw_server(replies: list[bytes], reset: bool) -> Handler:
    """Per connection: read what the client sends first, answer the next reply's bytes, close
    (with a TCP reset if `reset`)."""
    pending = list(replies)

    async def handler(stream: trio.abc.Stream) -> None:
        if not await stream.receive_some() or not pending:
            return
        await stream.send_all(pending.pop(0))
        if reset:
            sock = getattr(stream, "transport_stream", stream).socket
            # SO_LINGER on with timeout 0: close() sends a RST (RFC 9293 §3.10.7)
            sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_LINGER, struct.pack("ii", 1, 0))

    return handler


@functools.cache
def server_tls() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    trustme.CA().issue_cert("a.test").configure_cert(context)
    return context


@EXAMPLES
@given(st.lists(responses(), min_size=1, max_size=3), st.sampled_from(["http", "https"]), st.booleans(),
       st.booleans())
@example([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"] * 2, "http", False, False)
@example([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], "http", True, False)
@example([b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"], "https", True, True)
def test_fetch_returns_a_result_whatever_the_server_sends(replies: list[bytes], scheme: str,
                                                          reset: bool, tls: bool) -> None:
    """Plain and TLS servers, the client speaking http or https to either."""
    results = fetch_all(raw_server(replies, reset),
                        lambda port: [f"{scheme}://a.test:{port}/"] * len(replies),
                        server_tls() if tls else None)
    assert len(results) == len(replies)
    for result in results:
        check(result)
