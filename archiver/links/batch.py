"""The external-link batch (``archiver links run``): the one holder of the global bitmap.

Crawlers answer "seen it?" only for links inside the site they crawl; links that leave a site are
spooled to ``<root>/spool/``. This batch reads every closed spool file, normalises each URL and
tests-and-sets it in the global Bloom bitmap. A new URL goes to its site's crawl queue (the site's
inbox: a database row); a site's in-link count (distinct other sites linking to it) orders the
site queues, and a site seen for the first time joins the queue of the one process that owns it.

The bitmap is split into ``links.slices`` slices by a hash of the key (archiver.links.slicing,
archiver.links.slices), each a Bloom bitmap of its own, saved as its own file (or object) with its
own generation. ``LinkBatch`` is the driver: it picks the files, hands each checkpoint's steps
(archiver.links.steps) to an engine (archiver.links.engine: in this process, or on a Dask
cluster), and commits what they found. Its state (the ledger of spool files done, in-link counts,
each slice's generation) is a store of its own: archiver.queues.embedded.linksstate.

A checkpoint is one atomic step over a group of spool files: (1) the engine tests every slice with
the group's keys and saves each as its next generation, (2) the new URLs are appended to the
sites' inboxes and made durable, (3) one transaction records the spool files done, adds the
in-link counts and moves every slice's generation forward (it writes the sites' counts while (2)
runs, and records the rest once (2) is done), (4) the previous generation of each
slice is removed, the files move to ``spool/done/``, and, once PUSH_INTERVAL has passed since
the last push, the counts are pushed to the site queues (as they are at the end of every pass over
the pending files). A kill before (3), after any number of slices were saved, leaves the previous
generation of every slice, and the ledger, in force: the slices saved are stale (removed at the next start),
a rerun redoes those files, and the URLs it appends a second time are dropped by each site's own
bitmap when its inbox is merged. A kill after (3) leaves the sites marked dirty, and the next run
pushes them first. So a rerun never counts or queues anything twice. Spool files done stay in
``spool/done/`` for ``reshard`` (the operator may prune it).

Pushing is the commit's largest part (an upsert per site in its owner's queue), and a checkpoint
touches most sites: so the changed sites stay marked dirty in the state from checkpoint to
checkpoint, and one push hands them over when the pending files are drained, when PUSH_INTERVAL has
passed since the last push, or when the run stops, whichever comes first. A site's new in-link
count, hops and priority, and the wake of a finished site with new URLs, so wait at most until the
end of the run's pass over the pending files or PUSH_INTERVAL (plus one checkpoint); its new URLs
are in its inbox at once. The dirty marks are committed with the ledger, so a kill before the push
loses nothing: the next run pushes them first.

Steps (2)-(4) run in a committer thread while the engine runs step (1) of the next checkpoint:
putting the group's new URLs, in-links and marks together by site (mostly numpy and a compiled
loop), then SQLite and fsync, outside the GIL, beside reading and bit work. One commit at a time, in
order, and a commit starts only once the one before it is in. A kill then may also leave the next
generation of the slices saved: stale like the others, and removed at the next start.

On several machines (``store.url`` naming PostgreSQL) the batch runs on any one of them: it reads
the spool files the crawlers shipped to the object store (``outlinks/``, moved to
``outlinks/done/`` once done), keeps its ledger and counts in PostgreSQL and its slices in the
object store (archiver.queues.postgres.linksstate, which also holds the one-batch-per-cluster lock), and
feeds the one shared site queue and the sites' inboxes in PostgreSQL; the steps are the same.
When PostgreSQL restarts or fails over, the batch waits for it (``store-unavailable``,
``store-recovered``), takes its lock again and goes on; a commit whose answer was lost is settled
by reading the generation (archiver.queues.postgres.linksstate). If another batch took the lock
meanwhile, this one stops with a one-line error, and a rerun redoes what it had not committed.

Site pairs (source, target) share the bitmap with URLs under a prefix no URL can have, which keeps
the in-link counts distinct without a table that would grow with the link graph.

``reshard`` rebuilds every slice for another slice count by reading the spool files done again,
in ledger order, through the same steps; the new slices become the ones in force in one
transaction, so a reshard killed midway leaves the old ones in force.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial

import trio

from archiver.config import Config
from archiver.links import steps
from archiver.links.columns import REPORTED
from archiver.links.engine import Engine, LocalEngine, Work
from archiver.links.slices import SliceFiles, SliceObjects, SliceStore, slice_name, slice_shape
from archiver.links.slicing import SLICE_FUNCTION, check_slice_count
from archiver.logs import event
from archiver.queues.bloom import false_positive_rate
from archiver.queues.interfaces import LinksState, SiteQueueStore, SpoolFiles
from archiver.queues.spool import spool_order
from archiver.service import Service
from archiver.stores import open_stores

log = logging.getLogger("archiver.links.batch")

# Seconds after which a checkpoint's commit pushes the changed sites to the site queues even with
# pending files left (else only the end of the pass does; see the module docstring).
PUSH_INTERVAL = 30.0


@dataclass
class Totals:
    """Counters of one run, for the progress line and the summary."""

    files: int = 0
    lines: int = 0
    bad: int = 0
    new_urls: int = 0
    new_sites: int = 0
    new_pairs: int = 0
    checkpoints: int = 0
    steps_seconds: float = 0.0  # in the engine's steps (reading, testing and saving the slices)
    checkpoint_seconds: float = 0.0  # in commits (crawl-queue appends, the state's commit, pushes),
    # all but the last beside the next checkpoint's steps
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return (f"{self.files} files, {self.lines} URLs read, {self.new_urls} new URLs, "
                f"{self.new_sites} new sites, {self.bad} bad lines, "
                f"{self.lines / elapsed:,.0f} URLs/s")


@dataclass
class SliceCounts:
    """What the driver knows of each slice without holding it: size, hashes, keys."""

    bits: list[int]
    hashes: list[int]
    keys: list[int]

    def fp_now(self) -> float:
        """The worst slice's estimated false-positive rate."""
        return max(false_positive_rate(b, k, h)
                   for b, h, k in zip(self.bits, self.hashes, self.keys, strict=True))


def open_engine(config: Config, work: Work) -> Engine:
    """The engine ``links.engine`` names (Dask imported only for it)."""
    if config.links.engine == "dask":
        from archiver.links.dask_engine import DaskEngine

        return DaskEngine(config, work)
    return LocalEngine(work)


class LinkBatch:
    """One run of the batch over an archive root; use as a context manager."""

    def __init__(self, config: Config, *, progress_interval: float = 5.0,
                 rebuilding: bool = False) -> None:
        """``rebuilding``: for a reshard, which replaces the slices in force: one that is missing
        or damaged is logged (``slice-unreadable``), not an error."""
        self.config = config
        # A database that restarts or fails over is waited for (archiver.store.postgres.connection).
        self.stores = open_stores(config, wait=True)
        with contextlib.ExitStack() as opened:  # closed in reverse: the locks go last
            opened.callback(self.stores.lock("links").release)
            self.state: LinksState = self.stores.links_state()  # (the cluster's lock, when shared)
            opened.callback(self.state.close)
            self.crawl_queues = self.stores.crawl_queues(bulk=True)
            opened.callback(self.crawl_queues.close)
            self.spool = self.stores.spool_files()
            self.totals = Totals()
            self.progress_interval = progress_interval
            self.stop_requested = threading.Event()
            self.slices, self.generations = self._open_slices()
            self.counts = self._slice_counts(rebuilding=rebuilding)
            self.engine: Engine = open_engine(config, self._work(self.slices))
            opened.callback(self.engine.close)
            self._site_queues: dict[int, SiteQueueStore] = {}
            self._opened_queues = opened.enter_context(contextlib.ExitStack())
            # One commit at a time, beside the next checkpoint's steps, its inbox rows written in
            # a thread of their own; both ended before anything they write to is closed (the
            # committer first: it hands the inbox rows over).
            self._inbox_writer = ThreadPoolExecutor(1, thread_name_prefix="links-inbox")
            opened.callback(self._inbox_writer.shutdown)
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="links-commit")
            opened.callback(self._committer.shutdown)
            self._commit: Future[None] | None = None
            self._settling: Future[None] | None = None  # (the inboxes' settle after a commit)
            self._last_progress = time.monotonic()
            self._reading = (0, 0, 0)  # this checkpoint so far: files, lines, slices done
            self._last_push = time.monotonic()
            self._push_dirty()
            self._opened = opened.pop_all()

    @property
    def generation(self) -> int:
        return self.state.generation

    def __enter__(self) -> LinkBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._opened.close()

    # -- the slices ------------------------------------------------------------------------

    def slice_store(self, slice_count: int, *, empty_at: int = 0) -> SliceStore:
        """Where slices of ``slice_count`` live in these stores (new ones sized by the config)."""
        bits, hashes = slice_shape(self.config.links.expected_urls, self.config.links.bits_per_url,
                                   check_slice_count(slice_count))
        directory = self.config.root / "links"
        if (objects := self.stores.shared_objects()) is not None:
            return SliceObjects(objects, directory, slice_count, bits, hashes, empty_at)
        return SliceFiles(directory, slice_count, bits, hashes, empty_at)

    def _open_slices(self) -> tuple[SliceStore, list[int]]:
        """The slices in force and their generations; stale ones removed. A state from before
        slices has its one bitmap copied as slice 0 of 1 (recorded at the next checkpoint)."""
        legacy = self.state.legacy_bitmap()
        generations = self.state.slice_generations()
        wanted = self.config.links.slices
        if legacy is not None:
            slices = self.slice_store(1)
            slices.remove_stale(())
            slices.save(0, self.generation, legacy)
            event(log, logging.INFO, "links-legacy-bitmap", path=self.state.legacy_name(),
                  slice=slices.location(0, self.generation))
            generations = [self.generation]
        elif generations:
            slices = self.slice_store(len(generations))
        else:
            slices = self.slice_store(wanted)
            generations = [slices.empty_at] * wanted
        slices.remove_stale({slice_name(p, slices.count, g) for p, g in enumerate(generations)})
        if slices.count != wanted:
            event(log, logging.WARNING, "links-slices", state=slices.count, config=wanted,
                  note=f"the links state has {slices.count} slices and links.slices says "
                       f"{wanted}; going on with {slices.count}: run `archiver links reshard "
                       f"--slices {wanted}` to rebuild them")
        return slices, generations

    def _slice_counts(self, *, rebuilding: bool = False) -> SliceCounts:
        """Each slice's size and keys, logged with its false-positive rate at design load and now;
        with ``rebuilding``, a slice that cannot be read counts as empty (see ``__init__``)."""
        counts = SliceCounts([], [], [])
        design_keys = self.config.links.expected_urls / self.slices.count
        for p, generation in enumerate(self.generations):
            bits, hashes, keys = self.slices.bits, self.slices.hashes, 0
            if generation != self.slices.empty_at:
                try:
                    bits, hashes, _, keys = self.slices.header(p, generation)
                except RuntimeError as e:
                    if not rebuilding:
                        raise
                    event(log, logging.WARNING, "slice-unreadable", error=str(e),
                          note="the reshard rebuilds it from the spool files done")
            counts.bits.append(bits)
            counts.hashes.append(hashes)
            counts.keys.append(keys)
            event(log, logging.INFO, "slice", slice=f"{p}/{self.slices.count}",
                  path=self.slices.location(p, generation), bits=bits, hashes=hashes,
                  mib=round(bits / 8 / 2**20, 1), expected_urls=round(design_keys),
                  fp_at_design_load=f"{false_positive_rate(bits, round(design_keys), hashes):.2e}",
                  keys=keys, fp_now=f"{false_positive_rate(bits, keys, hashes):.2e}",
                  generation=generation)
        return counts

    def _work(self, slices: SliceStore, files: SpoolFiles | None = None) -> Work:
        """What the engine works on: ``files`` (the spool by default) and ``slices``."""
        # The crawl queues' rule for sites, as the engine's workers can be given it: the shared
        # queues take any site (PgCrawlQueues.unfit is None).
        unfit = self.stores.queue_name_rule()
        spool = steps.SpoolSource(self.spool if files is None else files, unfit)
        return Work(spool, slices, lambda: self.config.links.checkpoint_urls, self.stop_requested,
                    self)

    # -- progress (engine.Progress) ----------------------------------------------------------

    def file_read(self, lines: int) -> None:
        files, read, done = self._reading
        self._reading = (files + 1, read + lines, done)
        self._progress()

    def slice_done(self) -> None:
        files, read, done = self._reading
        self._reading = (files, read, done + 1)
        self._progress()

    def _progress(self) -> None:
        now = time.monotonic()
        if now - self._last_progress >= self.progress_interval:
            self._last_progress = now
            files, lines, done = self._reading
            event(log, logging.INFO, "links-progress", summary=self.totals.line(),
                  checkpoint=f"{files} files, {lines} URLs read, "
                             f"{done}/{self.slices.count} slices done")

    # -- checkpoints ----------------------------------------------------------------------------

    def pending_files(self) -> list[str]:
        """Closed spool files not done yet; files the ledger has are moved to ``done/``
        (a kill between a checkpoint's commit and its moves leaves some behind)."""
        done = self.state.files_done()
        out = []
        for name in self.spool.closed():
            if name in done:
                self.spool.done(name)
            else:
                out.append(name)
        return out

    def checkpoint(self, files: list[str]) -> int:
        """One checkpoint over the next group of ``files`` (pending, in spool order); how many it
        took. The engine's steps run here; the commit runs in the committer thread while the
        next checkpoint's steps run (``committed`` waits for it). The commit pushes the changed
        sites if PUSH_INTERVAL passed since the last push (``run`` pushes at the end of a pass)."""
        self._reading = (0, 0, 0)
        started = time.monotonic()
        results = self.engine.checkpoint(files, self.generations)
        self.totals.steps_seconds += time.monotonic() - started
        previous = self.generations
        self.generations = [g + 1 for g in previous]
        # A commit starts only once the one before it is in: a failed commit stops the run here,
        # and the next commit could otherwise record slices holding keys of files not recorded.
        self.committed()
        push = time.monotonic() - self._last_push >= PUSH_INTERVAL
        self._commit = self._committer.submit(self._commit_checkpoint, results, previous,
                                              self.generations, push)
        return len(results)

    def committed(self) -> None:
        """Wait for the commit under way, if any; raise what it raised."""
        commit, self._commit = self._commit, None
        if commit is not None:
            commit.result()

    def _commit_checkpoint(self, results: list[steps.FileResult], previous: list[int],
                           generations: list[int], push: bool) -> None:
        """Steps 2-4 of a checkpoint (see the module docstring), in the committer thread, with
        what the results change in their sites (``steps.site_changes``, and their new URLs in
        the inbox writer's thread); the dirty sites pushed if ``push``."""
        started = time.monotonic()
        self._settled()
        numbers = steps.site_numbers(results)
        # The new URLs made durable in their sites' inboxes (another database) while the state
        # writes its sites; the state records the files done only once they are.
        inboxes = self._inbox_writer.submit(self._append_inboxes, results, numbers)
        changes = steps.site_changes(results, numbers)
        t = self.totals
        for result in results:
            self._report_bad_lines(result)
            t.files, t.lines, t.bad = t.files + 1, t.lines + result.lines, t.bad + result.bad
            t.new_urls += result.new_url_count
            t.new_pairs += result.new_pairs
            self.counts.keys = [k + n for k, n in zip(self.counts.keys, result.new_keys, strict=True)]
        generation = self.generation + 1
        try:
            t.new_sites += self.state.commit(
                generation, [(r.name, r.lines, r.new_url_count, r.bad) for r in results],
                changes, time.time(), generations, first=inboxes.result)
        finally:
            wait([inboxes])  # (a state that failed early leaves no write under way)
        # What the inboxes' commit left in their WAL goes into their file beside the next
        # checkpoint's steps, or the push (else in the commit: its tens of megabytes twice).
        self._settling = self._inbox_writer.submit(self.crawl_queues.settle)
        for p, old in enumerate(previous):
            if old != self.slices.empty_at:
                self.slices.remove(p, old)
        for result in results:
            self.spool.done(result.name)
        if push:
            self._push_dirty()
        took = time.monotonic() - started
        t.checkpoints += 1
        t.checkpoint_seconds += took
        event(log, logging.INFO, "links-checkpoint", generation=generation,
              sites=changes.touched(), seconds=round(took, 2),
              summary=t.line())

    def _settled(self) -> None:
        """Wait for the inboxes' last settle, if any; raise what it raised."""
        settling, self._settling = self._settling, None
        if settling is not None:
            settling.result()

    def _append_inboxes(self, results: list[steps.FileResult], numbers: steps.SiteNumbers
                        ) -> None:
        """Append each site's new URLs in ``results`` to its inbox, durably."""
        # In key order, as inbox_lines gives them: each database's indexes take rows a fifth
        # faster than in any order.
        self.crawl_queues.append_lines(steps.inbox_lines(results, numbers))

    def _report_bad_lines(self, result: steps.FileResult) -> None:
        for number, reason in result.reports:
            event(log, logging.WARNING, "spool-bad-line", file=result.location, line=number,
                  reason=reason)
        if result.bad > REPORTED:
            event(log, logging.WARNING, "spool-bad-lines", file=result.location, bad=result.bad,
                  reported=REPORTED)

    def _push_dirty(self) -> None:
        """Hand the changed sites to the queues of the processes that own them (on several
        machines, to the one shared site queue, in the database itself)."""
        self._last_push = time.monotonic()
        sites, queues = self.state.push(self._site_queue, self.stores.site_queue_count)
        if sites:
            event(log, logging.INFO, "links-pushed", sites=sites, queues=queues)

    def _site_queue(self, owner: int) -> SiteQueueStore:
        """Process ``owner``'s site queue, kept open between pushes: its page cache stays warm."""
        if owner not in self._site_queues:
            self._site_queues[owner] = self.stores.site_queue(owner)
            self._opened_queues.callback(self._site_queues[owner].close)
        return self._site_queues[owner]

    # -- runs -------------------------------------------------------------------------------------

    def run(self, *, once: bool) -> Totals:
        """Process closed spool files; with ``once`` stop when none is left, else wait for more.
        ``stop_requested`` ends the run after the file being read, and a checkpoint. Each pass
        over the pending files ends with every changed site pushed."""
        while not self.stop_requested.is_set():
            with _without_cycle_collection():
                pending = self.pending_files()
                while pending and not self.stop_requested.is_set():
                    pending = pending[self.checkpoint(pending):]
                self.committed()
                self._push_dirty()  # the pass's changes (a stop ends the pass too)
                self._settled()
            if once:
                break
            self.stop_requested.wait(self.config.links.poll_interval)
        return self.totals

    # -- reshard ---------------------------------------------------------------------------------

    def reshard(self, slice_count: int, *, allow_missing: bool = False) -> Totals:
        """Rebuild every slice for ``slice_count`` slices from the spool files done, read again in
        ledger order through the same steps, and make them the slices in force in one
        transaction. ReshardError if files of the ledger are gone and ``allow_missing`` is not
        given; a kill midway leaves the old slices in force (the new ones are stale)."""
        self.committed()
        history = self.spool.history()
        kept = set(history.closed())
        ledger = sorted(self.state.ledger_files(), key=lambda row: (row[0], spool_order(row[1])))
        names = [name for _, name in ledger if name in kept]
        missing = len(ledger) - len(names)
        if missing and not allow_missing:
            raise ReshardError(
                f"{missing} of the {len(ledger)} spool files the ledger lists are no longer in "
                f"{self.spool.location('done')} (pruned?): restore them, or run again with "
                "--allow-missing, and the rebuilt slices lack their keys: some of their URLs go to "
                "their sites' inboxes again (each site's own bitmap drops them) and some site "
                "pairs count again as in-links")
        # New generations above every one in force: no new slice takes an old one's name.
        start = max(self.generations, default=0)
        rebuilt = self.slice_store(slice_count, empty_at=start)
        # In this process whatever links.engine says: the new slices are held, unsaved, from
        # group to group, and a Dask worker's copy could be lost or its task moved elsewhere.
        engine = LocalEngine(self._work(rebuilt, history))
        generations = [start] * slice_count
        event(log, logging.INFO, "links-reshard", slices=slice_count, files=len(names),
              missing=missing, function=SLICE_FUNCTION)
        try:
            while names:  # the slices grow in memory; no generation but the last is saved
                if self.stop_requested.is_set():
                    raise ReshardError("the reshard was stopped: the old slices stay in force")
                self._reading = (0, 0, 0)
                with _without_cycle_collection():
                    results = engine.checkpoint(names, generations, save=False)
                generations = [g + 1 for g in generations]
                names = names[len(results):]
                t = self.totals
                t.files += len(results)
                t.lines += sum(r.lines for r in results)
                t.checkpoints += 1
                event(log, logging.INFO, "links-reshard-progress", summary=t.line(),
                      left=len(names))
            engine.checkpoint([], generations)  # every slice saved
            generations = [g + 1 for g in generations]
            self.state.reshard(generations)
        finally:
            engine.close()
        old, self.slices, previous = self.slices, rebuilt, self.generations
        self.generations = generations
        for p, g in enumerate(previous):
            if g != old.empty_at:
                old.remove(p, g)
        self.engine.close()
        self.engine = open_engine(self.config, self._work(self.slices))
        self.counts = self._slice_counts()
        return self.totals


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """A pass over the spool files makes millions of objects and no cyclic garbage (loading the
    compiled loops makes hundreds of thousands more, for good): Python's cycle collector would
    only walk them again and again (a tenth of the time); it runs again once the pass ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class ReshardError(Exception):
    """A reshard that cannot rebuild what the ledger says (files pruned), or was stopped."""


def reshard_batch(config: Config, slice_count: int, *, allow_missing: bool) -> Totals:
    """``archiver links reshard``: SIGTERM/SIGINT stop it (ReshardError), the old slices in force."""
    with LinkBatch(config, rebuilding=True) as batch:
        service = Service(config, on_stop=batch.stop_requested.set)
        trio.run(service.run, partial(trio.to_thread.run_sync, partial(
            batch.reshard, slice_count, allow_missing=allow_missing)))
        event(log, logging.INFO, "links-resharded", slices=slice_count,
              summary=batch.totals.line(), keys=sum(batch.counts.keys),
              fp_now=f"{batch.counts.fp_now():.2e}")
        return batch.totals


def run_batch(config: Config, *, once: bool) -> Totals:
    """``archiver links run``: SIGTERM/SIGINT finish the current file and checkpoint, then stop."""
    with LinkBatch(config) as batch:
        def reloaded(new: Config) -> None:
            batch.config = new  # read afresh at each checkpoint

        service = Service(config, on_stop=batch.stop_requested.set, on_reload=reloaded)
        trio.run(service.run, partial(trio.to_thread.run_sync, partial(batch.run, once=once)))
        event(log, logging.INFO, "links-done", summary=batch.totals.line(),
              keys=sum(batch.counts.keys), fp_now=f"{batch.counts.fp_now():.2e}")
        return batch.totals
