"""Tests for archiver.replay.workers: bounded concurrency with a bounded queue (threads here; the
worker processes are exercised by tests/integration/replay/test_replay_bounded.py)."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from archiver.replay.workers import RETRY_AFTER, Busy, Workers


async def test_past_the_workers_and_the_queue_a_job_is_refused_at_once():
    workers = Workers("searches", workers=2, waiting=3)
    release = threading.Event()
    running = []
    started = threading.Semaphore(0)

    def job(n: int) -> int:
        running.append(n)
        started.release()
        release.wait(10)
        return n

    done: list[int] = []

    async def one(n: int) -> None:
        done.append(await workers.run(job, n))

    async with trio.open_nursery() as nursery:
        for n in range(5):  # two running, three waiting
            nursery.start_soon(one, n)
            await trio.testing.wait_all_tasks_blocked()
        assert workers.limiter.statistics().tasks_waiting == 3
        for _ in range(2):  # the two running jobs are in their threads (which trio does not see)
            await trio.to_thread.run_sync(started.acquire)
        assert sorted(running) == [0, 1]
        with pytest.raises(Busy) as refused:
            await workers.run(job, 5)
        assert refused.value.retry_after == RETRY_AFTER
        assert str(refused.value) == f"the replay is busy with other searches: try again in {RETRY_AFTER} s"
        release.set()
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert sorted(running) == [0, 1, 2, 3, 4]
    assert await workers.run(job, 6) == 6  # room again
