"""The external-link batch (``archiver links run``): the one holder of the global bitmap.

Crawlers answer "seen it?" only for links inside the site they crawl; links that leave a site are
spooled to ``<root>/outlinks/``. This batch reads every closed spool file, normalises each URL and
tests-and-sets it in the global Bloom bitmap. A new URL goes to its site's crawl queue (the site's
inbox: a database row); a site's in-link count (distinct other sites linking to it) orders the
site queues, and a site seen for the first time joins the queue of the one process that owns it.

Its state (the ledger of spool files done, in-link counts, the bitmap's generations) is a store of its
own: archiver.queues.linksstate.

A checkpoint is one atomic step: (1) new URLs are appended to the sites' inboxes and made durable,
(2) the bitmap is saved as the next generation, (3) one SQLite transaction records the spool files
done, adds the in-link counts and moves the generation forward, (4) the previous bitmap file is
removed, then the counts are pushed to the site queues. A kill before (3) leaves the previous
generation, its bitmap and ledger, intact: a rerun redoes those files, and the URLs it appends a
second time are dropped by each site's own bitmap when its inbox is merged. A kill after (3) leaves
the sites marked dirty, and the next run pushes them first. So a rerun never counts or queues
anything twice. Spool files done are moved to ``outlinks/done/`` (the operator may prune it).

On several machines (``store.url`` naming PostgreSQL) the batch runs on any one of them: it reads
the spool files the crawlers shipped to the object store (``outlinks/``, deleted once done), keeps
its ledger and counts in PostgreSQL and its bitmap in the object store
(archiver.queues.pglinksstate, which also holds the one-batch-per-cluster lock), and feeds the one
shared site queue and the sites' inboxes in PostgreSQL; the steps of a checkpoint are the same.

Site pairs (source, target) share the bitmap with URLs under a prefix no URL can have, which keeps
the in-link counts distinct without a table that would grow with the link graph.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial

import trio

from archiver.config import Config
from archiver.logs import event
from archiver.queues.bloom import BloomBitmap, false_positive_rate, optimal_hashes
from archiver.queues.interfaces import LinksState
from archiver.queues.sitequeue import process_for
from archiver.queues.spool import parse_line
from archiver.service import Service
from archiver.stores import SharedStores, open_stores
from archiver.web import urls

log = logging.getLogger("archiver.links.batch")

# Bad lines logged one by one per spool file; the rest are only counted.
_REPORTED_BAD = 20
_PAIR = "\x00"  # no normalised URL starts with a NUL


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
    checkpoint_seconds: float = 0.0  # of which in checkpoints (crawl-queue appends, bitmap save)
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return (f"{self.files} files, {self.lines} URLs read, {self.new_urls} new URLs, "
                f"{self.new_sites} new sites, {self.bad} bad lines, "
                f"{self.lines / elapsed:,.0f} URLs/s")


class LinkBatch:
    """One run of the batch over an archive root; use as a context manager."""

    def __init__(self, config: Config, *, progress_interval: float = 5.0) -> None:
        self.config = config
        self.stores = open_stores(config)
        self.shared = isinstance(self.stores, SharedStores)
        with contextlib.ExitStack() as opened:  # closed in reverse: the locks go last
            opened.callback(self.stores.lock("links").release)
            self.state: LinksState = self.stores.links_state()  # (the cluster's lock, when shared)
            opened.callback(self.state.close)
            self.crawl_queues = self.stores.crawl_queues()
            opened.callback(self.crawl_queues.close)
            self.spool = self.stores.spool_files()
            self.totals = Totals()
            self.progress_interval = progress_interval
            self.stop_requested = threading.Event()
            self.bitmap = self._load_bitmap()
            self._pending: dict[str, list[str]] = defaultdict(list)  # origin -> new URLs, in order
            self._pending_count = 0
            self._inlinks: dict[str, int] = defaultdict(int)  # origin -> new distinct linking sites
            self._files: list[tuple[str, int, int, int]] = []  # (name, lines, new URLs, bad)
            self._last_progress = time.monotonic()
            self._push_dirty()
            self._opened = opened.pop_all()

    @property
    def generation(self) -> int:
        return self.state.generation

    def __enter__(self) -> LinkBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._opened.close()

    # -- the bitmap ------------------------------------------------------------------------

    def _load_bitmap(self) -> BloomBitmap:
        links = self.config.links
        bitmap = self.state.load_bitmap()
        if bitmap is None:
            bitmap = BloomBitmap(links.expected_urls * links.bits_per_url,
                                 optimal_hashes(links.bits_per_url))
        design = false_positive_rate(bitmap.bits, links.expected_urls, bitmap.hashes)
        event(log, logging.INFO, "bitmap", path=self.state.bitmap_name(self.generation),
              bits=bitmap.bits, hashes=bitmap.hashes, mib=round(bitmap.bits / 8 / 2**20, 1),
              expected_urls=links.expected_urls, fp_at_design_load=f"{design:.2e}",
              keys=bitmap.count, fp_now=f"{bitmap.fp_rate():.2e}", generation=self.generation)
        return bitmap

    # -- reading spool files -----------------------------------------------------------------

    def pending_files(self) -> list[str]:
        """Closed spool files not done yet; files the ledger has are moved to ``done/``
        (a kill between a checkpoint's commit and its moves leaves some behind)."""
        done = self.state.files_done()
        waiting = {name for name, *_ in self._files}
        out = []
        for name in self.spool.closed():
            if name in done:
                self.spool.done(name)
            elif name not in waiting:
                out.append(name)
        return out

    def process_file(self, name: str) -> None:
        """Test-and-set every URL of one spool file; new ones wait for the next checkpoint.

        A file (``outlinks.max_lines`` lines) is read whole and its keys go through the bitmap
        in one ``add_many`` call: the bit work is done by numpy, not one Python loop per bit.
        """
        found: list[str] = []  # normalised URLs, in file order
        targets: list[str] = []  # their origins
        pairs: list[str] = []  # (linking site, target site) keys
        paired: list[str] = []  # the target of each pair key
        bad = 0
        unfit: dict[str, str | None] = {}  # target origin -> why it can have no crawl queue
        # Line ends as Python's text mode reads them (universal newlines), in both modes.
        text = self.spool.read(name).decode("utf-8", errors="replace")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        where = self.spool.location(name)
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            parsed = parse_line(line)
            url = None
            if isinstance(parsed, tuple):
                url = parsed[0] if urls.is_normal(parsed[0]) else urls.normalize(parsed[0])
                if url is None:
                    parsed = f"not an http(s) URL: {parsed[0][:100]!r}"
                else:
                    target = url[: url.find("/", 8)]
                    if target not in unfit:
                        unfit[target] = self.crawl_queues.unfit(target)
                    if unfit[target] is not None:
                        parsed, url = f"{unfit[target]}: {url[:100]!r}", None
            if url is None:
                bad += 1
                if bad <= _REPORTED_BAD:
                    event(log, logging.WARNING, "spool-bad-line", file=where, line=number,
                          reason=parsed)
                continue
            target = url[: url.find("/", 8)]
            found.append(url)
            targets.append(target)
            source = parsed[1]
            if source != target:
                pairs.append(f"{_PAIR}{source}{_PAIR}{target}")
                paired.append(target)
        if bad > _REPORTED_BAD:
            event(log, logging.WARNING, "spool-bad-lines", file=where, bad=bad,
                  reported=_REPORTED_BAD)
        new = 0
        pending = self._pending
        for url, target, is_new in zip(found, targets, self.bitmap.add_many(found), strict=True):
            if is_new:
                new += 1
                pending[target].append(url)
        inlinks = self._inlinks
        for target, is_new in zip(paired, self.bitmap.add_many(pairs), strict=True):
            if is_new:
                inlinks[target] += 1
                self.totals.new_pairs += 1
        self._files.append((name, len(lines), new, bad))
        self._pending_count += new
        t = self.totals
        t.files, t.lines, t.bad, t.new_urls = (t.files + 1, t.lines + len(lines), t.bad + bad,
                                               t.new_urls + new)
        self._progress()

    def _progress(self) -> None:
        now = time.monotonic()
        if now - self._last_progress >= self.progress_interval:
            self._last_progress = now
            event(log, logging.INFO, "links-progress", summary=self.totals.line())

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Make the work since the last checkpoint durable and visible to the crawlers."""
        if not self._files:
            return
        started = time.monotonic()
        for origin, new_urls in self._pending.items():
            self.crawl_queues.append(origin, ((u, 0) for u in new_urls), sync=False)
        self.crawl_queues.sync()
        generation = self.generation + 1
        self.state.save_bitmap(self.bitmap, generation)
        touched = set(self._pending) | set(self._inlinks)
        self.totals.new_sites += self.state.commit(
            generation, list(self._files), dict(self._inlinks), set(self._pending), time.time())
        for name, *_ in self._files:
            self.spool.done(name)
        self._pending.clear()
        self._inlinks.clear()
        self._files.clear()
        self._pending_count = 0
        self._push_dirty()
        took = time.monotonic() - started
        self.totals.checkpoints += 1
        self.totals.checkpoint_seconds += took
        event(log, logging.INFO, "links-checkpoint", generation=generation, sites=len(touched),
              seconds=round(took, 2), summary=self.totals.line())

    def _push_dirty(self) -> None:
        """Hand the changed sites to the queues of the processes that own them (on several
        machines, to the one shared site queue)."""
        rows = self.state.dirty_sites()
        if not rows:
            return
        processes = 1 if self.shared else self.config.crawl.processes
        by_owner: dict[int, list[tuple[str, int, bool]]] = defaultdict(list)
        for origin, inlinks, woken in rows:
            by_owner[process_for(origin, processes)].append((origin, inlinks, woken))
        for owner, sites in sorted(by_owner.items()):
            queue = self.stores.site_queue(owner)
            try:
                queue.merge_links(sites)
            finally:
                queue.close()
        self.state.pushed([origin for origin, _, _ in rows])

    # -- runs -------------------------------------------------------------------------------------

    def run(self, *, once: bool) -> Totals:
        """Process closed spool files; with ``once`` stop when none is left, else wait for more.
        ``stop_requested`` ends the run at the next file, after a checkpoint."""
        limit = self.config.links.checkpoint_urls
        while not self.stop_requested.is_set():
            for name in self.pending_files():
                self.process_file(name)
                if self.stop_requested.is_set():
                    break
                if self._pending_count >= limit:
                    self.checkpoint()
            self.checkpoint()
            if once:
                break
            self.stop_requested.wait(self.config.links.poll_interval)
        return self.totals


def run_batch(config: Config, *, once: bool) -> Totals:
    """``archiver links run``: SIGTERM/SIGINT finish the current file and checkpoint, then stop."""
    with LinkBatch(config) as batch:
        def reloaded(new: Config) -> None:
            batch.config = new  # read afresh at each file and checkpoint

        service = Service(config, on_stop=batch.stop_requested.set, on_reload=reloaded)
        trio.run(service.run, partial(trio.to_thread.run_sync, partial(batch.run, once=once)))
        event(log, logging.INFO, "links-done", summary=batch.totals.line(),
              bitmap_keys=batch.bitmap.count, fp_now=f"{batch.bitmap.fp_rate():.2e}")
        return batch.totals
