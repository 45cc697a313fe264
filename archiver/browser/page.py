"""A page target whose every request is answered by us: the browser renders, archiver fetches.

:func:`open_page` opens a tab attached in flat mode; :func:`answer_requests` enables the Fetch
domain for every request of that tab and answers each paused request with what a callback
returns: an :class:`Answer` (status, headers, body; sent as ``Fetch.fulfillRequest``) or None,
which refuses it (``Fetch.failRequest``, a network error for the page).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from archiver.browser.devtools import CommandError, DevTools


@dataclass(frozen=True)
class Request:
    """A request the page made, paused until we answer it."""

    id: str
    url: str
    method: str
    headers: dict[str, str]
    kind: str  # the DevTools resource type: Document, Script, Image, Fetch, XHR...


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


Answerer = Callable[[Request], Awaitable[Answer | None]]


async def open_page(devtools: DevTools) -> str:
    """A new tab on about:blank, attached in flat mode: its session id."""
    target = await devtools.send("Target.createTarget", {"url": "about:blank"})
    attached = await devtools.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
    return str(attached["sessionId"])


async def evaluate(devtools: DevTools, session: str, expression: str) -> Any:
    """The JSON value of a JavaScript expression in the page (awaited if a promise)."""
    reply = await devtools.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                     "awaitPromise": True}, session)
    if "exceptionDetails" in reply:
        details = reply["exceptionDetails"]
        raise CommandError("Runtime.evaluate", None,
                           details.get("exception", {}).get("description") or details.get("text", ""))
    return reply["result"].get("value")


def _request(params: dict[str, Any]) -> Request:
    request = params["request"]
    return Request(params["requestId"], request["url"], request["method"],
                   {str(k): str(v) for k, v in request.get("headers", {}).items()},
                   params.get("resourceType", "Other"))


async def _answer(devtools: DevTools, session: str, answerer: Answerer, params: dict[str, Any]) -> None:
    request = _request(params)
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
    except CommandError:
        pass  # the page went away, or navigated, while we fetched: nobody awaits the answer


@asynccontextmanager
async def answer_requests(devtools: DevTools, session: str, answerer: Answerer) -> AsyncIterator[None]:
    """While the block runs, every request of the page is answered by ``answerer``, each in a
    task of its own (a slow answer does not hold the others)."""
    async with trio.open_nursery() as nursery, devtools.events("Fetch.requestPaused", session) as paused:
        async def route() -> None:
            async for event in paused:
                nursery.start_soon(_answer, devtools, session, answerer, event.params)

        nursery.start_soon(route)
        await devtools.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]},
                            session)
        try:
            yield
        finally:
            nursery.cancel_scope.cancel()


async def navigate(devtools: DevTools, session: str, url: str) -> None:
    """Navigate the tab to ``url`` and wait for that document's load event; CommandError if the
    navigation fails at once (a refused document, say)."""
    await devtools.send("Page.enable", None, session)
    await devtools.send("Page.setLifecycleEventsEnabled", {"enabled": True}, session)
    async with devtools.events("Page.lifecycleEvent", session) as lifecycle:
        reply = await devtools.send("Page.navigate", {"url": url}, session)
        if "errorText" in reply:
            raise CommandError("Page.navigate", None, f"{url}: {reply['errorText']}")
        # The "load" of this very document: a bare Page.loadEventFired could also be the late
        # load of the about:blank the tab was created with.
        async for event in lifecycle:
            if event.params.get("name") == "load" and event.params.get("loaderId") == reply["loaderId"]:
                return
    raise CommandError("Page.navigate", None, f"{url}: the connection closed before the page loaded")
