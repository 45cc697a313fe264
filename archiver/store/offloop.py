"""Blocking store calls made off the crawler's event loop, and why the stores wait as long as they do.

The crawler shares its SQLite stores with other processes: the site queue (``archiver links run`` and
``archiver seeds`` write to it), the DNS history (``archiver dns`` writes to it) and the card catalog
(shards written by every crawler, read by a recrawl's lookups). A write waits for another process's
write transaction up to its connection's busy timeout, and any call may wait on the disk. Made on the
event loop, such a wait would stall every site slot of the process (all 64 fetches, rests and
timeouts), so the crawler makes these calls through an :class:`OffLoop`: in a worker thread, one at a
time per store, since each store is one connection used by one thread at a time.

The busy timeouts are set, with their reasons, in :mod:`archiver.store.embedded.sqlite`. Off the loop they
bound how long one slot waits for its store, not how long the process stops; when one runs out:

- site queue (:class:`~archiver.queues.embedded.sitequeue.SiteQueue`): the other writers' transactions are
  short (a links checkpoint merges one batch of sites; a seeds run adds a site per transaction), so 30 s runs
  out only when something is wrong. When it does (:func:`is_busy`), the crawler logs
  ``site-queue-busy`` and asks again after ``crawl.poll_interval``: a claim or a visit's outcome is never
  dropped, and the process does not die of another process's long transaction.
- DNS history (:mod:`archiver.store.embedded.dnshistory`): ``archiver dns`` must not fail a pass on one slow
  commit. An inline recording by the crawler that runs out is logged (``dns-history-busy``) and
  skipped: the resolution is used anyway and recorded at the name's next lookup.
- catalog (:mod:`archiver.store.embedded.catalog`): a recrawl's lookups only read, and WAL readers do not wait
  for writers; the timeout matters to the group commit's writes, which already run in a worker thread.

Calls run with ``abandon_on_cancel=False`` (trio's default): a cancelled caller still waits for its
call to finish, so a connection is never used by two threads at once nor closed under a running call,
and a call that completed (a site claimed) returns its result; the caller's next checkpoint raises
``Cancelled``, and the crawler releases such a site (``Crawler._visit``).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import trio

P = ParamSpec("P")
T = TypeVar("T")


class OffLoop:
    """The blocking calls to one store, each in a worker thread, one at a time."""

    def __init__(self) -> None:
        self._limiter = trio.CapacityLimiter(1)

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` in a worker thread, after the store's calls made before it."""
        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs),
                                             limiter=self._limiter)


def is_busy(error: BaseException) -> bool:
    """SQLite gave up waiting for another connection's lock (the busy timeout ran out)."""
    # The low byte is the primary result code of an extended one (SQLITE_BUSY_RECOVERY...).
    return (isinstance(error, sqlite3.OperationalError)
            and error.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED))
