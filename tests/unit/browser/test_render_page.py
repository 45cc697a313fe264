"""archiver.browser.page without a browser: Traffic's idle on trio's mock clock, and what the block
of answer_requests raises coming out of it (over an in-memory stand-in for the websocket)."""

from __future__ import annotations

from typing import Any, cast

import pytest
import trio
import trio.testing

from archiver.browser.devtools import DevTools
from archiver.browser.page import Answer, Request, Traffic, answer_requests
from tests.support.memorysocket import MemorySocket


async def idle_after(traffic: Traffic, quiet: float) -> float:
    start = trio.current_time()
    await traffic.idle(quiet)
    return trio.current_time() - start


async def test_idle_waits_quiet_from_now_when_nothing_is_in_flight(autojump_clock: trio.testing.MockClock):
    traffic = Traffic()
    await trio.sleep(10)  # long quiet before the call does not count: a step may just have begun
    assert await idle_after(traffic, 0.5) == pytest.approx(0.5)


async def test_idle_waits_for_the_last_request_to_end_then_quiet(autojump_clock: trio.testing.MockClock):
    traffic = Traffic()
    traffic.begin()
    traffic.begin()

    async def answer(after: float) -> None:
        await trio.sleep(after)
        traffic.end()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer, 1.0)
        nursery.start_soon(answer, 3.0)
        assert await idle_after(traffic, 0.5) == pytest.approx(3.5)


async def test_a_request_that_begins_during_the_quiet_starts_it_over(autojump_clock: trio.testing.MockClock):
    traffic = Traffic()

    async def short_request(at: float) -> None:
        await trio.sleep(at)
        traffic.begin()
        await trio.sleep(0.1)
        traffic.end()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(short_request, 0.4)
        nursery.start_soon(short_request, 0.8)
        assert await idle_after(traffic, 0.5) == pytest.approx(0.9 + 0.5)


async def test_a_request_in_flight_for_ever_is_never_idle(autojump_clock: trio.testing.MockClock):
    traffic = Traffic()
    traffic.begin()
    with trio.move_on_after(3600) as waiting:
        await traffic.idle(0.5)
    assert waiting.cancelled_caught


async def never(request: Request) -> Answer | None:
    await trio.sleep_forever()
    return None


async def test_what_the_block_raises_comes_out_of_answer_requests_as_it_is():
    devtools = DevTools(cast(Any, MemorySocket()), timeout=5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(devtools.read)
        with pytest.raises(LookupError, match="from the block"):
            async with answer_requests(devtools, "session", never):
                raise LookupError("from the block")
        with trio.move_on_after(0.01) as waiting:  # an outer cancellation reaches its own scope
            async with answer_requests(devtools, "session", never):
                await trio.sleep_forever()
        assert waiting.cancelled_caught
        nursery.cancel_scope.cancel()
