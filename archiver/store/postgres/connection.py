"""One connection to the PostgreSQL store that outlives the server's restarts and failovers.

Every PostgreSQL store (catalog, site and crawl queues, bundle ledger, DNS history, status,
full-text index, links state) keeps its connection in a :class:`PgConnection`, which offers the
psycopg methods they use (``execute``, ``transaction``, ``cursor``) on the connection of the
moment. When the connection dies (the server restarts, is shut down, fails over to a standby: a
class 08 error, 57P01-57P03, or 25006 read-only on a connection meant to write, which a
``target_session_attrs=read-write`` URL then leaves for the new primary), the work under way is
settled by ``run``, and the next use connects again:

- **Reconnecting.** The first attempt is made at once (a single dropped connection costs
  nothing), then after 0.1 s, doubling up to ``store.retry_max`` seconds (``backoff_delay``,
  spread by a tenth either way so that crawlers do not come back in step). A *waiting* store
  (the crawler, the links batch: ``StoreWatch.wait``) tries until the server
  answers, or until its process gives up waiting (``StoreWatch.give_up``: a service stopped
  for good); any other (replay, the command line) tries once when its turn has come and
  otherwise raises :class:`StoreAway` at once, with the seconds to wait (replay answers 503 with
  Retry-After).
- **The work under way.** ``run(work)`` runs one store call; on a lost connection it runs it
  again once connected (a read, or a write that is idempotent: keyed inserts, absolute updates,
  writes fenced by an epoch that a second run finds done). A write whose COMMIT was sent but
  whose answer was lost may or may not have committed: ``run(work, resolve=check)`` asks
  ``check`` on the new connection, which reads whether it did (a claim's row, a crawl queue's
  last entry, a bundle's state...) and gives its result, or ``NOT_DONE``, after which the work
  runs again. Only the outermost ``run`` of a connection settles: work nested in another's
  transaction fails with it, and is run again as part of it.
- **Reporting.** One :class:`StoreWatch` per process, shared by its connections, says whether
  the store is away: the first connection that finds it so logs ``store-unavailable`` with the
  cause, the first that connects again ``store-recovered`` with the seconds it was away (the
  crawler counts both for ``/metrics``, and pauses fetching meanwhile). A connection found lost
  after that, but made before the outage, belongs to it: reported only if it cannot connect.

A PgConnection is used from one thread at a time, like the stores that hold it.
"""

from __future__ import annotations

import functools
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

import psycopg

from archiver.logs import event
from archiver.store.postgres.schema import (
    Connection,
    StoreError,
    check_version,
    connect,
    connect_current,
    redact,
)

log = logging.getLogger("archiver.store.postgres.connection")

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S", bound="HasConnection")

# Seconds before the second attempt to connect again; each later one waits twice the one before.
FIRST_DELAY = 0.1
# The longest pause between attempts when ``store.retry_max`` is not given.
RETRY_MAX = 10.0
# SQLSTATEs of a server going away: admin shutdown, crash shutdown, cannot connect now.
_SHUTDOWN = frozenset({"57P01", "57P02", "57P03"})
_READ_ONLY = "25006"  # a writer on a server that is (or became) a standby


class StoreAway(StoreError):
    """The PostgreSQL store cannot be reached now (restarting, failing over); ask again in
    ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


class NotDone:
    def __repr__(self) -> str:
        return "NOT_DONE"


NOT_DONE: Final = NotDone()  # what a resolve check says of work that did not commit


def backoff_delay(attempt: int, longest: float, spread: float = 0.0) -> float:
    """Seconds to wait before attempt ``attempt`` (0: the first, at once) to connect again:
    FIRST_DELAY doubling from the second, at most ``longest``; ``spread`` in [-1, 1] moves it by
    up to a tenth either way."""
    if attempt <= 0:
        return 0.0
    base = min(FIRST_DELAY * 2.0 ** min(attempt - 1, 64), longest)
    return base * (1.0 + spread / 10)


Report = Callable[[int, str, dict[str, Any]], None]


def _log(level: int, name: str, fields: dict[str, Any]) -> None:
    event(log, level, name, **fields)


class StoreWatch:
    """Whether one process's PostgreSQL store answers, shared by its connections.

    ``wait``: calls wait for a store that is away (a service) rather than raise StoreAway.
    ``report(level, name, fields)`` is given ``store-unavailable`` once per outage and
    ``store-recovered`` at its end (by default they are logged); ``on_change`` is called after
    either, from the thread that found it. Thread-safe.
    """

    def __init__(self, *, wait: bool = False, retry_max: float = RETRY_MAX,
                 report: Report | None = None) -> None:
        self.wait = wait
        self.retry_max = retry_max
        self.report: Report = report or _log
        self.on_change: Callable[[], None] | None = None
        self.giving_up = threading.Event()  # set: waiting calls stop waiting (StoreAway)
        self._lock = threading.Lock()
        self._since: float | None = None  # monotonic start of the outage, None while it answers
        self.outages = 0

    @property
    def away(self) -> bool:
        return self._since is not None

    def failed(self, cause: str) -> None:
        """A connection was lost or could not be made because of ``cause``."""
        with self._lock:
            if self._since is not None:
                return
            self._since = time.monotonic()
            self.outages += 1
        self.report(logging.WARNING, "store-unavailable", {
            "cause": cause, "action": "waiting" if self.wait else "calls fail until it is back",
            "retry_max": self.retry_max})
        self._changed()

    def recovered(self) -> None:
        """A connection was made again."""
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            self.report(logging.WARNING, "store-recovered",
                        {"after": round(time.monotonic() - since, 2)})
            self._changed()

    def give_up(self) -> None:
        """Calls that wait for the store stop waiting (StoreAway): the process is stopping."""
        self.giving_up.set()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


def is_lost(error: BaseException, conn: Connection | None, *, readonly: bool = False) -> bool:
    """True if ``error`` says that the connection ``conn`` is gone or no longer reaches the
    primary (the server shut down, restarted, failed over), rather than that the statement was
    wrong."""
    if not isinstance(error, psycopg.Error):
        return False
    if conn is not None and (conn.broken or conn.closed):
        return True
    state = error.sqlstate or ""
    return state.startswith("08") or state in _SHUTDOWN or (state == _READ_ONLY and not readonly)


class PgConnection:
    """A store's connection to ``url`` (see the module docstring); made at once, with the
    schema checked (StoreError, SchemaError; a waiting store waits for a server that does not
    answer yet, as for one that went away). ``on_connect`` runs on each new connection after the
    first (a session's locks and settings to take again); what it raises comes out of the call
    that reconnected."""

    def __init__(self, url: str, *, readonly: bool = False, watch: StoreWatch | None = None,
                 on_connect: Callable[[Connection], None] | None = None) -> None:
        self.url = url
        self.readonly = readonly
        self.watch = watch if watch is not None else StoreWatch()
        self.on_connect: Callable[[Connection], None] | None = None  # not on the first
        self._conn: Connection | None = None
        self._depth = 0  # runs under way (only the outermost settles a lost connection)
        self._attempt = 0  # attempts to connect again that failed in a row
        self._next_try = 0.0  # monotonic time of the next attempt (a store that does not wait)
        self._random = random.Random()
        self._cause = "the connection was lost"
        if self.watch.wait:  # a service started while the database restarts or fails over
            check_version(self.live())
        else:
            self._conn = connect_current(url, readonly=readonly)
        self._outages = self.watch.outages  # the watch's outages when this connection was made
        self.on_connect = on_connect

    # -- what the stores use of psycopg's Connection, on the connection of the moment

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> psycopg.Cursor[tuple[Any, ...]]:
        return self.live().execute(query, params, **kwargs)

    def transaction(self) -> Any:
        return self.live().transaction()

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return self.live().cursor(*args, **kwargs)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- settling

    def run(self, work: Callable[[], T], *,
            resolve: Callable[[], T | NotDone] | None = None) -> T:
        """``work()``, run again on a new connection if the connection was lost while it ran;
        with ``resolve``, first asked whether the lost work committed (see the module
        docstring). StoreAway if the store does not come back (or this one does not wait)."""
        if self._depth:
            return work()  # the outermost run settles (a lost transaction is redone whole)
        while True:
            self._depth = 1
            try:
                return work()
            except psycopg.Error as e:
                if not is_lost(e, self._conn, readonly=self.readonly):
                    raise
                self._lost(e)
            finally:
                self._depth = 0
            if resolve is not None:
                done = self.run(resolve)
                if not isinstance(done, NotDone):
                    return done

    def read(self, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
        """Every row of one read (a statement that may run twice)."""
        return self.run(lambda: self.execute(query, params).fetchall())

    def live(self) -> Connection:
        """The connection, made again if it was lost (see the module docstring)."""
        conn = self._conn
        if conn is not None and not conn.broken and not conn.closed:
            return conn
        self._conn = None
        watch = self.watch
        while True:
            delay = max(self._next_try - time.monotonic(), 0.0)
            if delay > 0 and not watch.wait:
                raise StoreAway(f"the PostgreSQL store is away: {self._cause}", delay)
            if watch.giving_up.wait(delay):
                raise StoreAway(f"the PostgreSQL store is away ({self._cause}); the process stops "
                                "waiting for it", 0)
            try:
                conn = connect(self.url, readonly=self.readonly)
            except StoreError as e:
                self._cause = str(e)
                self._attempt += 1
                self._next_try = time.monotonic() + backoff_delay(
                    self._attempt, watch.retry_max, self._random.uniform(-1, 1))
                watch.failed(self._cause)
                continue
            try:
                if self.on_connect is not None:
                    self.on_connect(conn)
            except BaseException:
                conn.close()
                raise
            self._conn, self._attempt, self._next_try = conn, 0, 0.0
            watch.recovered()
            self._outages = watch.outages
            return conn

    def _lost(self, error: psycopg.Error) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        text = redact(str(error)).strip()
        self._cause = text.splitlines()[0] if text else type(error).__name__
        # A connection made before an outage that another connection reported and saw end is
        # that outage's: reported again only if it cannot connect now (live).
        if self.watch.outages == self._outages:
            self.watch.failed(self._cause)

    @property
    def broken(self) -> bool:
        return self._conn is None or self._conn.broken


class HasConnection(Protocol):
    _db: PgConnection


def retried(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """A store method run again whole after a lost connection (``PgConnection.run``): a read, or
    a write that may be done twice (say why where it is used). The store's connection is ``_db``."""

    @functools.wraps(method)
    def again(self: S, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._db.run(lambda: method(self, *args, **kwargs))

    return again
