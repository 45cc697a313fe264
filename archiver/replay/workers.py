"""Bounded concurrency for the replay's CPU-heavy work: rewriting large documents, full-text search.

One :class:`Workers` per kind of work: at most ``workers`` jobs run at once, at most ``waiting``
more wait their turn (first come, first served), and one more is refused at once with
:class:`Busy`, which the apps answer ``503`` with ``Retry-After``. A page whose thirty embeds
are rewritten at once waits in the queue; a visitor who floods the service with hostile
documents or searches fills only that queue, while ordinary replay (records, small documents,
the replay's own pages) never waits for it.

Jobs run off the event loop: in worker threads, which suits work that releases the GIL (SQLite's
full-text search), or, with ``processes``, in a pool of that many worker processes, for pure
Python work (the rewriter): a thread doing that would hold the GIL, and its garbage collections
would stop the event loop with it (a 16 MiB page rewritten in a thread still stalled the loop
for 0.8 s). The pool is spawned on first use and restarted if a worker dies (the kernel's OOM
killer, say): the job that was running then raises :class:`WorkerLost`. A worker process ends
by itself within ``ORPHAN_CHECK`` seconds of the service's death, however it died (kill -9
included): a pool's workers outlive a parent that cannot shut them down.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor
from functools import partial
from typing import Any, TypeVar

import trio

T = TypeVar("T")
# Seconds a refused request is told to wait (Retry-After): long enough for a few jobs to end.
RETRY_AFTER = 5
# How much lower a worker process runs than the service (os.nice; raising it needs no privilege).
NICENESS = 10
# Seconds between a worker process's looks at whether the service that started it still runs.
ORPHAN_CHECK = 1.0


class Busy(Exception):
    """Every worker busy and the queue full: answer 503 with ``Retry-After: retry_after``."""

    def __init__(self, what: str, retry_after: int = RETRY_AFTER) -> None:
        super().__init__(f"the replay is busy with other {what}: try again in {retry_after} s")
        self.what = what
        self.retry_after = retry_after


class WorkerLost(Exception):
    """A worker process died while it ran the job (the pool is started anew for the next)."""


class Workers:
    """At most ``workers`` jobs at once, at most ``waiting`` more in the queue; in threads, or
    in worker processes with ``processes``. ``what`` names the work in messages ("searches")."""

    def __init__(self, what: str, *, workers: int, waiting: int, processes: bool = False) -> None:
        self.what = what
        self.waiting = waiting
        self.limiter = trio.CapacityLimiter(workers)
        self._processes = processes
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` once a worker is free: Busy if the queue is full; WorkerLost if a
        worker process died under it (``fn`` and its arguments must then pickle)."""
        held = self.limiter.statistics()
        if held.borrowed_tokens >= held.total_tokens and held.tasks_waiting >= self.waiting:
            raise Busy(self.what)
        if not self._processes:
            return await trio.to_thread.run_sync(partial(fn, *args), limiter=self.limiter)
        if self._pool is None:
            self._pool = ProcessPoolExecutor(int(self.limiter.total_tokens), initializer=_quiet,
                                             initargs=(os.getpid(),),
                                             mp_context=multiprocessing.get_context("spawn"))
        pool = self._pool
        try:
            return await trio.to_thread.run_sync(_in_pool, pool, fn, args, limiter=self.limiter)
        except BrokenExecutor:
            if self._pool is pool:
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)
            raise WorkerLost(f"a worker process died while it ran {getattr(fn, '__name__', fn)}") from None

    def close(self) -> None:
        """Stop the worker processes (jobs in flight are left to finish)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _quiet(service: int) -> None:
    """A worker process leaves Ctrl-C to the service, which stops it (no traceback per worker),
    yields the CPU to the service's event loop (niceness 10): the replay's own pages and
    ordinary captures answer first while a worker rewrites; and ends once the process
    ``service`` is gone (``_orphaned``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(NICENESS)
    threading.Thread(target=_orphaned, args=(service,), name="orphan-check", daemon=True).start()


def _orphaned(service: int) -> None:
    """End this worker process once its parent is no longer ``service`` (it died, and the worker
    was handed to another process): nothing else would ever end it."""
    while os.getppid() == service:
        time.sleep(ORPHAN_CHECK)
    os._exit(0)


def _in_pool(pool: ProcessPoolExecutor, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    return pool.submit(fn, *args).result()
