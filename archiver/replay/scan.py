"""The replay's catalog access: one user at a time, listings off the event loop, a slice at a time.

Every request shares one read-only :class:`~archiver.store.catalog.Catalog`, whose connections and
caches must not be used by two threads at once, so every use holds :attr:`Scanner.lock`, a fair
trio lock (it is handed to the longest waiter).

Every read is a listing (:meth:`Scanner.collect`: the CDX API, capture and URL lists, TimeMaps,
the captures behind a replayed page's banner and Link header, a revisit's original): one may
examine millions of rows and run a visitor's filters over them, so it runs in a worker thread,
and the rows it reads go through
:meth:`Scan.rows`. Every ``slice_rows`` rows *examined* (kept or not) the thread steps back into
the event loop: it hands the lock on to whoever waits for it, lets other tasks run, then takes the
lock back. Each listing examines at most ``max_rows`` rows and runs at most ``deadline`` seconds,
waits for the lock included; past either it stops with :class:`ScanLimit`. A listing's answer is
whole or an error, never silently cut short, which is why its callers send nothing before it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NoReturn, TypeVar

import trio

from archiver.store.interfaces import CatalogStore

T = TypeVar("T")
K = TypeVar("K")
R = TypeVar("R")


class ScanLimit(Exception):
    """A listing went past its row cap (``status`` 400) or its deadline (503); the message says
    which and how to ask for less."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


_NARROW = "narrow it (an exact URL rather than a prefix or domain, from/to dates, a lower limit)"


class Scan:
    """One listing's passage through the catalog, as its worker thread sees it."""

    def __init__(self, scanner: Scanner) -> None:
        self.catalog = scanner.catalog
        self.examined = 0
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
        await self._scanner.lock.acquire()
        self._held = True

    def _give(self) -> None:
        if self._held:
            self._held = False
            self._scanner.lock.release()

    async def _turn(self) -> None:
        """Runs in the listing's own task (trio.from_thread), so the lock it holds is its own."""
        self._give()
        await trio.lowlevel.checkpoint()
        await self._take()


class Scanner:
    """The catalog of one replay service and the limits of its listings."""

    def __init__(self, catalog: CatalogStore, *, slice_rows: int, max_rows: int, deadline: float) -> None:
        self.catalog = catalog
        self.slice_rows = slice_rows
        self.max_rows = max_rows
        self.deadline = deadline
        self.lock = trio.Lock()

    async def collect(self, listing: Callable[[Scan], R]) -> R:
        """``listing(scan)`` in a worker thread, within the limits; it reads the catalog through
        ``scan.catalog`` and passes every row it reads through ``scan.rows``."""
        scan = Scan(self)
        with trio.move_on_after(self.deadline) as scope:
            try:
                await scan._take()
                return await trio.to_thread.run_sync(listing, scan)
            finally:
                scan._give()
        assert scope.cancelled_caught
        raise ScanLimit(
            f"this listing ran past its deadline of {self.deadline:g} s after examining "
            f"{scan.examined} catalog rows: {_NARROW}, or try again later",
            503,
        )
