"""Tests for demoweb: the server over real sockets, the CLI."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import h11
import pytest
import trio

from demoweb import (
    DemoServer,
    RequestLog,
    WebSpec,
    run_demo_process,
)
from demoweb.server import start_demo
from tests.support.repo import ROOT

AGENT = "archiver/0.1 (+http://archiver.test/)"


def split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.path + ("?" + parts.query if parts.query else "")


# -- an HTTP client for the tests ------------------------------------------------------------


async def fetch_all(
    port: int, requests: list[tuple[str, str]], headers: tuple = (), method: str = "GET"
) -> list[tuple[h11.Response, bytes]]:
    """(host, target) requests in order over one keep-alive connection."""
    out = []
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        conn = h11.Connection(h11.CLIENT)
        for host, target in requests:
            hdrs = [("Host", f"{host}:{port}"), *headers]
            request = h11.Request(method=method, target=target, headers=hdrs)
            await stream.send_all(conn.send(request) + conn.send(h11.EndOfMessage()))
            response, body = None, b""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    response = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
            assert response is not None
            out.append((response, body))
            conn.start_next_cycle()
    return out


def header(response: h11.Response, name: bytes) -> bytes | None:
    return dict(response.headers).get(name)


# The server logs a request once its response is sent, so the client may see the response
# first; a last request on the same connection guarantees that the ones before it are logged.
BARRIER = ("site-000.demo", "/?barrier")


def logged(server: DemoServer) -> list[RequestLog]:
    return [entry for entry in server.log if (entry.host, entry.target) != BARRIER]


# -- the server ------------------------------------------------------------------------------


async def test_every_expected_url_is_served_as_the_model_says(nursery):
    web, server = await start_demo(nursery, WebSpec(sites=8, pages_per_site=12, port=0))
    port = web.spec.port
    urls = sorted(web.expected(AGENT))
    requests = [split(u) for u in urls]
    results: list = [None] * len(requests)

    async def worker(k: int) -> None:
        answers = await fetch_all(port, [*requests[k::4], BARRIER])
        for n, answer in zip(range(k, len(requests), 4), answers[:-1], strict=True):
            results[n] = answer

    async with trio.open_nursery() as workers:
        for k in range(4):
            workers.start_soon(worker, k)
    for (host, target), (response, body) in zip(requests, results, strict=True):
        reply = web.respond(host, target)
        assert (response.status_code, body) == (reply.status, reply.body), (host, target)
    log = logged(server)
    assert len(log) == len(urls)
    assert len({entry.conn for entry in log}) == 4  # keep-alive: one connection each
    assert log[0].method == "GET" and log[0].peer.startswith("127.0.0.1:")
    assert all(e.start <= e.end for e in log)
    assert Counter((e.host, e.target) for e in log) == Counter(requests)
    assert [e.status for e in log] == [web.respond(e.host, e.target).status for e in log]


async def test_host_header_gzip_chunked_head_and_errors(nursery):
    web, server = await start_demo(nursery, WebSpec(sites=8, pages_per_site=12, port=0))
    port = web.spec.port
    host = "site-000.demo"
    gz_page, chunked_page = web.pages(host)[5], web.pages(host)[3]
    (gz, gz_body), (plain, _), (chunked, chunked_body) = await fetch_all(
        port,
        [(host, gz_page), (host, "/js/app.js"), (host, chunked_page)],
        (("Accept-Encoding", "gzip"),),
    )
    assert header(gz, b"content-encoding") == b"gzip"
    assert gzip.decompress(gz_body) == web.respond(host, gz_page).body
    assert header(chunked, b"transfer-encoding") == b"chunked"
    assert chunked_body == web.respond(host, chunked_page).body
    assert header(plain, b"content-encoding") == b"gzip"
    [(identity, body)] = await fetch_all(
        port, [(host, gz_page)], (("Accept-Encoding", "gzip;q=0"),)
    )
    assert header(identity, b"content-encoding") is None and body == web.respond(host, gz_page).body
    [(head, head_body)] = await fetch_all(port, [(host, "/")], method="HEAD")
    assert head.status_code == 200 and head_body == b""
    assert int(header(head, b"content-length")) == len(web.respond(host, "/").body)
    requests = [("nowhere.demo", "/"), ("SITE-001.DEMO", "/%7Estaff/index.html"), BARRIER]
    answers = await fetch_all(port, requests)
    assert [r.status_code for r, _ in answers] == [400, 200, 404]
    assert [(e.host, e.status) for e in logged(server)[-2:]] == [
        ("nowhere.demo", 400),
        ("site-001.demo", 200),
    ]


async def _raw(port: int, path: str) -> trio.SocketStream:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: hostile.demo\r\n\r\n".encode())
    return stream


async def _read_until(stream: trio.SocketStream, enough) -> bytes:
    data = b""
    while not enough(data):
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
    return data


async def test_hostile_behaviours(nursery):
    web, _ = await start_demo(nursery, WebSpec(sites=1, pages_per_site=2, port=0, hostile=True))
    port = web.spec.port
    with trio.fail_after(10):
        async with await _raw(port, "/drip") as s:  # headers, a byte, then 0.5 s of silence
            data = await _read_until(s, lambda d: d.partition(b"\r\n\r\n")[2])
            assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"\r\n\r\n.")
            with trio.move_on_after(0.25) as quiet:
                await s.receive_some(1)
            assert quiet.cancelled_caught
            assert await s.receive_some(10) == b"."
        async with await _raw(port, "/hang") as s:
            with trio.move_on_after(0.3) as silent:
                await s.receive_some(1)
            assert silent.cancelled_caught
        async with await _raw(port, "/endless") as s:
            data = await _read_until(s, lambda d: len(d) > 3_000_000)
            assert len(data) > 3_000_000 and b"content-length" not in data[:500].lower()
        async with await _raw(port, "/bigheaders") as s:
            data = await _read_until(s, lambda d: len(d) > 2_000_000)
            assert b"\r\n\r\n" not in data and data.count(b"X-Filler-") > 10_000
        async with await _raw(port, "/badstatus") as s:
            conn = h11.Connection(h11.CLIENT)
            conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
            conn.receive_data(await _read_until(s, lambda d: False))
            with pytest.raises(h11.RemoteProtocolError):
                conn.next_event()
        async with await _raw(port, "/reset") as s:
            received = b""
            with pytest.raises(trio.BrokenResourceError):
                while chunk := await s.receive_some(65536):
                    received += chunk
            assert len(received) < 100_000
        async with await _raw(port, "/lie") as s:
            data = await _read_until(s, lambda d: False)
            assert b"Content-Length: 100000" in data and data.endswith(b"\r\n\r\n0123456789")
        [(bomb, body)] = await fetch_all(port, [("hostile.demo", "/bomb")])
        assert header(bomb, b"content-encoding") == b"gzip" and len(body) < 2 << 20
        inflated = zlib.decompressobj(31).decompress(body, 64 << 20)
        assert len(inflated) == 64 << 20 and not inflated.strip(b"\0")


# -- the command line ------------------------------------------------------------------------


async def test_cli_process_serves_logs_and_stops(tmp_path: Path):
    log = tmp_path / "requests.jsonl"
    spec = WebSpec(sites=2, pages_per_site=3, port=0, trap=False)
    with run_demo_process(spec, log) as (web, port, proc):
        assert web.spec.port == port and web.hosts == [
            "site-000.demo",
            "site-001.demo",
            "robots500.demo",
        ]
        [(response, body), _] = await fetch_all(port, [("site-001.demo", "/robots.txt"), BARRIER])
        assert (
            response.status_code == 200 and body == web.respond("site-001.demo", "/robots.txt").body
        )
        entry = json.loads(log.read_text().splitlines()[0])
        assert (entry["host"], entry["target"], entry["status"]) == (
            "site-001.demo",
            "/robots.txt",
            200,
        )
    assert proc.returncode == 0


def test_cli_hosts():
    out = subprocess.run(
        [sys.executable, "-m", "demoweb", "hosts", "--sites=3", "--hostile", "--no-trap"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    hosts = [line.split()[1] for line in out.splitlines() if not line.startswith("#")]
    assert hosts == [
        "site-000.demo",
        "site-001.demo",
        "site-002.demo",
        "robots500.demo",
        "hostile.demo",
    ]
