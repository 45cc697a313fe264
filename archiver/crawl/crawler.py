"""A crawler process: N site slots (64 by default) in one trio nursery.

Each slot takes the most linked-to due site from the process's site queue, visits it, and records
the outcome; a slot that finds nothing to do sleeps until the next site is due (or, as a daemon,
polls for sites added by the external-link batch). SIGINT and SIGTERM cancel the slots: fetches in
flight are dropped, interrupted sites go back to the queue, and every file is flushed and closed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, ParamSpec, TypeVar

import trio

from archiver.browser.chromium import supervised
from archiver.config import Config
from archiver.crawl.addressslots import AddressSlots
from archiver.crawl.bodies import BodyWork
from archiver.crawl.capture import CaptureSink
from archiver.crawl.context import CrawlContext
from archiver.crawl.dedupe import Dedupe
from archiver.crawl.openfiles import budget, raise_limit
from archiver.crawl.pluginhost import PluginHost, describe, load_focus, load_plugins
from archiver.crawl.policy import Outcome
from archiver.crawl.recovery import CommitPoint, commit_path, recover
from archiver.crawl.rendering import Browsers
from archiver.crawl.stats import Stats
from archiver.crawl.visit import SiteVisit
from archiver.dns.lookup import Lookup
from archiver.dns.resolver import Resolver
from archiver.logs import event
from archiver.queues.interfaces import CrawlQueueStore, SiteQueueStore
from archiver.queues.models import CrawlQueueBusy
from archiver.queues.revisits import RevisitSchedule
from archiver.queues.sites import process_for
from archiver.service import Service
from archiver.store.durable import is_disk_error
from archiver.store.offloop import OffLoop, is_busy
from archiver.store.status import summary_line
from archiver.stores import open_stores
from archiver.web import urls
from archiver.web.sheets import sheet_for

if TYPE_CHECKING:  # (imported where used: an embedded crawler never loads the PostgreSQL driver)
    from archiver.crawl.cluster import ClusterMember

log = logging.getLogger("archiver.crawl.crawler")
P = ParamSpec("P")
T = TypeVar("T")

EX_TEMPFAIL = 75  # sysexits.h: a temporary failure (crawl.on_disk_full = "exit", bundles left)
# Seconds between tries to ship while the object store is away, at most (the back-off doubles
# from warc.sync_interval): a store back is noticed within that.
SHIP_RETRY_MAX = 30.0
_DISK_FULL = 'the disk is full (crawl.on_disk_full = "exit")'


_TRAILING_COMMENT = re.compile(r"\s+#.*$")
_SPACE = re.compile(r"\s")


class SeedError(Exception):
    """A seeds file that cannot be used at all."""


class Seeds(NamedTuple):
    """The seed URLs of a seeds file, and how many of its lines were refused (each logged)."""

    urls: list[str]
    refused: int


def read_seeds(path: Path) -> Seeds:
    """Seed URLs from ``path``: one URL or host name a line; blank lines and ``#`` comments allowed.

    A line that is not a usable URL (one with a space in it among them: "https://exa mple.com/"
    is no seed of https://exa) is logged with its number and why, and skipped; a file with no
    usable line is an error.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise SeedError(f"{path}: cannot read seeds: {e.strerror}") from None
    seeds = []
    refused = 0
    for number, line in enumerate(text.splitlines(), 1):
        line = _TRAILING_COMMENT.sub("", line).strip()  # "URL  # a comment" keeps the URL
        if not line or line.startswith("#"):
            continue
        url = None if _SPACE.search(line) else urls.site_of_seed(line)
        if url is None:
            reason = ("a space in it (one URL or host name a line)" if _SPACE.search(line)
                      else "not an http or https URL or a host name")
            event(log, logging.WARNING, "bad-seed", file=str(path), line=number, value=line[:200],
                  reason=reason)
            refused += 1
            continue
        seeds.append(url)
    if not seeds:
        raise SeedError(f"{path}: no usable seed (want URLs or host names, one a line)")
    return Seeds(seeds, refused)


class SeedsQueued(NamedTuple):
    """What enqueue_seeds did: seeds queued, sites new to a queue, and seeds refused (lines of the
    file that are no seed, out of scope, or a host no crawl queue can hold; each with a warning)."""

    queued: int
    new_sites: int
    refused: int


def enqueue_seeds(config: Config, process: int, seeds: list[str], *, recrawl: bool = False,
                  refused_lines: int = 0) -> SeedsQueued:
    """Put each seed's site in the queue of the process that owns it.

    The seed URL (and "/") go into the site's crawl queue, so a visit starts from both; a site
    another process is crawling right now gets them through its inbox. ``recrawl``: a seed site
    already done is queued for a new visit. ``process`` is the caller's; seeds of other processes
    are handed to their queues, which is how several processes share one seed list.

    Seeds out of scope (``[scope]``) are refused, each with a warning, and "/" is queued only if
    it is in scope; SeedError if no seed is in scope. ``refused_lines``: the lines of the seeds
    file ``read_seeds`` refused, counted with the seeds refused here.
    """
    scope = config.scope.rules()
    decided = [(url, scope.decide(url)) for url in seeds]
    refused = [(url, decision) for url, decision in decided if not decision.in_scope]
    for url, decision in refused:
        event(log, logging.WARNING, "seed-out-of-scope", value=url[:200],
              rule=decision.rule or "no include rule")
    if refused and len(refused) == len(seeds):
        raise SeedError(f"no seed is in scope ({len(seeds)} refused, see the warnings): check "
                        "scope.include and scope.exclude")
    given = len(seeds)
    seeds = [url for url, decision in decided if decision.in_scope]
    processes = config.crawl.processes
    stores = open_stores(config)
    crawl_queues = stores.crawl_queues()
    queues: dict[int, SiteQueueStore] = {}
    added = queued = 0
    try:
        for url in seeds:
            origin = urls.origin(url)
            owner = stores.site_queue_of(origin)  # one shared queue, or the owner process's
            if owner not in queues:
                # Another process may be running on that queue: leave its active sites alone.
                queues[owner] = stores.site_queue(owner)
            unfit = crawl_queues.unfit(origin)
            if unfit is not None:  # a host name too long for a crawl-queue directory
                event(log, logging.WARNING, "bad-seed", value=url[:200], error=unfit)
                continue
            queued += 1
            entries = [(entry, 0) for entry in (origin + "/", url) if scope.allows(entry)]
            try:
                crawl_queue = crawl_queues.open(origin)
            except CrawlQueueBusy:
                crawl_queues.append(origin, entries)
            else:
                with crawl_queue:
                    for entry in entries:
                        crawl_queue.add(*entry)
            added += queues[owner].add(origin)
            if recrawl:
                queues[owner].recrawl(origin)
    finally:
        for queue in queues.values():
            queue.close()
        crawl_queues.close()
    refused_count = given - queued + refused_lines
    event(log, logging.INFO, "seeds-queued", seeds=queued, new_sites=added, refused=refused_count,
          own=sum(process_for(urls.origin(u), processes) == process for u in seeds))
    return SeedsQueued(queued, added, refused_count)


class Crawler:
    """One crawler process."""

    def __init__(self, config: Config, *, process: int = 0, until_idle: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        """``clock``: the wall clock for due times and the sheets' windows and budgets."""
        self.config = config
        self.process = process
        self.until_idle = until_idle
        self.exit_status = 0  # EX_TEMPFAIL after stopping on a full disk, or with bundles left
        self.stopped_because = ""  # why, for the command's last line
        self._unsettled: list[tuple[str, Outcome]] = []  # outcomes the full disk refused
        self.stats = Stats(process=process)
        # First: a plugin that cannot start, or a limit of open files too low for the configured
        # sites (archiver.crawl.openfiles), stops the crawler before it takes anything.
        self.plugins = PluginHost(load_plugins(config.plugins) + load_focus(config.crawl.focus),
                                  self.stats.errors)
        was, limit, hard = raise_limit()
        self.files = budget(limit, config.crawl.sites_per_process, config.catalog.shards)
        event(log, logging.INFO, "open-files", limit=limit, hard=hard, was=was,
              sites=config.crawl.sites_per_process,
              catalog_connections=self.files.catalog_connections)
        # A crawler waits for a database that restarts or fails over (archiver.store.postgres.connection).
        self.stores = stores = open_stores(config, wait=True)
        # The database away, lost leases, fenced writes: faults, counted.
        if stores.watch is not None:
            stores.watch.report = self._database_fault
        if stores.leases is not None:
            stores.leases.report = self.stats.fault
        self._lock = stores.lock("crawl", process)
        shared = stores.cluster
        # In a cluster, the one site queue, where this process leases the sites it claims.
        leased = shared.site_queue(process) if shared is not None else None
        self.queue = leased if leased is not None else stores.site_queue(process, recover=True)
        self.catalog = stores.catalog(digests=config.crawl.dedupe == "digest",
                                      max_open=self.files.catalog_connections)
        self.cluster: ClusterMember | None = None
        if stores.embedded is not None:
            recover(config, stores.embedded, process, self.catalog)
        if shared is not None and leased is not None:
            from archiver.crawl.cluster import ClusterMember

            self.cluster = ClusterMember(config, shared, process, self.catalog, leased,
                                         stats=self.stats)
            self.cluster.recover()
        self.bundle = stores.bundle_writer(process)
        self.commit_point = CommitPoint(commit_path(stores.state_directory(), process),
                                        self.bundle.position())
        self.lookup = stores.catalog(readonly=True, max_open=self.files.catalog_connections)
        self.dns_history = stores.dns_history()
        self.spool = stores.spool_writer(process)
        self.status_files = stores.status()
        # In a cluster the status lives in the database; a copy on this machine's disk is what
        # ``archiver status`` shows here while the database is away (waiting_for=database).
        self.local_status = stores.local_status()
        bodies = BodyWork()
        # Where every capture goes: its records in the bundle; its catalog entry, once they are
        # durable, into the catalog (in a cluster: pending until its bundle is shipped).
        sink = CaptureSink(self.bundle, self.catalog.add if self.cluster is None
                           else self.cluster.record, bodies=bodies, stats=self.stats)
        self.ctx = CrawlContext(
            config=config, bundle=self.bundle, spool=self.spool, stats=self.stats, sink=sink,
            dedupe=Dedupe(self.lookup, stores.warcs(), bodies), bodies=bodies,
            crawl_queues=stores.crawl_queues(),
            slots=AddressSlots(config.crawl.connections_per_address),
            lookup=Lookup(hosts_file=config.dns.hosts_file, history=self.dns_history,
                              dns=Resolver(nameservers=config.dns.nameservers,
                                              timeout=config.dns.timeout),
                              min_age=config.dns.min_age, max_age=config.dns.max_age,
                              retry_base=config.dns.retry_base, retry_max=config.dns.retry_max),
            clock=clock)
        if stores.leases is not None:
            self.ctx.leases, self.ctx.published = stores.leases, []

    async def run(self) -> None:
        """Crawl until idle (with ``until_idle``) or until SIGINT/SIGTERM."""
        event(log, logging.INFO, "crawler-start", process=self.process,
              slots=self.config.crawl.sites_per_process, root=str(self.config.root),
              until_idle=self.until_idle, plugins=describe(self.plugins.plugins))
        self._queue_calls = OffLoop()
        if self.stores.watch is not None:
            token = trio.lowlevel.current_trio_token()

            def changed() -> None:  # from any thread; after the run, nothing waits any more
                with contextlib.suppress(trio.RunFinishedError):
                    token.run_sync_soon(self._database_changed)

            self.stores.watch.on_change = changed
        self.service = Service(self.config, drain_timeout=lambda config: config.crawl.drain_timeout,
                               on_stop=self._drain, on_reload=self._reloaded)
        trio.lowlevel.add_instrument(self.stats.loop)
        try:
            await self.service.run(self._crawl)
        finally:
            trio.lowlevel.remove_instrument(self.stats.loop)
            self.close()

    async def _crawl(self) -> None:
        # No browser runs until a page is rendered (crawl.capture, archiver.crawl.rendering).
        async with supervised(self.config.browser.executable) as supervisor, \
                trio.open_nursery() as nursery:
            self.ctx.browsers = Browsers(supervisor, lambda: self.ctx.config.browser, self.stats)
            nursery.start_soon(self.ctx.browsers.watch_idle)
            nursery.start_soon(self._report)
            nursery.start_soon(self._sync)
            if self.cluster is not None:
                nursery.start_soon(self._renew, self.cluster)
                nursery.start_soon(self._ship, self.cluster)
            while True:
                async with trio.open_nursery() as slots:
                    for number in range(self.config.crawl.sites_per_process):
                        slots.start_soon(self._slot, number)
                if self.cluster is None or not await self._lost_bundles_due(self.cluster):
                    break
            if self.cluster is not None:  # --until-idle: the bundles closed reach the store first
                await self._shipped(self.cluster)
            nursery.cancel_scope.cancel()

    def _temporary_failure(self, because: str) -> None:
        """Exit with EX_TEMPFAIL, saying why (the first reason stays)."""
        if not self.exit_status:
            self.exit_status, self.stopped_because = EX_TEMPFAIL, because

    def close(self) -> None:
        """Commit and close everything; on a full disk leave the bundle ``.open`` (the next start
        repairs and indexes it) rather than close a file whose entries could not be committed."""
        try:
            self.bundle.sync()
            self.ctx.sink.commit(self.ctx.sink.take())
            self.bundle.close()
            self.spool.close()
            if self.cluster is not None:  # nothing closed stays on this machine's disk...
                with self.cluster.beating():
                    self.cluster.ship(self._closed_bundles())
                    if self.cluster.away is None:
                        self.cluster.ship_spool()
                if self.cluster.waiting:  # ...unless the object store is away
                    self._temporary_failure(f"the object store did not take {len(self.cluster.waiting)} "
                                            "closed bundles; the next start ships them")
                    event(log, logging.WARNING, "bundles-left", bundles=len(self.cluster.waiting),
                          note="the object store did not take them; the next start ships them")
            self.commit_point.finish(self.bundle.position())
            self._write_status()
        except (OSError, sqlite3.Error) as e:
            if not is_disk_error(e):
                raise
            self._temporary_failure(_DISK_FULL)
            event(log, logging.ERROR, "stopped-on-full-disk", error=str(e),
                  note="the open WARC bundle is repaired and indexed at the next start")
        self.catalog.close()
        self.lookup.close()
        self.dns_history.close()
        self.queue.close()
        self.ctx.crawl_queues.close()
        if self.cluster is not None:
            self.cluster.close()
        self._lock.release()
        event(log, logging.INFO, "crawler-stop", process=self.process,
              **{"pages": self.stats.pages, "bytes": self.stats.bytes})

    def _database_fault(self, level: int, name: str, fields: dict) -> None:
        """``store-unavailable`` / ``store-recovered`` of the PostgreSQL store, counted."""
        self.stats.fault(log, level, name, store="database", **fields)

    def _database_changed(self) -> None:
        """On the loop: fetching pauses while the database is away (a lease cannot be renewed,
        nor a capture catalogued), and goes on when it is back."""
        assert self.stores.watch is not None
        self.ctx.database(self.stores.watch.away)

    def _drain(self) -> None:
        """SIGTERM/SIGINT: every visit ends after its current fetch (``drain_timeout`` cancels)."""
        event(log, logging.INFO, "draining", active=len(self.stats.active))
        self.ctx.draining.set()
        self.ctx.nudge()

    def _reloaded(self, new: Config) -> None:
        """SIGHUP: new rests, limits and log level apply at once (see archiver.reload)."""
        self.config = self.ctx.config = new
        self.ctx.nudge()

    async def _slot(self, number: int) -> None:
        include_deferred = not self.until_idle
        draining = self.ctx.draining
        while not draining.is_set():
            if not self.ctx.disk_ok.is_set():
                await self.ctx.disk_ok.wait()
                continue
            try:
                # Revisits are a daemon's (--until-idle does not wait for them), when on.
                revisits = include_deferred and self.config.crawl.revisit_interval > 0
                origin, due = await self._queue(self.queue.claim_or_due,
                                                include_deferred=include_deferred,
                                                include_revisits=revisits, now=self.ctx.clock())
            except sqlite3.Error as e:
                if not is_disk_error(e):
                    raise
                self.ctx.disk_trouble(e, "site queue")
                continue
            if origin is None:
                if due is None and self.until_idle:
                    return
                c = self.config.crawl
                # Capped: sites may be added (by the links batch, or seeds) or come free at any time.
                wait = c.poll_interval if due is None else min(due - self.ctx.clock(),
                                                               c.poll_interval)
                with trio.move_on_after(max(wait, 0.01)):
                    await draining.wait()
                continue
            await self._visit(origin)

    async def _queue(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A site-queue call, in a worker thread; while another process holds the queue's write
        lock past the busy timeout (see archiver.store.offloop), logged and made again after a pause."""
        while True:
            try:
                return await self._queue_calls.call(fn, *args, **kwargs)
            except sqlite3.OperationalError as e:
                if not is_busy(e):
                    raise
                event(log, logging.WARNING, "site-queue-busy", call=fn.__name__, error=str(e),
                      retry_in=self.config.crawl.poll_interval)
            await trio.sleep(self.config.crawl.poll_interval)

    async def _visit(self, origin: str) -> None:
        event(log, logging.INFO, "site-start", site=origin)
        try:
            site = await self._queue(self.queue.site, origin)
            recrawl = await self._start_over(origin) or (site is not None and site.visits > 1)
            sheet = sheet_for(self.config.sheets, origin)
            closed = sheet.wait(self.ctx.clock(), 0) if sheet is not None else None
            if closed is not None:  # outside its window: back without a fetch (nor a lookup)
                outcome = Outcome("postponed", closed[1], due=closed[0])
            else:
                cookies = await self._queue(self.queue.cookies, origin)
                visit = SiteVisit(origin, self.ctx, recrawl=recrawl,
                                  hops=site.hops if site else 0, plugins=self.plugins,
                                  cookies=cookies)
                outcome = await visit.run()
                if visit.changes.compared:
                    outcome = dataclasses.replace(outcome, changes=visit.changes)
                if outcome.kind != "lost":  # the site is another process's now
                    await self._keep_session(origin, visit)
        except trio.Cancelled:
            # Also reached when the claim's thread finished after the slot was cancelled: the site
            # is ours, and goes back now (or, if even that fails, at the next start's recovery).
            with trio.CancelScope(shield=True):
                try:
                    await self._queue_calls.call(self.queue.release, origin)
                except sqlite3.Error as e:
                    event(log, logging.WARNING, "site-not-released", site=origin, error=str(e))
            raise
        except Exception as e:  # one site's bug must not stop the other slots
            log.exception("site-crashed", extra={"fields": {"site": origin}})
            self.stats.errors["internal"] += 1
            outcome = Outcome("retry", f"internal error: {type(e).__name__}")
        await self._settle_site(origin, outcome)

    async def _keep_session(self, origin: str, visit: SiteVisit) -> None:
        """Keep what the visit leaves of its site's session: the cookie jar (for the next
        visit) and the count of gatekeepers' answers (``status --sites``)."""
        jar = visit.session.jar
        if jar is not None and (jar or visit.kept_cookies):  # none before, none now: no write
            await self._queue(self.queue.keep_cookies, origin, jar.to_json(time.time()))
        if visit.gatekeepers:
            await self._queue(self.queue.count_gatekeepers, origin, dict(visit.gatekeepers))

    async def _settle_site(self, origin: str, outcome: Outcome) -> None:
        """Record a visit's outcome in the site queue; on a full disk, try again after a sync."""
        try:
            await self._record_outcome(origin, outcome)
        except sqlite3.Error as e:
            if not is_disk_error(e):
                raise
            self.ctx.disk_trouble(e, "site queue")
            self._unsettled.append((origin, outcome))

    async def _record_outcome(self, origin: str, outcome: Outcome) -> None:
        if outcome.kind == "lost":  # another process holds the site: nothing of ours to record
            # ... or none yet, and its deadline passed before a renewal (this process was paused):
            # then it is given back, not left leased to no visit (renewed on and on).
            await self._queue(self.queue.release, origin)
            self.stats.sites_lost += 1
            event(log, logging.WARNING, "site-lost", site=origin, reason=outcome.note)
            return
        if outcome.kind == "stopped":
            await self._queue(self.queue.release, origin)
            event(log, logging.INFO, "site-stopped", site=origin, reason=outcome.note)
            return
        if outcome.kind == "paused":  # its session was lost: it waits for `site resume`
            await self._queue(self.queue.pause, origin, outcome.note)
            self.stats.sites_paused += 1
            event(log, logging.WARNING, "site-paused", site=origin, reason=outcome.note)
            return
        if outcome.kind == "postponed":  # its sheet's window or daily budget
            await self._queue(self.queue.postpone, origin, outcome.due, outcome.note)
            event(log, logging.INFO, "site-postponed", site=origin, reason=outcome.note,
                  due=round(outcome.due))
            return
        if outcome.kind == "done":
            c = self.config.crawl
            await self._queue(self.queue.finish, origin, outcome.note, changes=outcome.changes,
                              schedule=RevisitSchedule(c.revisit_interval, c.revisit_min,
                                                       c.revisit_max), now=self.ctx.clock())
            self.stats.sites_done += 1
            event(log, logging.INFO, "site-done", site=origin, note=outcome.note or None)
        else:
            c = self.config.crawl
            state = await self._queue(self.queue.retry, origin, delay=c.retry_delay,
                                      max_attempts=c.site_retries, defer_delay=c.defer_delay,
                                      note=outcome.note, now=self.ctx.clock())
            self.stats.sites_retried += 1
            event(log, logging.WARNING, "site-" + state, site=origin, reason=outcome.note)

    async def _start_over(self, origin: str) -> bool:
        """Restart the crawl queue of a site queued for a recrawl; True if it was."""
        if not await self._queue(self.queue.restart_pending, origin):
            return False

        def restart() -> None:
            crawl_queue = self.ctx.crawl_queues.open(origin)
            try:
                crawl_queue.restart()
            finally:
                crawl_queue.close()

        await trio.to_thread.run_sync(restart)
        await self._queue(self.queue.restarted, origin)
        event(log, logging.INFO, "site-recrawl", site=origin)
        return True

    def _write_status(self) -> dict:
        """Write the status file on the calling thread (at close, once the slots are done)."""
        status = self.stats.snapshot(self.queue.counts())
        self.status_files.write(self.process, status)
        return status

    async def _write_status_off_loop(self) -> dict:
        """Write the status file, the queue counted and the file written in worker threads."""
        status = self.stats.snapshot(await self._queue(self.queue.counts))
        await trio.to_thread.run_sync(self.status_files.write, self.process, status)
        await self._write_local_status(status)
        return status

    async def _write_local_status(self, status: dict) -> None:
        """In a cluster: the status's copy on this machine's disk (see ``local_status``)."""
        if self.local_status is not None:
            await trio.to_thread.run_sync(self.local_status.write, self.process, status)

    async def _report(self) -> None:
        """Every ``status_interval``: the status written, and its summary logged. While a write
        waits (for a database that is away: the status lives there), the summary is logged
        alone, with the site counts last read."""
        writing = trio.Event()
        writing.set()  # set: no write under way
        sites: dict[str, int] = {}

        async def report() -> None:
            nonlocal sites
            try:
                self.spool.tick(time.time())
                status = await self._write_status_off_loop()
            except OSError as e:
                if not is_disk_error(e):
                    raise
                self.ctx.disk_trouble(e, "status file")
                return
            finally:
                writing.set()
            sites = status["sites"]
            log.info("progress", extra={"fields": {"summary": summary_line(status)}})

        async with trio.open_nursery() as nursery:
            while True:
                await trio.sleep(self.config.crawl.status_interval)
                if not writing.is_set():
                    status = self.stats.snapshot(sites)
                    with contextlib.suppress(OSError):  # a full disk is the status write's to report
                        await self._write_local_status(status)
                    log.info("progress", extra={"fields": {"summary": summary_line(status)}})
                    continue
                writing = trio.Event()
                nursery.start_soon(report)

    async def _sync(self) -> None:
        """Push written WARC data to disk at a steady pace (what a power loss can cost)."""
        while True:
            await trio.sleep(self.config.warc.sync_interval)
            # WARC data first, then the crawl queues whose cursors say it was fetched; the
            # fsyncs run in a worker thread so the slots never wait on the disk.
            # Catalog entries are committed only once their records are on disk.
            # Marks first: every record of an entry committed by then is in the bundle's
            # buffer, which the flush below hands to the OS before the fsync.
            await self.sync_once()
            if self.cluster is not None:
                await self._check_local_limit(self.cluster)

    async def sync_once(self) -> bool:
        """One group commit; False (and fetching paused, or the process stopping) if the disk
        refused a write. Entries and cursors not committed stay for the next try."""
        ctx = self.ctx
        marks: list[tuple[CrawlQueueStore, tuple[int, int, int]]] = []
        position = ctx.bundle.position()

        def take_marks() -> list[CrawlQueueStore]:
            # When the job's turn comes: every record of an entry committed by then is written,
            # and the job flushes and fsyncs it.
            nonlocal position
            marks[:] = [(crawl_queue, crawl_queue.mark()) for crawl_queue in ctx.open_queues]
            position = ctx.bundle.position()
            return [crawl_queue for crawl_queue, _ in marks]

        try:
            await ctx.make_durable(take_marks)
        except (OSError, sqlite3.Error) as e:
            if not is_disk_error(e):
                raise
            ctx.disk_trouble(e, "sync")
            if self.config.crawl.on_disk_full == "exit":
                self._temporary_failure(_DISK_FULL)
                self.service.stop_now()
            return False
        for crawl_queue, mark in marks:
            if crawl_queue in ctx.open_queues:  # still open (a visit that ended saved its own)
                crawl_queue.save(mark)
        self.commit_point.advance(position)
        if ctx.disk_full and ctx.bundle.error is None:
            unsettled, self._unsettled = self._unsettled, []
            for origin, outcome in unsettled:
                await self._settle_site(origin, outcome)
            if not self._unsettled:
                ctx.disk_back()
                self.stats.fault(log, logging.WARNING, "disk-ok", resumed=ctx.disk_ok.is_set())
        return True

    def _closed_bundles(self) -> list[Path]:
        """This process's bundles finished by the group commit, and the last one closed at exit."""
        published, self.ctx.published = self.ctx.published or [], []
        directory = self.stores.warc_directory()
        return [*published, *sorted(p for p in directory.glob(f"*-{self.process}-*.warc.gz"))]

    async def _renew(self, cluster: ClusterMember) -> None:
        """Renew the site leases and the heartbeat at a third of the TTL; declare lost the
        bundles of crawlers that stopped beating. A lost lease wakes its visit, which stops."""
        while True:
            await trio.sleep(self.config.crawl.lease_ttl / 3)
            lost = await self._queue(cluster.renew)
            if lost:
                self.ctx.nudge()
            if cluster.fenced:
                self.service.stop_now()
                return
            await trio.to_thread.run_sync(cluster.reap)

    async def _lost_bundles_due(self, cluster: ClusterMember) -> bool:
        """With ``--until-idle``, once the slots found nothing left: wait until every bundle the
        other crawlers have open now is shipped or found lost (a crawler still beating may have
        vanished: its bundle is found lost when its heartbeat is ``crawl.lease_ttl`` old). True
        if a lost one made sites due again: the slots run again. This crawler's own bundle is
        closed first, so that others waiting the same way wait for it no longer than it ships."""
        if not self.until_idle or self.ctx.draining.is_set():
            return False
        self.bundle.retire()
        names = await trio.to_thread.run_sync(cluster.held_elsewhere)
        if names:
            event(log, logging.INFO, "waiting-for-bundles", bundles=len(names),
                  note="other crawlers' open bundles: shipped in time, or found lost and their"
                  " URLs fetched again")
        while names:
            settled, lost = await trio.to_thread.run_sync(cluster.settled, names)
            if settled or (lost and await self._due()):
                break
            with trio.move_on_after(self.config.crawl.poll_interval):
                await self.ctx.draining.wait()
            if self.ctx.draining.is_set():
                return False
        return await self._due()

    async def _due(self) -> bool:
        """True if a site is due, or will be, for ``--until-idle`` (deferred sites aside)."""
        return await self._queue(self.queue.next_due, include_deferred=False) is not None

    async def _ship(self, cluster: ClusterMember) -> None:
        """Ship each bundle the group commit finishes, and the closed spool files. While the
        object store is away they wait, and the next try comes after a back-off doubling from
        warc.sync_interval to SHIP_RETRY_MAX."""
        delay = interval = self.config.warc.sync_interval
        while True:
            await trio.sleep(delay)
            published, self.ctx.published = self.ctx.published or [], []
            await trio.to_thread.run_sync(cluster.ship, published)
            if cluster.away is None:
                await trio.to_thread.run_sync(cluster.ship_spool)
            self.stats.bundles_waiting = len(cluster.waiting)
            delay = interval if cluster.away is None else min(delay * 2, SHIP_RETRY_MAX)

    async def _check_local_limit(self, cluster: ClusterMember) -> None:
        """Pause fetching while this process's bundles on this disk pass warc.local_limit (the
        object store has not taken them), and resume once they no longer do."""
        held = await trio.to_thread.run_sync(cluster.local_bytes)
        limit = self.config.warc.local_limit
        if held > limit and not self.ctx.local_full:
            self.stats.fault(log, logging.WARNING, "local-limit", bytes=held, local_limit=limit,
                             waiting=len(cluster.waiting), note="fetching pauses until the object"
                             " store takes the bundles waiting on this disk")
            self.ctx.local_limit(True)
        elif held <= limit and self.ctx.local_full:
            self.ctx.local_limit(False)
            self.stats.fault(log, logging.WARNING, "local-limit-ok", bytes=held,
                             resumed=self.ctx.disk_ok.is_set())

    async def _shipped(self, cluster: ClusterMember) -> None:
        """Wait until every bundle closed so far is shipped (or the process is told to stop)."""
        draining = self.ctx.draining
        while (cluster.waiting or self.ctx.published) and not draining.is_set():
            with trio.move_on_after(self.config.warc.sync_interval):
                await draining.wait()
