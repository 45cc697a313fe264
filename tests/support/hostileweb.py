"""A web of two sites on 127.0.0.1, served from its own process: one paced, one hostile.

``paced.test`` has a home page linking ``PACED_PAGES`` small pages; a crawler with a rest between
fetches asks for them at a steady pace, which the request log shows. ``hostile.test``'s home page
links the responses that cost a crawler work in proportion to what the server chooses:

- ``/codings``: ``Content-Encoding: gzip,gzip,...`` with ``LAYERS`` stored-gzip layers (the 64 KiB
  header cap admits about 13,000) around an HTML page of ``INNER`` bytes; undoing every layer reads
  each layer's whole input: about LAYERS x (INNER + LAYERS x 12) bytes, gigabytes for a few hundred
  KB on the wire.
- ``/huge.html``, ``/huge.css``: ``HUGE`` bytes (just under the crawler's default 16 MiB response
  cap) of markup and of a stylesheet, a link every 60 bytes (to a handful of URLs).

Run as ``python -m tests.support.hostileweb LOG TARGETS`` (the heavy ones the hostile home page
links, comma-separated): it prints ``listening on 127.0.0.1:<port>`` and
appends a JSON line per answer sent to LOG: host, target and the wall-clock time its last byte went
to the socket (``sent``). ``HostileWeb`` starts and stops it.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

PACED, HOSTILE = "paced.test", "hostile.test"
PACED_PAGES = 150
LAYERS = 10_000
INNER = 200_000
HUGE = 16 * 2**20 - 4096
HEAVY = ("/codings", "/huge.html", "/huge.css")
ROOT = Path(__file__).resolve().parents[2]
Answers = dict[tuple[str, str], tuple[bytes, list[tuple[bytes, bytes]]]]


def stacked_codings(layers: int = LAYERS, inner: int = INNER) -> tuple[bytes, bytes]:
    """(the Content-Encoding value, the body) of ``layers`` stored-gzip layers around a page."""
    page = b"<html><body>" + b"<p>stacked <a href='/'>home</a></p>\n" * (inner // 36)
    for _ in range(layers):
        page = gzip.compress(page, compresslevel=0, mtime=0)
    return b",".join([b"gzip"] * layers), page


def _huge(unit: bytes) -> bytes:
    return unit * (HUGE // len(unit))


def _html(body: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    return body, [(b"Content-Type", b"text/html")]


def site_answers(heavy: tuple[str, ...] = HEAVY) -> Answers:
    """(host, target) -> (body, headers) of every resource of the two sites; the hostile home
    page links ``heavy``."""
    robots = (b"User-agent: *\nAllow: /\n", [(b"Content-Type", b"text/plain")])
    pages = "".join(f"<a href='/p{n}.html'>{n}</a>\n" for n in range(PACED_PAGES))
    answers = {
        (PACED, "/robots.txt"): robots,
        (PACED, "/"): _html(f"<html><body>{pages}</body></html>".encode()),
        (HOSTILE, "/robots.txt"): robots,
        (HOSTILE, "/"): _html(b"".join(b"<a href='%s'>x</a>" % t.encode() for t in heavy)),
        (HOSTILE, "/huge.html"): _html(_huge(b"<p>a <a href='/more.html'>link</a> and more</p>\n")),
        (HOSTILE, "/huge.css"): (_huge(b".a{background:url(/b1.png)} .b{color:#123456}\n"),
                                 [(b"Content-Type", b"text/css")]),
    }
    for n in range(PACED_PAGES):
        answers[(PACED, f"/p{n}.html")] = _html(f"<html><body>page {n}</body></html>".encode())
    coding, body = stacked_codings()
    answers[(HOSTILE, "/codings")] = (body, [(b"Content-Type", b"text/html"),
                                             (b"Content-Encoding", coding)])
    return answers


def _serve(conn: socket.socket, answers: Answers, log: threading.Lock, out: TextIO) -> None:
    """Answer the requests of one connection (kept alive) until the client closes it."""
    buffer = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            head, buffer = buffer.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            target = lines[0].split(b" ")[1].decode()
            host = next((line.split(b":", 1)[1].strip().decode().rsplit(":", 1)[0]
                         for line in lines[1:] if line.lower().startswith(b"host:")), "")
            body, headers = answers.get((host, target), (b"not here\n", []))
            status = b"200 OK" if (host, target) in answers else b"404 Not Found"
            fields = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
            try:
                conn.sendall(b"HTTP/1.1 " + status + b"\r\n" + fields
                             + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            except OSError:
                return
            with log:
                out.write(json.dumps({"host": host, "target": target, "sent": time.time()}) + "\n")
                out.flush()


def main(log_path: str, heavy: str) -> None:
    answers = site_answers(tuple(heavy.split(",")))
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"listening on 127.0.0.1:{listener.getsockname()[1]}", flush=True)
    lock = threading.Lock()
    with open(log_path, "a") as out:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_serve, args=(conn, answers, lock, out), daemon=True).start()


@dataclass(frozen=True)
class Sent:
    host: str
    target: str
    sent: float


@dataclass
class HostileWeb:
    """The server process's port and request log."""

    port: int
    log: Path

    def origin(self, host: str) -> str:
        return f"http://{host}:{self.port}"

    def hosts_file(self) -> str:
        return f"127.0.0.1 {PACED}\n127.0.0.1 {HOSTILE}\n"

    def sent(self) -> list[Sent]:
        return [Sent(**json.loads(line)) for line in self.log.read_text().splitlines()]


@contextlib.contextmanager
def hostile_web(log: Path, heavy: tuple[str, ...] = HEAVY) -> Iterator[HostileWeb]:
    """Run the server in a child process until the block ends; the hostile home page links
    ``heavy``."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.hostileweb", str(log),
                             ",".join(heavy)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on 127.0.0.1:"):
            raise RuntimeError(f"hostile web did not start: {line!r}, exit {proc.poll()}")
        yield HostileWeb(int(line.rsplit(":", 1)[1]), log)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
