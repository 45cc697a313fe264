"""No blocking call on the crawler's event loop: store calls in worker threads, the loop-stall measure."""

from __future__ import annotations

import threading
import time

import trio
import trio.testing

from archiver.crawl.loopwatch import LoopWatch
from archiver.store.offloop import OffLoop


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


async def test_off_loop_calls_to_one_store_run_one_at_a_time():
    store = OffLoop()
    running, most = [0], [0]
    lock = threading.Lock()

    def call() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)  # long enough for unserialised calls to overlap
        with lock:
            running[0] -= 1

    async with trio.open_nursery() as nursery:
        for _ in range(6):
            nursery.start_soon(store.call, call)
    assert most[0] == 1
