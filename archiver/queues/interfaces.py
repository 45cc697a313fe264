"""The doors to the queues: the site queue, the per-site crawl queues, the external-link spool.

Processes get them from :func:`archiver.stores.open_stores` (see :mod:`archiver.store.interfaces`).
A site is crawled by one holder at a time: the embedded site queue marks it ``active`` for the
crawler process that claimed it; the shared one (``queues.postgres.sitequeue``) gives the claim a lease.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from archiver.queues.bloom import BloomBitmap
from archiver.queues.decisions import Decision
from archiver.queues.models import Entry, LinkedSite, QueuePosition, SiteRow
from archiver.queues.revisits import PageChanges, RevisitSchedule
from archiver.store.durable import Retired, SyncJob

if TYPE_CHECKING:  # (numpy: only the links batch loads it)
    from archiver.queues.sitechanges import SiteChanges


class SiteQueueStore(Protocol):
    """The sites one crawler process may take, with their state, in-link counts and due times."""

    def add(self, origin: str, *, inlinks: int = 0, hops: int = 0, now: float | None = None
            ) -> bool:
        """Queue ``origin`` if new (True); a known one takes ``hops`` if lower."""

    def merge_links(self, sites: Iterable[tuple[Any, ...]], *, now: float | None = None) -> int:
        """From the links batch: a ``sitequeue.LinkedSite`` (or its first fields) per site."""

    def claim(self, *, include_deferred: bool, include_revisits: bool = False,
              now: float | None = None) -> str | None: ...

    def claim_or_due(self, *, include_deferred: bool, include_revisits: bool = False,
                     now: float | None = None) -> tuple[str | None, float | None]: ...

    def finish(self, origin: str, note: str = "", *, changes: PageChanges | None = None,
               schedule: RevisitSchedule | None = None, now: float | None = None) -> None: ...

    def recrawl(self, origin: str | None = None, *, now: float | None = None) -> int: ...

    def restart_pending(self, origin: str) -> bool: ...

    def restarted(self, origin: str) -> None: ...

    def visits(self, origin: str) -> int: ...

    def release(self, origin: str) -> None: ...

    def postpone(self, origin: str, due: float, note: str) -> None: ...

    def retry(self, origin: str, *, delay: float, max_attempts: int, defer_delay: float,
              note: str, now: float | None = None) -> str: ...

    def pause(self, origin: str, note: str) -> None:
        """The visit of ``origin`` (active) found its session lost: ``paused``, ``note`` saying
        why; never claimed, woken by links or waited for by ``--until-idle`` until ``resume``."""

    def resume(self, origin: str, *, now: float | None = None) -> bool:
        """A paused site waits again, due ``now``, its note cleared; False if it is not paused."""

    def cookies(self, origin: str) -> str:
        """The site's cookie jar (JSON text) kept by its last ``keep_cookies``; '' if none."""

    def keep_cookies(self, origin: str, text: str) -> bool:
        """Keep the site's cookie jar for its next visits; False (and a warning) if ``text`` is
        longer than ``models.COOKIES_LIMIT`` bytes (what was kept before stays), or the site
        is unknown."""

    def count_gatekeepers(self, origin: str, counts: Mapping[str, int]) -> None:
        """Add a visit's gatekeeper answers by kind (``challenge``, ``rate-limit``, ``block``)."""

    def next_due(self, *, include_deferred: bool, include_revisits: bool = False) -> float | None: ...

    def counts(self) -> dict[str, int]: ...

    def origins(self, states: tuple[str, ...] = ("waiting", "active", "retry", "deferred")
                ) -> list[str]: ...

    def revisits_due(self, by: float) -> list[str]:
        """The origins of the sites waiting for a revisit due at ``by`` or before."""
        ...

    def state(self, origin: str) -> str | None: ...

    def site(self, origin: str) -> SiteRow | None:
        """Everything the queue records of ``origin``, or None if it does not hold it."""

    def rows(self) -> Iterator[SiteRow]: ...

    def close(self) -> None: ...


class CrawlQueueStore(Protocol):
    """One site's crawl queue, held by one visit (or one recovery) at a time: its URLs in discovery
    order, a cursor saying how far the crawl got, and an inbox other processes append to."""

    pages: int
    bytes: int
    cursor: int  # where in the log the next entry to fetch starts

    def add(self, url: str, depth: int) -> bool: ...

    def requeue(self, url: str, depth: int) -> None: ...

    def known(self, url: str) -> bool:
        """Has the site's bitmap seen ``url`` (it was queued, or a false positive)?"""

    def decide(self, url: str, kind: str, detail: str = "") -> None:
        """Log why ``url`` is not captured (archiver.queues.decisions), once per visit per kind;
        written with the queue's entries."""

    def next(self, *, merge: bool = True) -> Entry | None: ...

    def commit(self, entry: Entry, *, pages: int, bytes_: int) -> None: ...

    def mark(self) -> tuple[int, int, int]: ...

    def save(self, mark: tuple[int, int, int]) -> None: ...

    def restart(self) -> None: ...

    def day_pages(self, day: int) -> int:
        """Pages counted for the site's daily budget on ``day``; survives a restart."""

    def count_day_page(self, day: int) -> None: ...

    @property
    def restarted_at(self) -> float | None: ...

    @property
    def pending(self) -> int: ...

    def __len__(self) -> int: ...

    def inbox_waiting(self) -> bool: ...

    # The inbox taken is the implementation's own (a locked file, rows of a table); the crawler
    # hands it back unopened to merge and finish_inbox, or to its release().
    def take_inbox(self) -> Any: ...

    def merge(self, inbox: Any) -> bool: ...

    def finish_inbox(self, inbox: Any, added: bool) -> None: ...

    def add_to(self, job: SyncJob) -> None: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None: ...


class CrawlQueues(Protocol):
    """Every site's crawl queue: open one to crawl it, or append to it from another process."""

    def open(self, origin: str) -> CrawlQueueStore:
        """Open (creating) the queue of ``origin``; raises CrawlQueueBusy if another holds it."""

    def append(self, origin: str, entries: Iterable[tuple[str, int]], *, sync: bool = True) -> None:
        """Queue (url, depth) pairs for ``origin`` from outside its visit (merged at its next turn);
        with ``sync`` False they may wait for ``sync`` (many sites' appends made durable at once)."""

    def append_lines(self, lines: Mapping[str, bytes | memoryview], *, sync: bool = True) -> None:
        """``append`` for many sites' URLs already checked (the links batch's: normalised, their
        site fit for a crawl queue): each site's whole ``depth<TAB>url\\n`` lines, as the
        inboxes keep them (views, held until ``sync``, or bytes)."""

    def sync(self) -> None:
        """Make every append made with ``sync`` False durable."""

    def settle(self) -> None:
        """Fold what the syncs wrote into the queues' files, if the store leaves that to its
        caller (the embedded inboxes, opened for the links batch by ``crawl_queues(bulk=True)``
        of archiver.stores); it may run beside other work, not beside this store's appends."""

    def unfit(self, origin: str) -> str | None:
        """Why ``origin`` can have no crawl queue here (too long a name, say), or None."""

    def exists(self, origin: str) -> bool:
        """True if ``origin`` has a crawl queue."""

    def position(self, origin: str, url: str) -> QueuePosition | None:
        """Where ``url`` stands in ``origin``'s queue (read without opening it); None if it was
        never queued there."""

    def decisions(self, origin: str, url: str) -> list[Decision]:
        """The decisions logged about ``url`` by ``origin``'s visits, oldest first."""

    def close(self) -> None:
        """Let go of what reaches the queues (a database connection); appends not synced are lost."""


class SpoolWriterStore(Protocol):
    """One crawler process's external links, for the links batch."""

    def add(self, url: str, source: str, when: float, *, hops: int = 0,
            priority: float = 0.0) -> None: ...

    def tick(self, now: float) -> None: ...

    def add_to(self, job: SyncJob) -> list[Retired]: ...

    def finished(self, retired: list[Retired]) -> None: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


class SpoolFiles(Protocol):
    """The spool as the links batch reads it: the names of the closed files, oldest first, their
    bytes, and the ones it is done with."""

    def closed(self) -> list[str]: ...

    def read(self, name: str) -> bytes: ...

    def location(self, name: str) -> str:
        """Where the file lives, for messages (a path, an ``s3://`` URL)."""

    def done(self, name: str) -> None:
        """Move the file to the history of files done (``done/``)."""

    def history(self) -> SpoolFiles:
        """The files done, as a spool of their own."""


class LinksState(Protocol):
    """The external-link batch's state: the ledger of spool files done, each target site's in-link
    count and whether it is still to be pushed to the site queue, and the generation of each slice
    of the global bitmap (see :mod:`archiver.links.batch` for how a checkpoint uses them)."""

    generation: int  # of the last checkpoint; 0 before the first

    def slice_generations(self) -> list[int]:
        """Each slice's generation, slice 0 first; their number is the slice count. [] before the
        first checkpoint, and for a state from before slices (``legacy_bitmap``)."""

    def legacy_bitmap(self) -> BloomBitmap | None:
        """The one bitmap of a state from before slices, read as one slice (None for any other
        state); bitmaps of other generations are removed. RuntimeError if it is missing."""

    def legacy_name(self) -> str:
        """Where that bitmap lives, for messages."""

    def files_done(self) -> set[str]: ...

    def ledger_files(self) -> list[tuple[int, str]]:
        """(generation, name) of every spool file done."""

    def commit(self, generation: int, files: Iterable[tuple[str, int, int, int]],
               changes: SiteChanges, now: float, slices: list[int], *,
               first: Callable[[], object] | None = None) -> int:
        """One checkpoint, all or nothing: the spool files done (name, lines, new URLs, bad lines),
        the ``changes`` in their sites' rows, ``generation``, and each slice's generation (their
        number becomes the slice count); then a bitmap from before slices is removed. A site adds
        the in-links it gained, keeps its lowest hops and highest priority, and is to be pushed
        if it gained in-links or new URLs (a site with new URLs, to be woken too), or if its hops
        fell or priority rose; a site only marked (``sitechanges.MARKED``) is written only if
        the state knows it. ``first`` is waited for inside the transaction, the sites written,
        the ledger not yet: nothing is committed before it returns, and what it raises undoes
        the commit (the batch makes the sites' inboxes durable meanwhile). Returns the number of
        sites new to the state."""

    def reshard(self, slices: list[int]) -> None:
        """Make ``len(slices)`` slices, at these generations, the slices in force, all or nothing."""

    def dirty_sites(self) -> list[LinkedSite]:
        """The sites not pushed to the site queue yet."""

    def push(self, site_queue: Callable[[int], SiteQueueStore], processes: int) -> tuple[int, int]:
        """Hand the sites not pushed yet to their site queues (``site_queue(owner)``, the owner
        ``sites.process_for(origin, processes)``) as ``merge_links`` takes them, then mark
        them pushed; how many sites, and how many queues."""

    def close(self) -> None: ...
