"""The replay's catalog access: one user at a time, off the event loop, a slice at a time, lookups
first, and a bounded number of listings.

Every request shares one read-only :class:`~archiver.store.embedded.catalog.Catalog`, whose connections and
caches must not be used by two threads at once, so every use holds the scanner's turn
(:class:`Turns`): one holder at a time, handed on release to the longest-waiting lookup, else to
the longest-waiting listing.

Every read runs in a worker thread and passes the rows it reads through :meth:`Scan.rows` (or
the counts the database made through :meth:`Scan.counted`). Every ``slice_rows`` rows *examined*
(kept or not) the thread steps back into the event loop: it hands the turn on to whoever waits,
lets other tasks run, then waits for its turn again. Each read examines at most ``max_rows`` rows
and runs at most ``deadline`` seconds, waits included; past either it stops with
:class:`ScanLimit`. An answer is whole or an error, never silently cut short, which is why
callers send nothing before it ends. There are two kinds of read:

- a **lookup** (:meth:`Scanner.look_up`): what replaying one capture reads (the capture served
  and its neighbours, the captures its embeds are served from, a revisit's original), a few
  index seeks. Lookups go before listings at every turn and hold worker threads of their own
  (``LOOKUP_THREADS``), so ordinary replay waits for one slice of a listing at most, however many
  listings run.
- a **listing** (:meth:`Scanner.collect`: the CDX API, calendars, URL lists, TimeMap pages, the
  404 page's reasons): it may examine millions of rows and run a visitor's filters over them.
  At most ``listings`` run at once, each holding a worker thread of the listings' own for its
  whole run; one more is refused at once with a 503 and ``Retry-After`` (:class:`ScanBusy`).
  Neither kind takes trio's default worker threads, which WARC record reads use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import NoReturn, TypeVar

import trio

from archiver.store.interfaces import CatalogStore

T = TypeVar("T")
K = TypeVar("K")
R = TypeVar("R")


class ScanLimit(Exception):
    """A listing went past its row cap (``status`` 400) or its deadline (503); the message says
    which and how to ask for less. ``retry_after``: seconds to wait before asking again, when
    waiting helps."""

    def __init__(self, message: str, status: int, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ScanBusy(ScanLimit):
    """As many listings as the service runs at once are running: 503, ask again later."""


# Worker threads of lookups (one holds the turn at a time; more only for lookups past a slice).
LOOKUP_THREADS = 4
# Seconds a listing refused for want of room is told to wait (Retry-After): a listing of a few
# hundred thousand rows takes about that long.
RETRY_AFTER = 5


_NARROW = "narrow it (an exact URL rather than a prefix or domain, from/to dates, a lower limit)"


class Turns:
    """Whose turn it is to use the catalog: one holder at a time; on release the turn goes to the
    longest-waiting lookup, else to the longest-waiting listing (both in arrival order)."""

    def __init__(self) -> None:
        self._held = False
        self._waiting = {True: trio.lowlevel.ParkingLot(), False: trio.lowlevel.ParkingLot()}

    async def acquire(self, lookup: bool) -> None:
        """Wait for the turn, with the priority of a lookup or of a listing."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._held:  # no one waits either: a release hands the turn on directly
            self._held = True
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        await self._waiting[lookup].park()  # returns holding the turn (release handed it over)

    def release(self) -> None:
        for lookup in (True, False):
            if self._waiting[lookup]:
                self._waiting[lookup].unpark()
                return
        self._held = False


class Scan:
    """One read's passage through the catalog, as its worker thread sees it."""

    def __init__(self, scanner: Scanner, lookup: bool) -> None:
        self.catalog = scanner.catalog
        self.examined = 0
        self.lookup = lookup
        self._scanner = scanner
        self._held = False

    def rows(self, source: Iterable[T]) -> Iterator[T]:
        """``source`` (read from :attr:`catalog`) row by row, counting each row examined, with a
        step back into the event loop every ``slice_rows``; ScanLimit past ``max_rows``."""
        every = self._scanner.slice_rows
        cap = self._scanner.max_rows
        for row in source:
            self.examined += 1
            if self.examined > cap:
                self._past_cap()
            if self.examined % every == 0:
                trio.from_thread.run(self._turn)
            yield row

    def counted(self, pieces: Iterable[tuple[K, int]]) -> Iterator[tuple[K, int]]:
        """``pieces`` of counts the database made (``CatalogStore.span_counts``), each counting
        its number of rows as examined (:meth:`examine`)."""
        for piece in pieces:
            self.examine(piece[1])
            yield piece

    def examine(self, count: int) -> None:
        """Count ``count`` rows the database examined for a count it made, as :meth:`rows` counts
        each row it passes on: ScanLimit past ``max_rows``, a step back into the event loop each
        time the total passes a multiple of ``slice_rows``."""
        every = self._scanner.slice_rows
        before = self.examined
        self.examined += count
        if self.examined > self._scanner.max_rows:
            self._past_cap()
        if self.examined // every > before // every:
            trio.from_thread.run(self._turn)

    def _past_cap(self) -> NoReturn:
        cap = self._scanner.max_rows
        raise ScanLimit(f"this listing examines more than {cap} catalog rows: {_NARROW}", 400)

    async def _take(self) -> None:
        await self._scanner.turns.acquire(self.lookup)
        self._held = True

    def _give(self) -> None:
        if self._held:
            self._held = False
            self._scanner.turns.release()

    async def _turn(self) -> None:
        """Runs in the read's own task (trio.from_thread), so the turn it holds is its own."""
        self._give()
        await trio.lowlevel.checkpoint()
        await self._take()


class Scanner:
    """The catalog of one replay service and the limits of its reads."""

    def __init__(self, catalog: CatalogStore, *, slice_rows: int, max_rows: int, deadline: float,
                 listings: int) -> None:
        self.catalog = catalog
        self.slice_rows = slice_rows
        self.max_rows = max_rows
        self.deadline = deadline
        self.turns = Turns()
        self._listings = trio.CapacityLimiter(listings)
        self._lookups = trio.CapacityLimiter(LOOKUP_THREADS)
        # Threads are counted by the two limiters above, taken before the turn.
        self._threads = trio.CapacityLimiter(math.inf)

    async def look_up(self, read: Callable[[Scan], R]) -> R:
        """``read(scan)`` as a lookup: a few index seeks for one capture's replay, ahead of every
        listing, in a lookup thread (waiting for one if all are busy); ScanLimit past the limits."""
        scan = Scan(self, lookup=True)
        with trio.move_on_after(self.deadline) as scope:
            async with self._lookups:
                return await self._run(scan, read)
        assert scope.cancelled_caught
        raise self._late(scan)

    async def collect(self, listing: Callable[[Scan], R]) -> R:
        """``listing(scan)`` as a listing, in a worker thread of the listings', within the limits;
        it reads the catalog through ``scan.catalog`` and passes every row it reads through
        ``scan.rows``. ScanBusy (503, Retry-After) at once when ``listings`` are running."""
        try:
            self._listings.acquire_nowait()
        except trio.WouldBlock:
            raise ScanBusy(
                f"{self._listings.total_tokens:g} listings are running, as many as this service runs "
                f"at once: try again in {RETRY_AFTER} s",
                503,
                RETRY_AFTER,
            ) from None
        scan = Scan(self, lookup=False)
        try:
            with trio.move_on_after(self.deadline) as scope:
                return await self._run(scan, listing)
        finally:
            self._listings.release()
        assert scope.cancelled_caught
        raise self._late(scan)

    async def _run(self, scan: Scan, read: Callable[[Scan], R]) -> R:
        try:
            await scan._take()
            return await trio.to_thread.run_sync(read, scan, limiter=self._threads)
        finally:
            scan._give()

    def _late(self, scan: Scan) -> ScanLimit:
        return ScanLimit(
            f"this listing ran past its deadline of {self.deadline:g} s after examining "
            f"{scan.examined} catalog rows: {_NARROW}, or try again later",
            503,
        )
