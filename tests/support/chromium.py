"""A small Chrome DevTools Protocol client for the browser tests: headless Chromium started on
127.0.0.1 with a fresh profile, driven over its DevTools websocket (wsproto on a trio stream).

One websocket to the browser endpoint carries every session (flat mode: a page's commands and
events name its ``sessionId``). Events are kept in arrival order; a caller takes ``mark()`` before
the command that causes an event, then waits for it from that mark, so none is missed.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from archiver.browser.chromium import QUIET_FLAGS

CHROMIUM = Path("/usr/bin/chromium")
# The product's switches that keep Chromium from reaching out (archiver.browser.chromium), most of
# them Puppeteer's defaults. They do not stop all of it: Chromium 150 from Debian's wrapper still
# asks clients2.google.com for the time and accounts.google.com and www.google.com for sign-in
# state, so callers pass --host-resolver-rules that make such names fail to resolve inside
# Chromium, and nothing leaves 127.0.0.1.
FLAGS = (*QUIET_FLAGS, "--window-size=1280,900")
_LISTENING = re.compile(rb"DevTools listening on ws://127\.0\.0\.1:(\d+)(/devtools/browser/\S+)")
_STARTUP = 20.0  # seconds for Chromium to open its DevTools port (a cold start takes ~0.2 s here)
_EXIT = 10.0  # seconds for Chromium to exit once asked
ERR_NAME_NOT_RESOLVED = -105  # net/base/net_error_list.h


class CdpError(Exception):
    """A command answered with an error, or a script that threw."""


@dataclass(frozen=True)
class Event:
    method: str
    params: dict[str, Any]
    session: str | None


class Browser:
    """The websocket to a browser's DevTools endpoint: commands, and the events received so far."""

    def __init__(self, stream: trio.SocketStream, ws: WSConnection) -> None:
        self._stream = stream
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.events: list[Event] = []
        self._arrived = trio.Event()
        self._closed = False

    async def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Run a command and return its result; CdpError if the browser answers an error."""
        if self._closed:
            raise CdpError(f"{method}: the DevTools connection is closed")
        command: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params}
        if session is not None:
            command["sessionId"] = session
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._pending[command["id"]] = send
        try:
            await self._stream.send_all(self._ws.send(TextMessage(data=json.dumps(command))))
            reply = await receive.receive()
        finally:
            self._pending.pop(command["id"], None)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error'].get('message')} {reply['error'].get('data', '')}")
        return reply["result"]

    def mark(self) -> int:
        """A position in the event list, for :meth:`wait_for`."""
        return len(self.events)

    async def wait_for(
        self,
        method: str,
        since: int,
        session: str | None = None,
        where: Callable[[dict[str, Any]], bool] = lambda params: True,
    ) -> Event:
        """The first event ``method`` of ``session`` received at or after ``since`` that
        satisfies ``where``, waiting for it if need be (bound it with a trio timeout)."""
        at = since
        while True:
            for event in self.events[at:]:
                if event.method == method and event.session == session and where(event.params):
                    return event
            at = len(self.events)
            if self._closed:
                raise CdpError(f"connection closed while waiting for {method}")
            await self._arrived.wait()

    async def open_page(self) -> Page:
        """A new tab on about:blank, attached in flat mode."""
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        return Page(self, attached["sessionId"])

    async def _read(self) -> None:
        """Route replies to their commands and keep events, until the connection ends."""
        text: list[str] = []
        try:
            while True:
                data = await self._stream.receive_some(1 << 16)
                self._ws.receive_data(data or None)
                for ws_event in self._ws.events():
                    if isinstance(ws_event, TextMessage):
                        text.append(ws_event.data)
                        if ws_event.message_finished:
                            self._dispatch(json.loads("".join(text)))
                            text.clear()
                    elif isinstance(ws_event, Ping):
                        await self._stream.send_all(self._ws.send(ws_event.response()))
                    elif isinstance(ws_event, CloseConnection):
                        return
                if not data:
                    return
        finally:
            self._closed = True
            self._arrived.set()
            for waiting in self._pending.values():
                waiting.send_nowait({"error": {"message": "connection closed"}})

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message:
            waiting = self._pending.pop(message["id"], None)
            if waiting is not None:
                waiting.send_nowait(message)
            return
        self.events.append(Event(message["method"], message.get("params", {}), message.get("sessionId")))
        self._arrived.set()
        self._arrived = trio.Event()


@dataclass(frozen=True)
class Page:
    """One attached tab: commands and waits scoped to its session."""

    browser: Browser
    session: str

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        return await self.browser.send(method, self.session, **params)

    async def wait_for(
        self, method: str, since: int, where: Callable[[dict[str, Any]], bool] = lambda params: True
    ) -> Event:
        return await self.browser.wait_for(method, since, self.session, where)

    async def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (awaited if a promise)."""
        reply = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            raise CdpError(details.get("exception", {}).get("description") or details.get("text"))
        return reply["result"].get("value")

    async def enable(self) -> None:
        """Page and Network events, and lifecycle events (which name their document's loader)."""
        await self.send("Page.enable")
        await self.send("Page.setLifecycleEventsEnabled", enabled=True)
        await self.send("Network.enable")

    async def goto(self, url: str) -> None:
        """Navigate the tab to ``url`` and wait for that document's load event."""
        since = self.browser.mark()
        reply = await self.send("Page.navigate", url=url)
        if "errorText" in reply:
            raise CdpError(f"{url}: {reply['errorText']}")
        await self._loaded(reply["loaderId"], since)

    async def next_document(self, since: int) -> str:
        """The URL of the first top-level document committed at or after ``since``, once it has
        loaded (for a navigation started by the page, a click say)."""
        committed = await self.wait_for("Page.frameNavigated", since, lambda p: "parentId" not in p["frame"])
        await self._loaded(committed.params["frame"]["loaderId"], since)
        return committed.params["frame"]["url"]

    async def _loaded(self, loader: str, since: int) -> None:
        # The lifecycle "load" of this very document: a bare Page.loadEventFired could also be
        # the late load of the about:blank the tab was created with.
        await self.wait_for(
            "Page.lifecycleEvent", since, lambda p: p["name"] == "load" and p["loaderId"] == loader
        )

    async def click(self, element: str) -> None:
        """Click, as a mouse does, the middle of the first box of ``element`` (a JavaScript
        expression), scrolled into view; CdpError if something else lies on top of it."""
        box = await self.evaluate(
            f"""(() => {{
                const el = {element};
                el.scrollIntoView({{block: "center"}});
                const r = el.getClientRects()[0];
                const x = r.left + r.width / 2, y = r.top + r.height / 2;
                return {{x, y, hit: el.contains(document.elementFromPoint(x, y))}};
            }})()"""
        )
        if not box["hit"]:
            raise CdpError(f"{element} is covered at ({box['x']}, {box['y']})")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent",
                type=kind,
                x=box["x"],
                y=box["y"],
                button="left",
                clickCount=0 if kind == "mouseMoved" else 1,
            )

    def requests(self) -> list[str]:
        """URLs of the requests this page made (Network.requestWillBeSent; Network.enable first)."""
        return [
            e.params["request"]["url"]
            for e in self.browser.events
            if e.method == "Network.requestWillBeSent" and e.session == self.session
        ]


@asynccontextmanager
async def connect(port: int, path: str) -> AsyncIterator[Browser]:
    """The DevTools websocket at ws://127.0.0.1:``port````path``, closed on exit."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        ws = WSConnection(ConnectionType.CLIENT)
        await stream.send_all(ws.send(Request(host=f"127.0.0.1:{port}", target=path)))
        while True:
            data = await stream.receive_some(1 << 16)
            if not data:
                raise CdpError("DevTools endpoint closed during the websocket handshake")
            ws.receive_data(data)
            events = list(ws.events())
            if any(isinstance(e, RejectConnection) for e in events):
                raise CdpError(f"DevTools endpoint refused the websocket: {events}")
            if any(isinstance(e, AcceptConnection) for e in events):
                break
        browser = Browser(stream, ws)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(browser._read)
            try:
                yield browser
            finally:
                nursery.cancel_scope.cancel()


@dataclass
class Chromium:
    """A running browser: its process, DevTools endpoint and stderr so far."""

    process: trio.Process
    profile: Path
    port: int
    path: str
    stderr: bytearray

    def active_port(self) -> tuple[int, str]:
        """The port and browser path Chromium wrote to DevToolsActivePort in its profile."""
        port, path = (self.profile / "DevToolsActivePort").read_text().split("\n")[:2]
        return int(port), path

    async def quit(self, devtools: Browser) -> None:
        """Close the browser through DevTools (so it finishes its files) and wait for its exit."""
        with suppress(CdpError):  # the connection may close before the reply arrives
            await devtools.send("Browser.close")
        with trio.fail_after(_EXIT):
            await self.process.wait()


async def _drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    """Keep reading the browser's stderr, so that it never blocks on a full pipe."""
    while data := await stream.receive_some(1 << 16):
        into += data


@asynccontextmanager
async def chromium(home: Path, host_rules: str, args: Sequence[str] = ()) -> AsyncIterator[Chromium]:
    """Headless Chromium with DevTools on a free loopback port, everything it writes in ``home``
    (a fresh profile in home/profile; XDG config and cache there too, which keeps its crash
    database and dconf cache out of the user's home directory).

    Readiness is the "DevTools listening on" line Chromium prints on stderr: in
    content/browser/devtools/devtools_http_handler.cc it is printed, then DevToolsActivePort is
    written, by the same handler-thread task that precedes any DevTools connection, so the file
    is complete once a websocket has been accepted (:meth:`Chromium.active_port` reads it then).
    Chromium and its helpers run in their own process group, killed on exit.
    """
    if not CHROMIUM.exists():
        raise AssertionError(
            f"{CHROMIUM} is missing: the browser test needs Debian's chromium package, which "
            ".ci/run installs (apt-get install -y chromium)"
        )
    profile = home / "profile"
    env = {**os.environ, "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    command = [
        str(CHROMIUM),
        *FLAGS,
        f"--host-resolver-rules={host_rules}",
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        *args,
        "about:blank",
    ]
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    assert process.stderr is not None
    stderr = bytearray()
    try:
        match = None
        with trio.move_on_after(_STARTUP):
            while (match := _LISTENING.search(stderr)) is None:
                data = await process.stderr.receive_some(1 << 16)
                if not data:
                    break
                stderr += data
        if match is None:
            tail = stderr.decode(errors="replace")[-3000:]
            raise AssertionError(f"Chromium did not open its DevTools port (exit {process.poll()}):\n{tail}")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, process.stderr, stderr)
            try:
                yield Chromium(process, profile, int(match[1]), match[2].decode(), stderr)
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with trio.CancelScope(shield=True):
            await process.wait()


@dataclass
class NetLog:
    """What Chromium's NetLog (--log-net-log) says went over the network."""

    tcp_peers: set[str] = field(default_factory=set)  # addresses of every TCP connect attempt
    udp_sends: int = 0  # datagrams sent (the IPv6 reachability probe connects a UDP socket, sends none)
    requests: dict[str, int] = field(default_factory=dict)  # URL requested -> net error (0: none)


def read_netlog(path: Path) -> NetLog:
    log = json.loads(path.read_text())
    kinds = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    watched = {"TCP_CONNECT_ATTEMPT", "UDP_BYTES_SENT", "URL_REQUEST_START_JOB", "REQUEST_ALIVE"}
    assert watched <= set(kinds.values()), "this Chromium's NetLog names its events differently"
    seen = NetLog()
    urls: dict[int, list[str]] = {}
    for event in log["events"]:
        kind, params = kinds[event["type"]], event.get("params", {})
        if kind == "TCP_CONNECT_ATTEMPT" and "address" in params:
            seen.tcp_peers.add(params["address"].rpartition(":")[0])
        elif kind == "UDP_BYTES_SENT":
            seen.udp_sends += 1
        elif kind == "URL_REQUEST_START_JOB" and "url" in params:
            urls.setdefault(event["source"]["id"], []).append(params["url"])
        elif kind == "REQUEST_ALIVE" and event.get("phase") == 2:  # the request's end
            for url in urls.pop(event["source"]["id"], []):
                seen.requests[url] = params.get("net_error", 0)
    return seen
