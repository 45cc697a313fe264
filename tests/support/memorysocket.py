"""A stand-in for the DevTools websocket in unit tests (no socket, no browser): two memory
channels, every command answered at once with ``result``."""

from __future__ import annotations

import json
from typing import Any

import trio


class MemorySocket:
    """What archiver.browser.devtools.DevTools uses of a websocket."""

    def __init__(self, result: dict[str, Any] | None = None) -> None:
        self.result = result or {}
        self.incoming_send, self.incoming = trio.open_memory_channel[str](100)

    async def get_message(self) -> str:
        return await self.incoming.receive()

    async def send_message(self, text: str) -> None:
        command = json.loads(text)
        await self.incoming_send.send(json.dumps({"id": command["id"], "result": self.result}))

    async def aclose(self) -> None:
        await self.incoming_send.aclose()
