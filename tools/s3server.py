"""moto's standalone S3 server on 127.0.0.1, for the tests and the object-store benchmark.

``running_moto()`` starts ``moto.server`` (the ``moto[server]`` test dependency) as a subprocess
on a free port, waits until it answers an HTTP request (polled, with a deadline), yields its
endpoint URL and stops it on the way out. moto keeps every object in its memory.

``StoppableEndpoint`` stands in front of it for the fault tests (and a chaos benchmark): a port
of its own that relays every connection to the server, and that can be *stopped* (every
connection cut, the port refusing new ones, as a stopped S3 server), made to *hang* or to *fail*
(503 to every request), and *started* again on the same port. Stopping moto itself would empty
its memory; a real store keeps its objects across a restart, and so does moto behind a stopped
endpoint.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlsplit

STARTUP_DEADLINE = 60.0
REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": REGION}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    # Straight to loopback: a proxy named in the environment must not stand in between.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextlib.contextmanager
def running_moto() -> Iterator[str]:
    """The endpoint URL of a moto S3 server that runs until the block ends."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # The server logs every request on stderr: a file, not a pipe nobody drains.
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env={**os.environ, **CREDENTIALS}, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + STARTUP_DEADLINE
            while not _answers(endpoint + "/"):
                if server.poll() is not None:
                    log.seek(0)
                    output = log.read().decode(errors="replace")
                    raise RuntimeError(f"moto server exited with {server.returncode}: {output}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not answer on {endpoint} in {STARTUP_DEADLINE} s")
                time.sleep(0.05)
            yield endpoint
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


class StoppableEndpoint:
    """A port on 127.0.0.1 in front of ``target`` (an ``http://host:port`` URL); ``url`` is the
    endpoint to give clients. It relays each connection until told otherwise:

    - ``stop()``: the port closed, open connections reset (a stopped server);
    - ``hang()``: connections accepted and never answered (a hung server);
    - ``fail()``: every request answered ``503 SlowDown`` (a failing server);
    - ``start()``: relaying again, on the same port.

    Each change resets the connections open before it; changes may come from any thread, one
    at a time. Threads do the work; ``close`` (or leaving a ``with`` block) stops it for good."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode = "stopped"
        self._lock = threading.Lock()  # the mode and the open sockets
        self._changing = threading.Lock()  # one change at a time
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self.start()

    def start(self) -> None:
        self._become("relay")

    def hang(self) -> None:
        self._become("hang")

    def fail(self) -> None:
        self._become("fail")

    def stop(self) -> None:
        self._become("stopped")

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> StoppableEndpoint:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _become(self, mode: str) -> None:
        with self._changing:
            self._change(mode)

    def _change(self, mode: str) -> None:
        with self._lock:
            self.mode = mode
            cut, self._sockets = self._sockets, set()
        for sock in cut:
            _reset(sock)
        if mode == "stopped" and self._listener is not None:
            listener, self._listener = self._listener, None
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the thread
            listener.close()
            assert self._accepting is not None
            self._accepting.join()
        elif mode != "stopped" and self._listener is None:
            self._listen()

    def _listen(self) -> None:
        """Listen on the port again (retried for a while: a client's outgoing connection may
        hold that port number for a moment)."""
        deadline = time.monotonic() + STARTUP_DEADLINE
        while True:
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("127.0.0.1", self.port))
                break
            except OSError:
                listener.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        listener.listen(64)
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, args=(listener,), daemon=True,
                                           name="endpoint-accept")
        self._accepting.start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # stopped
                return
            with self._lock:
                mode = self.mode
                self._sockets.add(client)
            if mode == "relay":
                self._relay_to_target(client)
            elif mode == "stopped":  # accepted as the port closed
                self._forget(client)
            elif mode == "fail":
                threading.Thread(target=self._answer_503, args=(client,), daemon=True,
                                 name="endpoint-fail").start()
            # "hang": held, unanswered, until the next change resets it

    def _relay_to_target(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            self._forget(client)
            return
        upstream.settimeout(None)
        with self._lock:
            if client not in self._sockets:  # reset by a change meanwhile
                _reset(upstream)
                return
            self._sockets.add(upstream)
        ended = [0]  # directions done
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._relay, args=(source, sink, ended), daemon=True,
                             name="endpoint-relay").start()

    def _relay(self, source: socket.socket, sink: socket.socket, ended: list[int]) -> None:
        """One direction of a connection; the second direction to end closes both sockets."""
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:  # reset by a peer, or cut by a change
            self._forget(source, sink)
            return
        with self._lock:
            ended[0] += 1
            last = ended[0] == 2
            if last:
                self._sockets -= {source, sink}
        if last:
            source.close()
            sink.close()

    def _answer_503(self, client: socket.socket) -> None:
        """Read a request's head, answer 503 SlowDown and close (the body, if any, unread)."""
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 1 << 16:
                if not (data := client.recv(1 << 12)):
                    break
                head += data
            body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                    b"<Message>Please reduce your request rate.</Message></Error>")
            client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                           b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass
        self._forget(client)

    def _forget(self, *sockets: socket.socket) -> None:
        with self._lock:
            self._sockets.difference_update(sockets)
        for sock in sockets:
            _reset(sock)


def _reset(sock: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0): the peer's next read or write fails at once. (The
    shutdown wakes a thread blocked reading it, and sends nothing.)"""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    sock.close()
