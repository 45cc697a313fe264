"""Example HTTP exchanges for the WARC bundle tests, and warcio's checker run in process."""

from __future__ import annotations

import contextlib
import io
import random
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from warcio.checker import Checker

from archiver.store.bundles import BundleWriter

DATE = datetime(2026, 11, 22, 3, 15, 0, 123456, tzinfo=UTC)
GET = b"GET /page HTTP/1.1\r\nHost: example.org\r\nUser-Agent: archiver/0.1\r\n\r\n"
HTML = b"<!doctype html><title>t</title>" + b"<p>Hello <a href=/x>x</a></p>\n" * 200
RNG = random.Random(7)
BINARY = bytes(RNG.randrange(256) for _ in range(3000)) + b"\r\n\r\n" + bytes(range(256))

# (name, url, request, head, body, truncated)
EXCHANGES = [
    (
        "plain",
        "http://example.org/page",
        GET,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(HTML),
        HTML,
        None,
    ),
    (
        "chunked-origin",
        "https://example.org/chunked",
        GET,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
        b"X-Archiver-Transfer-Encoding: chunked\r\n\r\n",
        b"<p>stored de-chunked</p>",
        None,
    ),
    (
        "truncated",
        "http://example.org/big",
        GET,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n",
        b"partial " * 100,
        "length",
    ),
    (
        "binary, raw head bytes",
        "http://example.org/img.bin",
        GET,
        b"HTTP/1.0 200 OK\r\nX-Odd:no-space\r\nX-Latin: caf\xe9\r\nX-Folded: a\r\n  b\r\n\r\n",
        BINARY,
        None,
    ),
    (
        "empty body",
        "http://example.org/empty",
        GET,
        b"HTTP/1.1 204 No Content\r\nServer: t\r\n\r\n",
        b"",
        None,
    ),
    (
        "post",
        "http://example.org/form",
        b"POST /form HTTP/1.1\r\nHost: example.org\r\nContent-Length: 7\r\n\r\na=1&b=2",
        b"HTTP/1.1 303 See Other\r\nLocation: /done\r\nContent-Length: 0\r\n\r\n",
        b"",
        None,
    ),
]


def check(*paths: Path) -> tuple[int, int]:
    """Run warcio's checker in process: (exit value, number of records whose digests passed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = Checker(
            SimpleNamespace(inputs=[str(p) for p in paths], verbose=True)
        ).process_all()
    return status, out.getvalue().count("digest pass")


def write_all(writer: BundleWriter, count: int = len(EXCHANGES)) -> list:
    return [
        writer.write_exchange(
            url=url,
            ip="127.0.0.1",
            date=DATE,
            request=request,
            response_head=head,
            response_body=body,
            truncated=truncated,
        )
        for _, url, request, head, body, truncated in EXCHANGES[:count]
    ]
