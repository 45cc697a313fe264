"""archiver.browser.devtools.DevTools over an in-memory stand-in for its websocket: a listener
that has gone away while an event for it was on its way costs that event, never the connection."""

from __future__ import annotations

import json
from typing import Any, cast

import trio

from archiver.browser.devtools import DevTools
from tests.support.memorysocket import MemorySocket


async def test_an_event_for_a_listener_that_went_away_is_dropped_and_the_reader_goes_on():
    socket = MemorySocket({"ok": True})
    devtools = DevTools(cast(Any, socket), timeout=5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(devtools.read)
        async with devtools.events("Page.loadEventFired") as events:
            await events.aclose()  # the listener's side closes before its block ends
            await socket.incoming_send.send(json.dumps({"method": "Page.loadEventFired",
                                                        "params": {}}))
            assert await devtools.send("Page.enable") == {"ok": True}  # the reader still reads
        assert devtools.closed is None
        nursery.cancel_scope.cancel()
