"""What a crawler does at start after a crash: repair its torn WARC bundles, index their records,
and count every complete record as fetched in its site's crawl queue.

Write order while crawling (see also README "Crash safety"):

1. A fetched exchange is appended to the open bundle and handed to the OS at once (one write per
   exchange); its catalog entry waits in memory; the crawl-queue cursor moves in memory.
2. Every ``warc.sync_interval`` seconds (a group commit) the bundle, the crawl-queue logs and the
   external-link spool are fsynced; then the waiting catalog entries are committed, the cursors
   marked before the fsync are written (``CrawlQueue.save``), and the *commit point* advances.
3. A site is marked done only after its visit's last records are fsynced and its cursor saved.

The commit point (``<root>/state/crawl-<process>.commit``, two CRC-checked slots like a cursor)
names a bundle serial and offset before which every record is in the catalog and behind its
crawl queue's cursor. It is the bundle position at the group commit *before* the last one: an
exchange written before one group commit's mark but whose entry was committed after it is still
past it. A clean stop moves it to the end. ``kill -9`` therefore leaves past the commit point:
records the catalog does not know, records whose entries the cursors have not passed, and one torn
record per bundle. They can be in the ``.open`` bundle and in bundles rotated since the commit
point. (Without a commit point, as a crawler before it left, the ``.open`` bundles are read whole.)
At start, this module:

1. repairs each ``.open`` bundle of this process (cuts the torn tail, closes it);
2. reads every complete record past the commit point (in serial order, one record at a time) and
   indexes the response and revisit records (entries already in the catalog are kept);
3. marks them done in their crawl queues and re-extracts the links of their responses;
4. lets the crawler write the commit point at the new end (``CommitPoint``), so the next start
   reads nothing twice.

A record counts in the crawl queues, of sites this process owns, that hold its URL past their
cursor: its origin's, and that of the same host under the other scheme, both on their default
ports (a visit that followed a redirect from http to https keeps the other scheme's URLs in its
own queue). Its links go to the first of those queues, its own origin's first. A 429 or 5xx
answer finishes nothing (``finishes``), and a site's records older than its last recrawl restart
(``CrawlQueue.restarted_at``) belong to the earlier visit.

Marking done (``plan_advance``): a visit takes entries in log order, so the entries past the
cursor that have records form a run from the cursor, broken only by entries without one
(robots-excluded, failed without an answer, answered 429 or 5xx, or in flight at the kill). The
cursor moves over the leading run; done entries after the first gap go to the queue's done-set
(``CrawlQueue.recovered``), which ``CrawlQueue.next`` skips. A done-set rather than re-appending the
gaps at the log's tail: the queue keeps its order (a gap is fetched first, as it would have been),
the log gains no second copy of a URL that a later run could fetch twice, and running recovery
again after a kill during it finds the same run and the same set. An entry answered 429 or 5xx
whose URL appears again later in the queue (the visit queued it again) is done: the later copy
stands for it.

Links: the visit writes the links a page led to before its entry's cursor moves, but the spool and
the crawl-queue logs are buffered, so a kill can lose those of the last pages. They are extracted
again from each response record marked done (``pagelinks.links_in_response``): links on the site's
origin (or on its alias, once the visit used it or a redirect leads there) go into its crawl
queue through its bitmap, at ``crawl.max_depth`` and ``crawl.max_url_length``; other links go to
the spool with the site's hops from its site queue (the links batch deduplicates), none from a
site at ``scope.max_hops``. The page and byte totals grow by the records marked done.

Order, so a kill during recovery only makes the next start do it again: the spool and each queue's
log are fsynced before its done-set and cursor are written, and the commit point moves last. A
cursor or done-set only ever passes an entry whose record is complete on disk (the repaired bundle
is fsynced). So a process kill costs at most the fetches in flight (one per active site); a power
loss keeps the records the last group commit fsynced and marks them done when it reaches them,
never an entry whose record did not survive.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.timeutils import iso_date_to_datetime

from archiver.config import Config
from archiver.logs import event
from archiver.queues.embedded.crawlqueue import CrawlQueue, EmbeddedCrawlQueues, read_slots, write_slot
from archiver.queues.interfaces import SpoolWriterStore
from archiver.queues.models import CrawlQueueBusy, Entry
from archiver.queues.sites import process_for
from archiver.store.bundles import OPEN, SUFFIX, repair_open_bundle
from archiver.store.durable import fsync_directory
from archiver.store.interfaces import CatalogStore
from archiver.store.models import Capture, labels_text
from archiver.store.warcindex import INDEXED, MAX_LABELS_RECORD, capture_of, labels_of
from archiver.stores import EmbeddedStores
from archiver.web import urls
from archiver.web.pagelinks import links_in_response

log = logging.getLogger("archiver.crawl.recovery")

_BATCH = 5000  # catalog entries added at once
# Another process (``archiver seeds``) may hold a crawl queue for a moment.
_BUSY_TRIES = 50
_BUSY_WAIT = 0.1


def bundles(warcs: Path, prefix: str, process: int, *, left_open: bool = False
            ) -> list[tuple[int, Path]]:
    """(serial, path) of process ``process``'s closed bundles (with ``left_open``: of its
    ``.open`` ones), in serial order; never another process's."""
    suffix = SUFFIX + OPEN if left_open else SUFFIX
    pattern = re.compile(rf"{re.escape(prefix)}-\d{{14}}-{process}-(\d{{5,}}){re.escape(suffix)}")
    if not warcs.is_dir():
        return []
    found = ((pattern.fullmatch(p.name), p) for p in warcs.iterdir())
    return sorted((int(match[1]), path) for match, path in found if match)


def repair_bundles(paths: list[Path]) -> int:
    """Repair and close each ``.open`` bundle in ``paths``; returns how many held records."""
    repaired = 0
    for path in paths:
        report = repair_open_bundle(path)
        if not report.final_path.exists():
            event(log, logging.INFO, "bundle-empty-removed", path=str(path))
        elif report.kept_records == 0:
            event(log, logging.WARNING, "bundle-corrupt", path=str(path),
                  moved_to=str(report.final_path), bytes=report.cut_bytes)
        else:
            event(log, logging.WARNING if report.cut_bytes else logging.INFO, "bundle-repaired",
                  path=str(report.final_path), records=report.kept_records,
                  cut_bytes=report.cut_bytes)
            repaired += 1
    return repaired


def commit_path(state: Path, process: int) -> Path:
    """The commit point of crawler ``process`` in the archive's state directory."""
    return state / f"crawl-{process}.commit"


def read_commit_point(path: Path) -> tuple[int, int] | None:
    """(bundle serial, offset) recovery starts reading at; None if never written or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        seq, serial, offset, _ = read_slots(fd)
    finally:
        os.close(fd)
    return (serial, offset) if seq else None


class CommitPoint:
    """The crawler's side of the commit point (see the module docstring)."""

    def __init__(self, path: Path, position: tuple[int, int]) -> None:
        """Start at ``position`` (where the bundle writer will write next): recovery is done, so
        nothing before it is read again. Durable when this returns."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._seq = read_slots(fd)[0]
            self._write(fd, position)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(path.parent)
        self._saved = self._previous = position

    def advance(self, position: tuple[int, int]) -> None:
        """A group commit saved the cursors marked when the bundle stood at ``position``: move the
        point to where the bundle stood at the group commit before (one pwrite, not fsynced)."""
        start, self._previous = self._previous, position
        if start != self._saved:
            self._store(start)

    def finish(self, position: tuple[int, int]) -> None:
        """Every cursor is saved and the bundles closed (a clean stop): nothing to read again."""
        self._previous = position
        if position != self._saved:
            self._store(position)

    def _store(self, position: tuple[int, int]) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        try:
            self._write(fd, position)
        finally:
            os.close(fd)
        self._saved = position

    def _write(self, fd: int, position: tuple[int, int]) -> None:
        self._seq += 1
        write_slot(fd, self._seq, position[0], position[1], 0)


@dataclass(frozen=True)
class Advance:
    """What recovery does to one crawl queue: move the cursor to ``cursor`` (None: it stays), add
    ``done`` (entry ends) to its done-set; ``depths`` holds each URL newly marked done by a record
    (not already in the done-set), with the smallest depth of its entries (for its links)."""

    cursor: int | None
    done: list[int]
    depths: dict[str, int]


def finishes(status: int | None) -> bool:
    """Whether a recorded answer finished its crawl-queue entry. A 429 or 503 did not (the visit
    queued the URL again), nor, to be safe, any 5xx (the visit keeps the entry of the one that
    ends it for its next visit)."""
    return status is None or (status != 429 and status < 500)


def plan_advance(entries: Iterable[tuple[Entry, bool]], done: set[str], retried: set[str]
                 ) -> Advance:
    """Which entries past the cursor are done (see the module docstring).

    ``entries``: the queue's entries after its cursor in log order, each with whether it is
    already in the done-set; ``done``: URLs with a complete record that finished them;
    ``retried``: URLs with records that did not (``finishes``). Pure; memory grows with the done
    and retried entries, not with the queue.
    """
    marks: list[tuple[int, str | None]] = []  # (end, None) if done, (end, url) if retried
    last: dict[str, int] = {}  # retried URL -> end of its last entry
    depths: dict[str, int] = {}
    first_gap: int | None = None
    for entry, known in entries:
        if entry.url in retried:
            last[entry.url] = entry.end
        if entry.url in done or known:
            if not known:  # a done-set entry was counted, and its links queued, when it joined
                depths[entry.url] = min(entry.depth, depths.get(entry.url, entry.depth))
            marks.append((entry.end, None))
        elif entry.url in retried:
            marks.append((entry.end, entry.url))
        elif first_gap is None:
            first_gap = entry.end
    cursor, later, leading = None, [], True
    for end, url in marks:
        finished = url is None or last[url] != end
        if leading and finished and (first_gap is None or end < first_gap):
            cursor = end
            continue
        leading = False
        if finished:
            later.append(end)
    return Advance(cursor, later, depths)


@dataclass(frozen=True, slots=True)
class _Record:
    """A response or revisit record past the commit point."""

    url: str
    origin: str
    status: int | None
    date: float  # WARC-Date, seconds since the epoch
    path: Path
    offset: int
    size: int  # block length: HTTP head and payload as stored
    response: bool  # False for a revisit (no payload to take links from)


@dataclass
class Recovered:
    """What ``recover`` did, for the log and for tests."""

    bundles_repaired: int = 0
    records: int = 0  # response and revisit records past the commit point
    catalog_added: int = 0
    marked_done: int = 0  # URLs newly found done in crawl queues
    links_queued: int = 0
    links_spooled: int = 0
    queues_busy: list[str] = field(default_factory=list)  # crawl queues left as they were


def recover(config: Config, stores: EmbeddedStores, process: int, catalog: CatalogStore
            ) -> Recovered:
    """Repair, index and mark result what process ``process`` wrote past its commit point."""
    warcs, prefix = stores.warc_directory(), config.warc.prefix
    result = Recovered()
    point = commit_path(stores.state_directory(), process)
    start = read_commit_point(point)
    left_open = bundles(warcs, prefix, process, left_open=True)
    if start is None and left_open:
        # A crawler that kept no commit point: read its open bundles whole, and remember that
        # before closing them, in case this recovery is killed too.
        start = (left_open[0][0], 0)
        CommitPoint(point, start)
    result.bundles_repaired = repair_bundles([path for _, path in left_open])
    window = [] if start is None else [
        (path, start[1] if serial == start[0] else 0)
        for serial, path in bundles(warcs, prefix, process) if serial >= start[0]]
    by_host: defaultdict[str, list[_Record]] = defaultdict(list)
    batch: list[Capture] = []
    for record, capture in _read_window(window):
        result.records += 1
        by_host[urls.origin_parts(urls.origin(record.url))[1]].append(record)
        if capture is not None:
            batch.append(capture)
        if len(batch) >= _BATCH:
            result.catalog_added += catalog.add(batch)
            batch = []
    result.catalog_added += catalog.add(batch)
    if by_host:
        spool = stores.spool_writer(process)
        crawl_queues = stores.crawl_queues()
        sites = stores.site_queue(process)  # each site's hops, for its links spooled again
        try:
            for records in by_host.values():
                _recover_host(config, crawl_queues, process, records, spool, result,
                              hops_of=lambda origin: site.hops if (site := sites.site(origin)) else 0)
        finally:
            sites.close()
            crawl_queues.close()
            spool.close()
    if result.records or result.bundles_repaired:
        event(log, logging.INFO, "recovered", bundles_repaired=result.bundles_repaired,
              records=result.records, catalog_added=result.catalog_added,
              marked_done=result.marked_done, links_queued=result.links_queued,
              links_spooled=result.links_spooled, queues_busy=len(result.queues_busy) or None)
    return result


def _read_window(window: list[tuple[Path, int]]) -> Iterator[tuple[_Record, Capture | None]]:
    """Each response and revisit record in the window, with its catalog entry (None if the
    record cannot have one), one record in memory at a time."""
    for path, offset in window:
        try:
            yield from _read_bundle(path, offset)
        except (ArchiveLoadFailed, EOFError, ValueError) as e:
            if offset == 0:
                event(log, logging.ERROR, "recovery-read-failed", path=str(path), error=str(e))
                continue
            # The commit point should fall on a record boundary; read the bundle whole instead.
            event(log, logging.WARNING, "recovery-offset-unusable", path=str(path), offset=offset,
                  error=str(e))
            yield from _read_window([(path, 0)])


def _read_bundle(path: Path, offset: int) -> Iterator[tuple[_Record, Capture | None]]:
    """The captures of a bundle from ``offset``, each with its labels (warcindex.labels_of: the
    labels record after it); the last one is held back until the next, as a labels record may
    follow it."""
    held: tuple[str, _Record, Capture | None] | None = None
    with path.open("rb") as f:
        f.seek(offset)
        it = ArchiveIterator(f, check_digests=False)
        for record in it:
            if record.rec_type == "metadata" and held is not None and held[2] is not None:
                labels = labels_of(record, record.content_stream().read(MAX_LABELS_RECORD))
                if labels is not None and labels[0] == held[0]:
                    held = held[0], held[1], dataclasses.replace(held[2], labels=labels_text(labels[1]))
            it.read_to_end(record)
            if record.rec_type not in INDEXED:
                continue
            headers = record.rec_headers
            url = headers.get_header("WARC-Target-URI") or ""
            code = record.http_headers.get_statuscode() if record.http_headers else None
            if not url.startswith(("http://", "https://")):
                continue
            found = _Record(
                url=url, origin=urls.origin(url), status=int(code) if code and code.isdigit() else None,
                date=iso_date_to_datetime(headers.get_header("WARC-Date")).replace(tzinfo=UTC)
                .timestamp(),
                path=path, offset=it.get_record_offset(),
                size=int(headers.get_header("Content-Length") or 0),
                response=record.rec_type == "response")
            try:
                capture = capture_of(record, path.name, it.get_record_offset(),
                                     it.get_record_length())
            except ValueError as e:  # as when the crawler wrote it: `catalog verify` lists it
                event(log, logging.WARNING, "catalog-entry-failed", url=url, error=str(e))
                capture = None
            if held is not None:
                yield held[1], held[2]
            held = headers.get_header("WARC-Record-ID") or "", found, capture
    if held is not None:
        yield held[1], held[2]


def _open_queue(crawl_queues: EmbeddedCrawlQueues, origin: str) -> CrawlQueue | None:
    """The crawl queue of ``origin``, waiting a little if another process holds it; None if it
    stays busy."""
    for _ in range(_BUSY_TRIES):
        try:
            return crawl_queues.open(origin)
        except CrawlQueueBusy:
            time.sleep(_BUSY_WAIT)
    return None


@dataclass
class _Queue:
    crawl_queue: CrawlQueue
    origin: str
    restarted: float | None  # records older than this belong to the visit before a recrawl
    plan: Advance = field(default_factory=lambda: Advance(None, [], {}))
    local: set[str] = field(default_factory=set)  # origins whose links stay in this queue

    def holds(self, record: _Record) -> bool:
        """Whether ``record`` may be of this queue's visit: of its origin or alias, and not older
        than its last restart."""
        return ((record.origin == self.origin or record.origin == urls.scheme_twin(self.origin))
                and (self.restarted is None or record.date >= self.restarted))

    def finished_by(self, record: _Record) -> bool:
        """Whether ``record`` marked one of this queue's entries done."""
        return record.url in self.plan.depths and finishes(record.status) and self.holds(record)


def _recover_host(config: Config, crawl_queues: EmbeddedCrawlQueues, process: int, records: list[_Record],
                  spool: SpoolWriterStore, result: Recovered, *, hops_of: Callable[[str], int]
                  ) -> None:
    """Mark done, in every crawl queue of this host that this process owns, the entries these
    records finished; extract their links again; make it durable."""
    origins = {record.origin for record in records}
    origins |= {other for origin in origins if (other := urls.scheme_twin(origin))}
    queues: dict[str, _Queue] = {}
    try:
        for origin in sorted(origins):
            owned = process_for(origin, config.crawl.processes) == process
            if not owned or not crawl_queues.exists(origin):
                continue
            crawl_queue = _open_queue(crawl_queues, origin)
            if crawl_queue is None:  # its entries are fetched again: safe, only slower
                result.queues_busy.append(origin)
                event(log, logging.WARNING, "recovery-queue-busy", site=origin)
                continue
            queue = _Queue(crawl_queue, origin, crawl_queue.restarted_at)
            mine = [record for record in records if queue.holds(record)]
            queue.plan = plan_advance(crawl_queue.pending_entries(),
                                      {r.url for r in mine if finishes(r.status)},
                                      {r.url for r in mine if not finishes(r.status)})
            # The visit's alias, if it fetched from it: links there stay in this queue.
            queue.local = {origin} | {urls.origin(url) for url in queue.plan.depths}
            queues[origin] = queue
        for record in records:
            linking = _links_queue(queues, record)
            if linking is not None:
                _requeue_links(config, linking, record, spool, result, hops_of(linking.origin))
        spool.sync()  # the links before the cursors that pass their pages
        for queue in queues.values():
            crawl_queue, plan = queue.crawl_queue, queue.plan
            if plan.cursor is None and not plan.done and not plan.depths:
                continue
            counted = [record for record in records if queue.finished_by(record)]
            cursor = crawl_queue.cursor if plan.cursor is None else plan.cursor
            crawl_queue.recovered(cursor, plan.done, pages=crawl_queue.pages + len(counted),
                               bytes_=crawl_queue.bytes + sum(r.size for r in counted))
            result.marked_done += len(plan.depths)
    finally:
        for queue in queues.values():
            queue.crawl_queue.close()


def _links_queue(queues: dict[str, _Queue], record: _Record) -> _Queue | None:
    """The queue whose entry this response finished (its own origin's first), if any."""
    if not record.response:
        return None
    for origin in sorted(queues, key=lambda origin: origin != record.origin):
        if queues[origin].finished_by(record):
            return queues[origin]
    return None


def _requeue_links(config: Config, queue: _Queue, record: _Record, spool: SpoolWriterStore,
                   result: Recovered, hops: int) -> None:
    """Route the links of ``record`` as its visit did: local ones into the queue, others to the
    spool with the site's ``hops`` (none from a site at ``scope.max_hops``)."""
    max_hops = config.scope.max_hops
    c = config.crawl
    status, headers, body = _read_response(record)
    found = links_in_response(record.url, status, headers, body,
                              max_decoded_size=c.max_decoded_size)
    depth = queue.plan.depths[record.url] + (0 if found.redirect else 1)
    alias = urls.scheme_twin(queue.origin)
    local = queue.local | ({alias} if found.redirect and alias else set())
    now = time.time()
    for ref in found.refs:
        url = urls.normalize(ref, found.base)
        if url is None or len(url) > c.max_url_length:
            continue
        origin = urls.origin(url)
        if origin in local:
            if depth <= c.max_depth and queue.crawl_queue.add(url, depth):
                result.links_queued += 1
        elif not 0 <= max_hops <= hops:
            spool.add(url, queue.origin, now, hops=hops)
            result.links_spooled += 1


def _read_response(record: _Record) -> tuple[int, dict[str, str], bytes]:
    """Status, the headers link extraction needs, and the payload as stored, of one record."""
    with record.path.open("rb") as f:
        f.seek(record.offset)
        warc = next(iter(ArchiveIterator(f, check_digests=False)))
        http = warc.http_headers
        headers = {name: value for name in ("content-type", "content-encoding", "location")
                   if (value := http.get_header(name)) is not None}
        return record.status or 0, headers, warc.raw_stream.read()
