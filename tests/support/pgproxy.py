"""A TCP proxy in front of a PostgreSQL server that can lose the answer to one statement.

``lose_answer_to(needle)``: the next time a client sends bytes holding ``needle`` (a statement's
text, or ``b"COMMIT"``), the server runs it (and commits it) as usual, but its answer never
reaches the client: the proxy drops it and closes both sides of that connection. The client sees
the connection die with the outcome of its statement unknown, which is what a server crash or a
network cut right after a commit does. Connections made afterwards are passed through unchanged.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class PgProxy:
    """Listens on a free loopback port and forwards each connection to ``port``."""

    def __init__(self, port: int) -> None:
        self.target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._needle: bytes | None = None
        self.cut = threading.Event()  # set once an answer was lost
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._start(self._accept)

    def url(self, database: str, user: str) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def lose_answer_to(self, needle: bytes) -> None:
        with self._lock:
            self._needle = needle
            self.cut.clear()

    def close(self) -> None:
        self._closed = True
        _shut(self._listener)  # wakes the accepting thread, as shutting a socket wakes its reader
        self._listener.close()
        for sock in self._sockets:
            _shut(sock)
        for thread in self._threads:
            thread.join(5)
        for sock in self._sockets:
            sock.close()

    def _start(self, target, *args) -> None:  # type: ignore[no-untyped-def]
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self._sockets += [client, server]
            armed = threading.Event()  # this connection sent the needle: lose the next answer
            self._start(self._upstream, client, server, armed)
            self._start(self._downstream, server, client, armed)

    def _upstream(self, client: socket.socket, server: socket.socket, armed: threading.Event) -> None:
        for data in _chunks(client):
            with self._lock:
                if self._needle is not None and self._needle in data:
                    self._needle = None
                    armed.set()
            if not _send(server, data):
                break
        _shut(server)

    def _downstream(self, server: socket.socket, client: socket.socket, armed: threading.Event) -> None:
        for data in _chunks(server):
            if armed.is_set():  # the answer to the statement: dropped, and the connection cut
                for sock in (client, server):
                    _shut(sock)
                self.cut.set()
                return
            if not _send(client, data):
                break
        _shut(client)


def _chunks(sock: socket.socket) -> Iterator[bytes]:
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        yield data


def _send(sock: socket.socket, data: bytes) -> bool:
    """False if the other side is gone."""
    try:
        sock.sendall(data)
    except OSError:
        return False
    return True


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
