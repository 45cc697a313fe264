"""A Chrome DevTools protocol client for trio.

Two layers, as h11 is to an HTTP client. :class:`Protocol` is the message layer, pure: it numbers
commands, matches each response to its command, routes events by method and session (flat mode:
one websocket carries every page's session, each message names its ``sessionId``), and turns an
error response into a :class:`CommandError` naming the method and the error; it does no I/O.
:class:`DevTools` is the trio shell over one websocket (trio-websocket): a reader task in the
caller's nursery, a timeout on every command, and a closed connection fails every waiting command
at once.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import AsyncIterator, Hashable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import trio
from trio_websocket import ConnectionClosed, HandshakeError, WebSocketConnection, open_websocket_url

COMMAND_TIMEOUT = 30.0  # seconds a command may wait for its response
MAX_MESSAGE = 64 << 20  # bytes of one message from the browser (a screenshot or a body is large)


class DevToolsError(Exception):
    """Anything that went wrong on the DevTools connection."""


class ProtocolError(DevToolsError):
    """A message from the browser that is not a DevTools protocol message."""


class CommandError(DevToolsError):
    """A command the browser answered with an error."""

    def __init__(self, method: str, code: int | None, message: str, data: str = "") -> None:
        super().__init__(f"{method}: {message}" + (f" ({data})" if data else "") +
                         (f" [{code}]" if code is not None else ""))
        self.method = method
        self.code = code
        self.message = message


class CommandTimeout(DevToolsError):
    """A command that got no response in time."""


class ConnectionLost(DevToolsError):
    """The connection closed before (or while) a command waited for its response."""


@dataclass(frozen=True)
class Event:
    method: str
    params: dict[str, Any]
    session: str | None


@dataclass(frozen=True)
class Response:
    """The answer to command ``id``: its result, or the error it failed with."""

    id: int
    result: dict[str, Any] | None
    error: CommandError | None


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is a JSON {type(value).__name__}, not an object")
    return value


def parse_message(data: str | bytes) -> tuple[int, dict[str, Any]] | Event:
    """One message from the browser: ``(id, message)`` for a response, or an :class:`Event`.
    Anything else raises :class:`ProtocolError` saying what is wrong with it."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"a message that is not JSON: {str(error)[:200]}") from None
    message = _object(message, "a message")
    session = message.get("sessionId")
    if session is not None and not isinstance(session, str):
        raise ProtocolError("a message whose sessionId is not a string")
    if "id" in message:
        number = message["id"]
        if not isinstance(number, int) or isinstance(number, bool):
            raise ProtocolError("a response whose id is not an integer")
        if "error" in message:
            _object(message["error"], "a response's error")
        else:
            _object(message.get("result"), "a response's result")
        return number, message
    method = message.get("method")
    if not isinstance(method, str):
        raise ProtocolError("a message with neither an id nor a method")
    return Event(method, _object(message.get("params", {}), f"{method}'s params"), session)


@dataclass
class Protocol:
    """The message layer of one connection: what was asked, what is awaited, who listens."""

    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _waiting: dict[int, str] = field(default_factory=dict)  # command id -> its method
    _listeners: dict[tuple[str, str | None], set[Hashable]] = field(default_factory=dict)

    def command(self, method: str, params: dict[str, Any] | None = None,
                session: str | None = None) -> tuple[int, str]:
        """A new command's id and its text to send."""
        number = next(self._ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._waiting[number] = method
        return number, json.dumps(message)

    def forget(self, number: int) -> None:
        """Stop waiting for command ``number`` (it timed out or its caller was cancelled)."""
        self._waiting.pop(number, None)

    def listeners(self) -> list[Hashable]:
        """Every listener of every event."""
        return [listener for listeners in self._listeners.values() for listener in listeners]

    def listen(self, method: str, session: str | None, listener: Hashable) -> None:
        """Route events ``method`` of ``session`` (None: the browser's own) to ``listener``."""
        self._listeners.setdefault((method, session), set()).add(listener)

    def unlisten(self, method: str, session: str | None, listener: Hashable) -> None:
        listeners = self._listeners.get((method, session), set())
        listeners.discard(listener)
        if not listeners:
            self._listeners.pop((method, session), None)

    def receive(self, data: str | bytes) -> Response | tuple[Event, list[Hashable]] | None:
        """A message from the browser: the :class:`Response` to a command we await, or an event
        and the listeners it goes to; None for a response nobody awaits any more."""
        parsed = parse_message(data)
        if isinstance(parsed, Event):
            return parsed, list(self._listeners.get((parsed.method, parsed.session), ()))
        number, message = parsed
        method = self._waiting.pop(number, None)
        if method is None:
            return None
        if "error" in message:
            error = message["error"]
            code = error.get("code")
            return Response(number, None, CommandError(
                method, code if isinstance(code, int) else None,
                str(error.get("message", "no message")), str(error.get("data", ""))))
        return Response(number, message["result"], None)


class DevTools:
    """One DevTools websocket: commands with a timeout, and events for whoever listens."""

    def __init__(self, socket: WebSocketConnection, timeout: float = COMMAND_TIMEOUT) -> None:
        self._socket = socket
        self._timeout = timeout
        self._protocol = Protocol()
        self._responses: dict[int, trio.MemorySendChannel[Response]] = {}
        self.closed: str | None = None  # why the connection ended, once it has

    async def send(self, method: str, params: dict[str, Any] | None = None,
                   session: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Run a command and return its result; :class:`CommandError`, :class:`CommandTimeout`
        or :class:`ConnectionLost` if it fails."""
        if self.closed is not None:
            raise ConnectionLost(f"{method}: the DevTools connection is closed ({self.closed})")
        number, text = self._protocol.command(method, params, session)
        send, receive = trio.open_memory_channel[Response](1)
        self._responses[number] = send
        limit = self._timeout if timeout is None else timeout
        try:
            with trio.move_on_after(limit):
                try:
                    await self._socket.send_message(text)
                except ConnectionClosed:
                    raise ConnectionLost(f"{method}: the DevTools connection is closed") from None
                try:
                    response = await receive.receive()
                except trio.EndOfChannel:
                    raise ConnectionLost(
                        f"{method}: the DevTools connection closed ({self.closed})") from None
                if response.error is not None:
                    raise response.error
                assert response.result is not None
                return response.result
            raise CommandTimeout(f"{method}: no response in {limit} s")
        finally:
            self._responses.pop(number, None)
            self._protocol.forget(number)

    @asynccontextmanager
    async def events(self, method: str, session: str | None = None) -> AsyncIterator[
            trio.MemoryReceiveChannel[Event]]:
        """The events ``method`` of ``session`` that arrive while the block runs, in order; the
        channel ends when the connection closes. Keep up: they are buffered without bound."""
        send, receive = trio.open_memory_channel[Event](math.inf)
        self._protocol.listen(method, session, send)
        try:
            async with receive:
                yield receive
        finally:
            self._protocol.unlisten(method, session, send)
            send.close()

    async def read(self) -> None:
        """Receive until the connection closes, then fail every waiting command and end every
        event stream. Runs as a task of the connection's nursery."""
        try:
            while True:
                try:
                    data = await self._socket.get_message()
                except ConnectionClosed as closed:
                    self.closed = f"closed by the browser: {closed.reason}"
                    return
                try:
                    routed = self._protocol.receive(data)
                except ProtocolError as error:
                    self.closed = str(error)
                    await self._socket.aclose()
                    return
                if isinstance(routed, Response):
                    waiting = self._responses.get(routed.id)
                    if waiting is not None:
                        waiting.send_nowait(routed)
                elif routed is not None:
                    event, listeners = routed
                    for listener in listeners:
                        assert isinstance(listener, trio.MemorySendChannel)
                        # Its block just ended (its receiving side closed, or it
                        # stopped listening since this event was routed): dropped.
                        with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                            listener.send_nowait(event)
        finally:
            if self.closed is None:
                self.closed = "the connection was stopped"
            for waiting in self._responses.values():
                waiting.close()
            for listener in self._protocol.listeners():
                assert isinstance(listener, trio.MemorySendChannel)
                listener.close()


@asynccontextmanager
async def connect(url: str, timeout: float = COMMAND_TIMEOUT) -> AsyncIterator[DevTools]:
    """The DevTools websocket at ``url`` (``ws://127.0.0.1:<port>/devtools/browser/<id>``)."""
    async with AsyncExitStack() as stack:
        try:
            socket = await stack.enter_async_context(open_websocket_url(
                url, max_message_size=MAX_MESSAGE, connect_timeout=timeout, disconnect_timeout=5))
        except (HandshakeError, OSError) as error:
            raise ConnectionLost(f"cannot open the DevTools websocket {url}: {error}") from error
        devtools = DevTools(socket, timeout)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(devtools.read)
            try:
                yield devtools
            finally:
                nursery.cancel_scope.cancel()
