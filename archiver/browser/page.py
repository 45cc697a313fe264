"""A page target whose every request is answered by us: the browser renders, archiver fetches.

:func:`open_page` opens a tab attached in flat mode (:func:`tab`: one closed after its block);
:func:`answer_requests` enables the Fetch domain for every request of that tab and answers each
paused request with what a callback returns: an :class:`Answer` (status, headers, body; sent as
``Fetch.fulfillRequest``) or None, which refuses it (``Fetch.failRequest``, a network error for
the page). A :class:`Traffic` given to it counts the requests in flight, so that a caller can wait
until the page's network is idle.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import trio

from archiver.browser.devtools import CommandError, DevTools, DevToolsError

CLOSE_TIMEOUT = 5.0  # seconds for the browser to close a tab


@dataclass(frozen=True)
class Request:
    """A request the page made, paused until we answer it."""

    id: str
    url: str
    method: str
    headers: dict[str, str]
    kind: str  # the DevTools resource type: Document, Script, Image, Fetch, XHR...
    body: bytes = b""  # a POST's data (a form the page submits)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


Answerer = Callable[[Request], Awaitable[Answer | None]]


class Traffic:
    """The requests of a page in flight (paused, not yet answered), and when that last changed."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.begun = 0  # requests begun in all
        self._changed = trio.Event()
        self._since = trio.current_time()  # when the last request ended (or this began)

    def begin(self) -> None:
        self.in_flight += 1
        self.begun += 1
        self._wake()

    async def begun_after(self, count: int) -> None:
        """Return once more than ``count`` requests have begun."""
        while self.begun <= count:
            await self._changed.wait()

    def end(self) -> None:
        self.in_flight -= 1
        self._since = trio.current_time()
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def idle(self, quiet: float) -> None:
        """Return once no request has been in flight for ``quiet`` seconds from now: woken by
        each request that begins or ends, never by polling."""
        start = trio.current_time()
        while True:
            changed = self._changed
            if self.in_flight == 0:
                remaining = max(self._since, start) + quiet - trio.current_time()
                if remaining <= 0:
                    return
                with trio.move_on_after(remaining):
                    await changed.wait()
            else:
                await changed.wait()


async def _open(devtools: DevTools, context: str | None = None) -> tuple[str, str]:
    # A window of its own: of the tabs of one window only the newest is visible, and a page in
    # another sees no element come into view (no lazy image, no next page of an endless list).
    params: dict[str, Any] = {"url": "about:blank", "newWindow": True}
    if context is not None:
        params["browserContextId"] = context
    target = await devtools.send("Target.createTarget", params)
    attached = await devtools.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
    return str(target["targetId"]), str(attached["sessionId"])


async def open_page(devtools: DevTools) -> str:
    """A new tab on about:blank, in a window of its own, attached in flat mode: its session id."""
    return (await _open(devtools))[1]


@asynccontextmanager
async def tab(devtools: DevTools) -> AsyncIterator[str]:
    """A new tab (its session id) for the block, in a browser context of its own (its cookies and
    storage are the page's alone), closed after it, even when the block was cancelled; the block
    ends once the browser says the tab is gone (or after CLOSE_TIMEOUT: a browser that no longer
    answers takes its tabs with it when it is restarted)."""
    context = str((await devtools.send("Target.createBrowserContext", {}))["browserContextId"])
    try:
        target, session = await _open(devtools, context)
    except BaseException:
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT), \
                suppress(DevToolsError):
            await devtools.send("Target.disposeBrowserContext", {"browserContextId": context},
                                timeout=CLOSE_TIMEOUT)
        raise
    try:
        yield session
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT), suppress(DevToolsError):
            async with devtools.events("Target.detachedFromTarget") as detached:
                await devtools.send("Target.closeTarget", {"targetId": target}, timeout=CLOSE_TIMEOUT)
                async for event in detached:
                    if event.params.get("sessionId") == session:
                        break
            await devtools.send("Target.disposeBrowserContext", {"browserContextId": context},
                                timeout=CLOSE_TIMEOUT)


async def evaluate(devtools: DevTools, session: str, expression: str, timeout: float | None = None,
                   context: int | None = None) -> Any:
    """The JSON value of a JavaScript expression in the page (awaited if a promise), in its main
    world or in execution ``context`` (an :func:`isolated_world`); ``timeout`` bounds the command
    (the connection's default if None)."""
    params: dict[str, Any] = {"expression": expression, "returnByValue": True, "awaitPromise": True}
    if context is not None:
        params["contextId"] = context
    reply = await devtools.send("Runtime.evaluate", params, session, timeout)
    if "exceptionDetails" in reply:
        details = reply["exceptionDetails"]
        raise CommandError("Runtime.evaluate", None,
                           details.get("exception", {}).get("description") or details.get("text", ""))
    return reply["result"].get("value")


async def isolated_world(devtools: DevTools, session: str, timeout: float | None = None) -> int:
    """A new execution context on the tab's current document, apart from the page's scripts (it
    shares their DOM, not their globals: what the page patches does not reach it)."""
    tree = await devtools.send("Page.getFrameTree", None, session, timeout)
    world = await devtools.send("Page.createIsolatedWorld", {
        "frameId": tree["frameTree"]["frame"]["id"], "worldName": "archiver"}, session, timeout)
    return int(world["executionContextId"])


def _request(params: dict[str, Any]) -> Request:
    request = params["request"]
    return Request(params["requestId"], request["url"], request["method"],
                   {str(k): str(v) for k, v in request.get("headers", {}).items()},
                   params.get("resourceType", "Other"), _post_data(request))


def _post_data(request: dict[str, Any]) -> bytes:
    """A paused request's body: its ``postDataEntries`` (base64), else its ``postData`` text."""
    entries = request.get("postDataEntries")
    if isinstance(entries, list):
        try:
            return b"".join(base64.b64decode(entry.get("bytes", "")) for entry in entries
                            if isinstance(entry, dict))
        except (ValueError, TypeError):
            return b""
    data = request.get("postData")
    return data.encode("utf-8", "replace") if isinstance(data, str) else b""


async def _answer(devtools: DevTools, session: str, answerer: Answerer, params: dict[str, Any],
                  traffic: Traffic | None) -> None:
    try:
        await _fulfil(devtools, session, answerer, _request(params))
    finally:
        if traffic is not None:
            traffic.end()


async def _fulfil(devtools: DevTools, session: str, answerer: Answerer, request: Request) -> None:
    answer = await answerer(request)
    try:
        if answer is None:
            await devtools.send("Fetch.failRequest", {"requestId": request.id, "errorReason": "Failed"},
                                session)
        else:
            await devtools.send("Fetch.fulfillRequest", {
                "requestId": request.id, "responseCode": answer.status,
                "responseHeaders": [{"name": name, "value": value} for name, value in answer.headers],
                "body": base64.b64encode(answer.body).decode("ascii")}, session)
    except DevToolsError:
        # The page went away or navigated while we fetched (nobody awaits the answer), or the
        # browser did (the render notices it on its own commands).
        pass


@asynccontextmanager
async def answer_requests(devtools: DevTools, session: str, answerer: Answerer,
                          traffic: Traffic | None = None) -> AsyncIterator[None]:
    """While the block runs, every request of the page is answered by ``answerer``, each in a
    task of its own (a slow answer does not hold the others); ``traffic`` counts those in flight.
    What the block raises comes out as it is: the block does not run inside the answering tasks'
    nursery, whose cancellation would otherwise turn it into a swallowed Cancelled."""
    async with devtools.events("Fetch.requestPaused", session) as paused:
        await devtools.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]},
                            session)  # the events it pauses wait in ``paused`` until routed
        failure: BaseException | None = None
        async with trio.open_nursery() as nursery:
            async def route() -> None:
                async for event in paused:
                    if traffic is not None:
                        traffic.begin()
                    nursery.start_soon(_answer, devtools, session, answerer, event.params, traffic)

            nursery.start_soon(route)
            try:
                yield
            except BaseException as error:  # raised again below, once the nursery is closed
                failure = error
            finally:
                nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure


async def navigate(devtools: DevTools, session: str, url: str) -> None:
    """Navigate the tab to ``url`` and wait for that document's load event, or the load of a
    document the page moved on to by script (``location.replace`` before its load);
    CommandError if the navigation fails at once (a refused document, say)."""
    await devtools.send("Page.enable", None, session)
    await devtools.send("Page.setLifecycleEventsEnabled", {"enabled": True}, session)
    async with devtools.events("Page.lifecycleEvent", session) as lifecycle, \
            devtools.events("Page.frameNavigated", session) as navigated:
        reply = await devtools.send("Page.navigate", {"url": url}, session)
        if "errorText" in reply:
            raise CommandError("Page.navigate", None, f"{url}: {reply['errorText']}")
        # The "load" of this very document or of one that replaced it in the tab's frame: a bare
        # Page.loadEventFired could also be the late load of the about:blank the tab was created
        # with. A document's frameNavigated comes before its load, so it is already waiting.
        documents = {reply["loaderId"]}
        async for event in lifecycle:
            while True:
                try:
                    frame = navigated.receive_nowait().params.get("frame", {})
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                if frame.get("id") == reply["frameId"] and frame.get("url") != "about:blank":
                    documents.add(frame.get("loaderId"))
            if event.params.get("name") == "load" and event.params.get("loaderId") in documents:
                return
    raise CommandError("Page.navigate", None, f"{url}: the connection closed before the page loaded")
