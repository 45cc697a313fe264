"""The demo web's HTTP/1.1 server (trio + h11) on 127.0.0.1, and helpers to run it."""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import functools
import gzip
import hashlib
import itertools
import json
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import h11
import trio

from demoweb.model import DemoWeb, Reply, WebSpec

ADDRESS = "127.0.0.1"
# Apache closes idle keep-alive connections after 5 s, nginx after 75 s; 20 s lets a polite
# crawler's rests (Crawl-delay: 1 and up) reuse its connection and still frees idle ones.
IDLE_TIMEOUT = 20.0
CHUNK = 4096  # chunked replies are cut into chunks of this size
RAW_BEHAVIOURS = frozenset({"drip", "hang", "endless", "bigheaders", "badstatus", "reset", "lie"})
_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class RequestLog:
    """One request: wall-clock times at request head received and at response fully sent."""

    host: str
    target: str
    method: str
    start: float
    end: float
    status: int
    peer: str
    conn: int
    agent: str = ""  # the User-Agent sent (tells the processes of a cluster apart)


class _Connection:
    """One accepted socket: an h11 state machine over a trio stream.

    The raw request line of every request is appended to `request_lines` before h11 judges it
    (a line h11 refuses is kept too), so a test can check what crawlers really sent."""

    def __init__(self, stream: trio.SocketStream, request_lines: list[bytes]):
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER)
        self._request_lines = request_lines
        self._unparsed = bytearray()  # bytes received that h11 has not turned into events yet

    async def next_event(self) -> object:
        """The next h11 event, or None if the peer went away or stayed idle too long."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError:
                self._request_lines.append(self._first_line(self._unparsed))
                raise
            if event is not h11.NEED_DATA:
                consumed = len(self._unparsed) - len(self.h11.trailing_data[0])
                if isinstance(event, h11.Request):
                    self._request_lines.append(self._first_line(self._unparsed[:consumed]))
                del self._unparsed[:consumed]
                return event
            with trio.move_on_after(IDLE_TIMEOUT):
                data = await self.stream.receive_some(65536)
                self._unparsed += data
                self.h11.receive_data(data)
                continue
            return None

    async def read_request(self) -> tuple[h11.Request, float] | None:
        """The next request (its body drained) and when its head arrived; None at the end."""
        request = await self.next_event()
        if not isinstance(request, h11.Request):
            return None
        start = time.time()
        while True:
            event = await self.next_event()
            if isinstance(event, h11.EndOfMessage):
                return request, start
            if not isinstance(event, h11.Data):
                return None

    @staticmethod
    def _first_line(head: bytes | bytearray) -> bytes:
        return bytes(head).lstrip(b"\r\n").split(b"\n", 1)[0].removesuffix(b"\r")


class DemoServer:
    """Serves a DemoWeb by Host header; logs every request to `log` (and to a JSON-lines file)."""

    def __init__(self, web: DemoWeb, *, log_path: Path | None = None, cache_size: int = 4096):
        self.web = web
        self.log: list[RequestLog] = []
        self.request_lines: list[bytes] = []  # every request line as received, in order
        self._log_path = log_path
        self._log_file: IO[str] | None = None
        self._conn_ids = itertools.count(1)
        self._cache: OrderedDict[tuple[str, str], tuple[Reply, bytes | None]] = OrderedDict()
        self._cache_size = cache_size
        self._date = (0, "")

    def change(self, web: DemoWeb) -> None:
        """Serve ``web`` from now on (another version of the same sites: the web changed)."""
        self.web = web
        self._cache.clear()

    async def serve(
        self,
        listeners: Sequence[trio.SocketListener] | None = None,
        *,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled; reports the port through task_status (for nursery.start).

        Without listeners it binds 127.0.0.1 on the web's own port."""
        if listeners is None:
            listeners = await trio.open_tcp_listeners(self.web.spec.port, host=ADDRESS)
        port = listeners[0].socket.getsockname()[1]
        with contextlib.ExitStack() as files:
            if self._log_path is not None:
                self._log_file = files.enter_context(self._log_path.open("a", encoding="utf-8"))
            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, self._handle, list(listeners))
                task_status.started(port)

    async def _handle(self, stream: trio.SocketStream) -> None:
        conn_id = next(self._conn_ids)
        host, port = stream.socket.getpeername()[:2]
        peer = f"{host}:{port}"
        conn = _Connection(stream, self.request_lines)
        try:
            while (received := await conn.read_request()) is not None:
                keep = await self._answer(conn, *received, peer, conn_id)
                if not keep or conn.h11.our_state is not h11.DONE:
                    break
                conn.h11.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            with contextlib.suppress(trio.BrokenResourceError, h11.LocalProtocolError):
                response = h11.Response(status_code=exc.error_status_hint, headers=[])
                await stream.send_all(conn.h11.send(response) + conn.h11.send(h11.EndOfMessage()))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    def _reply(self, host: str, target: str, gzip_ok: bool) -> tuple[Reply, bytes]:
        """The model's reply (LRU-cached) and the body to send, gzipped if asked for."""
        key = (host, target)
        entry = self._cache.get(key)
        if entry is None:
            entry = (self.web.respond(host, target), None)
            self._cache[key] = entry
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        reply, packed = entry
        if reply.behaviour != "gzip" or not gzip_ok:
            return reply, reply.body
        if packed is None:
            packed = gzip.compress(reply.body, 6, mtime=0)
            self._cache[key] = (reply, packed)
        return reply, packed

    def _http_date(self) -> str:
        now = int(time.time())
        if self._date[0] != now:
            self._date = (now, email.utils.formatdate(now, usegmt=True))
        return self._date[1]

    async def _answer(
        self, conn: _Connection, request: h11.Request, start: float, peer: str, conn_id: int
    ) -> bool:
        """Answer one request; False if the connection must close afterwards."""
        headers = {name: value for name, value in request.headers}
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host.rpartition(":")[2].isdigit():
            host = host.rpartition(":")[0]
        target = request.target.decode("latin-1")
        if target.lower().startswith(("http://", "https://")):
            # The absolute form a client sends to a proxy (RFC 9112 section 3.2.2): the demo web
            # serves as the proxy of wget's WARC tests, its names unknown to the system resolver.
            _, _, rest = target.partition("://")
            authority, slash, path = rest.partition("/")
            host = authority.rpartition(":")[0] if authority.rpartition(":")[2].isdigit() else authority
            host, target = host.lower(), slash + path or "/"
        method = request.method.decode("latin-1")
        agent = headers.get(b"user-agent", b"").decode("latin-1")
        reply, body = self._reply(host, target, _accepts_gzip(headers.get(b"accept-encoding", b"")))
        keep = reply.behaviour not in RAW_BEHAVIOURS
        if not keep:
            try:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await _act_out(conn.stream, reply.behaviour)
            finally:  # logged even when the server is cancelled mid-act
                self._record(
                    RequestLog(host, target, method, start, time.time(), reply.status, peer, conn_id,
                               agent)
                )
            return keep
        current = validators(reply)
        if current and not_modified(current, headers):  # no representation headers, no body
            reply = Reply(304, [], b"")
            body = reply.body
        out = [("Date", self._http_date()), ("Server", "demoweb"), *reply.headers, *current]
        if reply.behaviour == "gzip":
            out.append(("Vary", "Accept-Encoding"))
            if body is not reply.body:
                out.append(("Content-Encoding", "gzip"))
        if reply.behaviour != "chunked" and reply.status != 304:
            out.append(("Content-Length", str(len(body))))
        data = conn.h11.send(h11.Response(status_code=reply.status, headers=out))
        if method != "HEAD":
            step = CHUNK if reply.behaviour == "chunked" else max(len(body), 1)
            for at in range(0, len(body), step):
                data += conn.h11.send(h11.Data(data=body[at : at + step]))
        data += conn.h11.send(h11.EndOfMessage())
        # Taken before the send: a lower bound of when the client had the whole response, so
        # a politeness check on (next start - end) can never pass by this task running late.
        end = time.time()
        try:
            await conn.stream.send_all(data)
        finally:  # logged even when the client hangs up mid-body (a size cap, say)
            self._record(RequestLog(host, target, method, start, end, reply.status, peer, conn_id,
                                    agent))
        return keep

    def _record(self, entry: RequestLog) -> None:
        self.log.append(entry)
        if self._log_file is not None:
            self._log_file.write(json.dumps(dataclasses.asdict(entry)) + "\n")
            self._log_file.flush()


# Images never change between versions of the web: dated, not tagged.
IMAGES_MODIFIED = "Sat, 01 Jan 2000 00:00:00 GMT"
# Served without a validator, as many servers serve them: a revisit gets them whole again.
UNVALIDATED = ("text/css", "text/javascript", "application/javascript")


def validators(reply: Reply) -> list[tuple[str, str]]:
    """What a 200 answer says to check it later by (RFC 9110 §8.8): an image its Last-Modified
    date, a stylesheet or a script nothing, anything else an ETag of its body."""
    if reply.status != 200 or reply.behaviour not in ("normal", "gzip", "chunked"):
        return []
    kind = next((v for k, v in reply.headers if k.lower() == "content-type"), "")
    if kind.startswith("image/"):
        return [("Last-Modified", IMAGES_MODIFIED)]
    if kind.startswith(UNVALIDATED):
        return []
    return [("ETag", '"' + hashlib.sha1(reply.body).hexdigest()[:16] + '"')]


def not_modified(current: list[tuple[str, str]], request: dict[bytes, bytes]) -> bool:
    """Whether a conditional request's validators match the answer's (then it is a 304)."""
    ours = dict(current)
    match = request.get(b"if-none-match")
    if match is not None:
        return "ETag" in ours and ours["ETag"] in match.decode("latin-1").split(", ")
    since = request.get(b"if-modified-since")
    if since is None or "Last-Modified" not in ours:
        return False
    try:
        asked = email.utils.parsedate_to_datetime(since.decode("latin-1"))
    except (TypeError, ValueError, IndexError):
        return False
    return asked >= email.utils.parsedate_to_datetime(ours["Last-Modified"])


def _accepts_gzip(value: bytes) -> bool:
    """Does an Accept-Encoding value allow gzip (RFC 9110 §12.5.3: q=0 means not acceptable)."""
    for item in value.decode("latin-1").lower().split(","):
        coding, _, params = item.partition(";")
        if coding.strip() in ("gzip", "x-gzip", "*"):
            q = params.strip()
            return not q.startswith("q=") or q[2:].strip() not in (
                "0",
                "0.",
                "0.0",
                "0.00",
                "0.000",
            )
    return False


_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"


@functools.cache
def _big_headers() -> bytes:
    return b"".join(b"X-Filler-%06d: %s\r\n" % (n, b"h" * 100) for n in range(36000))


async def _act_out(stream: trio.SocketStream, behaviour: str) -> None:
    """Play a hostile server on a raw stream; the connection is closed afterwards."""
    if behaviour == "drip":  # 1 byte per 0.5 s, forever
        await stream.send_all(_HEAD + b"\r\n")
        while True:
            await stream.send_all(b".")
            await trio.sleep(0.5)
    elif behaviour == "hang":  # accepts and reads, never answers
        while await stream.receive_some(65536):
            pass
    elif behaviour == "endless":  # a close-delimited body that never ends
        await stream.send_all(_HEAD + b"\r\n")
        block = b"<p>and on and on</p>\n" * 3000
        while True:
            await stream.send_all(block)
    elif behaviour == "bigheaders":  # about 4 MB of header fields
        await stream.send_all(_HEAD + _big_headers() + b"Content-Length: 2\r\n\r\nok")
    elif behaviour == "badstatus":
        await stream.send_all(b"HTTP/1.1 two-hundred OK?!\r\nContent-Length: 5\r\n\r\nhello")
    elif behaviour == "reset":  # 5,000 of 100,000 promised bytes, then a TCP RST
        await stream.send_all(_HEAD + b"Content-Length: 100000\r\n\r\n" + b"r" * 5000)
        # SO_LINGER on, timeout 0: close() discards the connection with a RST (RFC 9293 §3.10.7)
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    elif behaviour == "lie":  # promises 100,000 bytes, sends 10, closes
        await stream.send_all(_HEAD + b"Content-Length: 100000\r\n\r\n" + b"0123456789")


async def start_demo(nursery: trio.Nursery, spec: WebSpec) -> tuple[DemoWeb, DemoServer]:
    """Bind 127.0.0.1 (port 0: a free one), build the web for the real port, serve it."""
    listeners = await trio.open_tcp_listeners(spec.port, host=ADDRESS)
    port = listeners[0].socket.getsockname()[1]
    web = DemoWeb(dataclasses.replace(spec, port=port))
    server = DemoServer(web)
    await nursery.start(server.serve, listeners)
    return web, server


def serve_args(spec: WebSpec) -> list[str]:
    """Command-line options of `python -m demoweb` that describe `spec`."""
    args = [f"--sites={spec.sites}", f"--pages={spec.pages_per_site}", f"--port={spec.port}"]
    args += [f"--seed={spec.seed}", f"--domain={spec.domain}", f"--version={spec.version}"]
    args += ["--hostile"] * spec.hostile + ["--odd"] * spec.odd + ["--modern"] * spec.modern
    return args + ["--no-trap"] * (not spec.trap)


@contextlib.contextmanager
def run_demo_process(
    spec: WebSpec, log_path: Path | None = None
) -> Iterator[tuple[DemoWeb, int, subprocess.Popen[str]]]:
    """Run `python -m demoweb serve` in a child process; stop it (SIGTERM) on exit."""
    command = [sys.executable, "-m", "demoweb", "serve", *serve_args(spec)]
    if log_path is not None:
        command.append(f"--log={log_path}")
    proc = subprocess.Popen(command, cwd=_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith(f"listening on {ADDRESS}:"):
            raise RuntimeError(f"demo server did not start: {line!r}, exit {proc.poll()}")
        port = int(line.rsplit(":", 1)[1])
        yield DemoWeb(dataclasses.replace(spec, port=port)), port, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
