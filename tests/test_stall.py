"""The crawler's event-loop stall measure."""

from __future__ import annotations

import time

import trio

from archiver.loopwatch import LoopWatch


async def test_loop_watch_times_the_longest_step_and_names_its_task():
    async def blocker() -> None:
        time.sleep(0.2)  # a blocking call on the loop, as a slow SQLite commit would be
        await trio.sleep(0)

    watch = LoopWatch(threshold=0.1)
    trio.lowlevel.add_instrument(watch)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocker, name="blocker")
    finally:
        trio.lowlevel.remove_instrument(watch)
    assert watch.longest >= 0.2 and watch.longest_task == "blocker"
    assert watch.long_steps >= 1
