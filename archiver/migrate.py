"""``archiver store migrate``: move an embedded archive into PostgreSQL and object storage.

OLD is an embedded archive (``store.url = "sqlite"``, files under ``archive.root``); NEW names a
PostgreSQL database at this archiver's schema and an object store (``warc.store``: ``s3://...`` or a
folder). The parts, in this order, each read with the embedded stores' own readers:

- **sites**: every ``<root>/sites/<n>.sqlite`` into table ``sites`` (cookies and gatekeeper
  counts too); ``active`` (a crawler stopped mid-visit) becomes ``waiting``; no holder, epoch 0.
  An origin in two queues (``crawl.processes`` changed) is taken from the lowest-numbered one.
- **crawl queues**: each ``<root>/crawl-queues/`` folder, and each site with rows in the inbox
  database (``crawl-queues/inbox.sqlite``) but no folder yet: its log's entries into ``crawl_entries``
  (``seq`` 1, 2, ... in log order), its cursor into ``crawl_cursors`` (the seq of the last entry
  whose line ends at or before the cursor offset, with the page and byte totals, the restart
  time and the daily budget count of its sheet), its inbox (an earlier version's inbox file,
  then its rows) into ``crawl_inbox``. Entries past the cursor that crash recovery found done
  (the ``done`` file) stay pending: they are fetched again, the safe direction for an archive.
- **DNS history**: every row (with its row number: the history's order) and every name's state;
  the clock moves up to OLD's.
- **bundles**: each closed ``*.warc.gz`` uploaded under its file name with a verified put (size and
  SHA-256 compared after the upload); OLD keeps its copy.
- **catalog**: every entry, after the bundles, so the new catalog never names a file the object
  store lacks; file names stay the same.
- **spool**: closed spool files not yet read by the links batch, under ``outlinks/<name>``.
- **links**: the links batch's state (``<root>/links/``): the global bitmap's slices at their
  current generations uploaded under ``links/`` by their file names with verified puts (a state
  from before slices: its one bitmap, as ``links/bitmap-<generation>.bloom``), then in one
  transaction every ledger row into ``links_ledger``, every site with its in-link count and what
  is still to be pushed into ``links_sites``, each slice's generation into ``links_slices`` and the
  generation into ``links_meta``; so the ledger never names a slice the object store lacks.

Resumable: every write is idempotent (``ON CONFLICT DO NOTHING``; a crawl queue is written in one
transaction with its cursor row, and skipped if that row is there; a bundle already held with the
same size and checksum is not sent again), and ``<OLD root>/state/migrate.json`` records the
target, the parts started, the catalog entries copied and the files verified. A migrate killed at
any point and run again finishes without duplicating anything. Before a part first writes, its
tables in NEW must be empty (the links state at generation 0, and no foreign object may sit under
a bundle's key): a migrate never merges into another archive.

Verifying: after each part the counts in NEW are compared with OLD's (per state for the sites),
and every bundle's stored size and checksum with the file's; a difference raises MigrationMismatch.
Refused (MigrationRefused): NEW not PostgreSQL, OLD not embedded, a crawler or links batch running
on OLD or a links batch in NEW's cluster (their locks are taken for the whole migrate), NEW's
schema not current, bundles or spool files a crash left open in OLD, a bitmap OLD's links ledger
names but lacks (a slice, or the one bitmap of a state from before slices).
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from dataclasses import astuple, dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TextIO

import psycopg
from botocore.exceptions import BotoCoreError, ClientError

from archiver.config import Config, database_url
from archiver.links.slices import OBJECT_PREFIX as SLICE_PREFIX
from archiver.links.slices import slice_name
from archiver.queues.decisions import Decision, read_all_decisions
from archiver.queues.embedded.crawlqueue import (
    inbox_database,
    queue_dir,
    queue_origin,
    read_budget,
    read_cursor,
    read_inbox,
    read_log,
    read_restarted,
)
from archiver.queues.embedded.inboxes import InboxDatabase, SiteInbox
from archiver.queues.embedded.linksstate import STATE as LINKS_STATE
from archiver.queues.embedded.linksstate import EmbeddedLinksState, bitmap_path
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.interfaces import LinksState
from archiver.queues.models import STATES
from archiver.queues.postgres.linksstate import bitmap_key
from archiver.queues.sites import gatekeepers_text
from archiver.queues.spool import OBJECT_PREFIX, SpoolDirectory
from archiver.store.embedded.catalog import Catalog
from archiver.store.embedded.dnshistory import DnsHistory
from archiver.store.layout import CRAWL_QUEUES, SPOOL, folder
from archiver.store.objectstore import Fingerprint, ObjectStore, ObjectStoreError, put
from archiver.store.postgres.schema import Connection, SchemaError, StoreError, connect, redact
from archiver.stores import ProcessBusy, ProcessLock, open_embedded, open_shared

STATE_FILE = "migrate.json"
# Catalog entries per batch (one transaction, then the state file records them).
CATALOG_BATCH = 10_000
# A batch of crawl queues is written in one transaction: up to this many sites or entries.
QUEUE_BATCH_SITES = 500
QUEUE_BATCH_ENTRIES = 50_000
# Seconds between two progress lines of a long part.
PROGRESS_EVERY = 2.0


class MigrationRefused(Exception):
    """The migrate cannot start (or go on) as asked; nothing more was written."""


class MigrationFailed(Exception):
    """A part could not be copied (the store's error, password-free); run the migrate again."""


class MigrationMismatch(MigrationFailed):
    """What NEW holds after a part differs from OLD."""


@dataclass
class _LinksTally:
    """What a links state holds: ledger rows, sites, their in-links, the sites still to push."""

    ledger: int = 0
    sites: int = 0
    inlinks: int = 0
    dirty: int = 0


@dataclass(frozen=True)
class _QueueFiles:
    """One site's crawl queue as OLD's files hold it."""

    origin: str
    entries: list[tuple[str, int]]  # (url, depth) in log order
    cursor: int  # entries up to this seq are done
    pages: int
    bytes: int
    restarted: float | None
    budget: tuple[int, int]  # (day, pages) of its daily budget count
    inbox: list[tuple[str, int]]
    decisions: list[Decision]  # its decision log, oldest first


class _State:
    """``<OLD root>/state/migrate.json``: the target, the parts started, what was copied."""

    def __init__(self, path: Path, target: list[str]) -> None:
        self.path = path
        self.data: dict[str, Any] = {"target": target, "started": [], "catalog_copied": 0,
                                     "files": {}}
        if path.exists():
            try:
                found = json.loads(path.read_text())
            except (OSError, ValueError) as e:
                raise MigrationRefused(f"{path}: unreadable ({e}); remove it to start the migrate over") \
                    from None
            if found.get("target") != target:
                raise MigrationRefused(
                    f"{path} records a migrate to {' '.join(found.get('target') or ['?'])}, not to "
                    f"{' '.join(target)}: finish that one, or remove the file to start over")
            self.data.update(found)

    def started(self, part: str) -> bool:
        return part in self.data["started"]

    def start(self, part: str) -> None:
        self.data["started"].append(part)
        self.save()

    def file(self, key: str) -> Fingerprint | None:
        found = self.data["files"].get(key)
        return None if found is None else Fingerprint(found[0], found[1])

    def record_file(self, key: str, fingerprint: Fingerprint) -> None:
        self.data["files"][key] = [fingerprint.size, fingerprint.checksum]
        self.save()

    def save(self) -> None:
        """Replace the file whole: written beside it, fsynced, renamed."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".tmp")
        with partial.open("w") as f:
            json.dump(self.data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, self.path)


class Migration:
    """One ``archiver store migrate --source OLD --target NEW``: ``run`` does it, printing each part's
    result on ``out`` and progress lines on ``err``."""

    def __init__(self, old: Config, new: Config, *, out: TextIO, err: TextIO) -> None:
        self.old, self.new, self.out, self.err = old, new, out, err
        url = database_url(new.store.url)
        if url is None:
            raise MigrationRefused(f"{new.path}: store.url is \"sqlite\": the target of a migrate is a "
                                   "PostgreSQL database (store.url = \"postgresql://...\")")
        if database_url(old.store.url) is not None:
            raise MigrationRefused(f"{old.path}: store.url is not \"sqlite\": only an embedded archive "
                                   "can be migrated")
        if not old.root.is_dir():
            raise MigrationRefused(f"{old.path}: no archive at {old.root}")
        self.url = url
        self.source = open_embedded(old)
        try:
            target = open_shared(new)
        except SchemaError as e:
            raise MigrationRefused(f"{new.path}: {e}") from None
        except StoreError as e:
            raise MigrationFailed(str(e)) from None
        self.target = target
        self.objects: ObjectStore = target.objects()

    def run(self) -> None:
        """Every part, copied then verified; MigrationRefused or MigrationMismatch say why not."""
        with ExitStack() as held:
            for lock in self._lock_old():
                held.callback(lock.release)
            try:
                held.callback(self._lock_new_links().close)
                self._refuse_crash_leftovers()
                store = self.new.warc.store or str(self.new.root / "warcs")
                self.state = _State(self.source.state_directory() / STATE_FILE,
                                    [self.new.store.url, store, self.new.s3.endpoint_url])
                self.db: Connection
                with connect(self.url) as self.db:
                    self._sites()
                    self._crawl_queues()
                    self._dns()
                    bundles = self._bundles()
                    self._catalog(bundles)
                    self._spool()
                    self._links()
            except psycopg.Error as e:
                raise MigrationFailed(f"PostgreSQL: {redact(str(e)).strip()}") from None
            except (BotoCoreError, ClientError, ObjectStoreError) as e:
                raise MigrationFailed(f"object store: {e}") from None
            except StoreError as e:  # (a connection refused: the message holds no password)
                raise MigrationFailed(str(e)) from None
        where = self.new.warc.store or self.new.root / "warcs"
        self._say(f"done: {self.old.root} is in {self.url} and {where}, every part verified")

    # -- refusals

    def _lock_old(self) -> list[ProcessLock]:
        """The locks of every crawler process and of the links batch on OLD, and a migrate's own."""
        numbers = sorted(set(range(self.old.crawl.processes)) | set(self.source.site_queue_numbers()))
        roles: list[tuple[str, int | None]] = [("migrate", None), ("links", None)]
        roles += [("crawl", n) for n in numbers]
        locks: list[ProcessLock] = []
        try:
            for role, number in roles:
                locks.append(self.source.lock(role, number))
        except ProcessBusy as e:
            for lock in locks:
                lock.release()
            raise MigrationRefused(f"{e}: stop it before migrating") from None
        return locks

    def _lock_new_links(self) -> LinksState:
        """NEW's links state, opened only for its cluster lock: no links batch in NEW's cluster
        may read the spool or move the generation while the migrate writes them."""
        try:
            return self.target.links_state()
        except ProcessBusy as e:
            raise MigrationRefused(f"{self.new.path}: {e}: stop it before migrating") from None

    def _refuse_crash_leftovers(self) -> None:
        open_files = sorted(self.source.warc_directory().glob("*.warc.gz.open"))
        open_files += sorted(folder(self.old.root, SPOOL).glob("*.tsv.open"))
        if open_files:
            names = ", ".join(p.name for p in open_files[:5]) + (", ..." if len(open_files) > 5 else "")
            raise MigrationRefused(
                f"{self.old.root} has files a crawler left open ({names})"
                ": start `archiver crawl run --config OLD --process N` of the process named in each file "
                "(it repairs and closes them as it starts), stop it with SIGTERM, then migrate")

    def _begin(self, part: str, tables: tuple[str, ...]) -> None:
        """Record that ``part`` starts writing, after checking that NEW holds none of its rows yet."""
        if self.state.started(part):
            return
        for table in tables:
            if self._count(f"SELECT count(*) FROM {table}"):
                raise MigrationRefused(f"{self.url}: table {table} is not empty: a migrate goes into a "
                                       "database that holds no other archive")
        self.state.start(part)

    # -- parts

    def _sites(self) -> None:
        self._begin("sites", ("sites",))
        with self.db.transaction(), self.db.cursor() as cur:
            cur.execute("CREATE TEMPORARY TABLE migrate_sites (queue integer, origin text COLLATE \"C\","
                        " state text, due float8, inlinks bigint, attempts integer, added float8,"
                        " visits integer, note text, restart boolean, next_visit float8,"
                        " compared float8, changed float8, compared_seconds float8, hops integer,"
                        " priority float8, cookies text, gatekeepers text) ON COMMIT DROP")
            with cur.copy("COPY migrate_sites FROM STDIN") as copy:
                for number in self.source.site_queue_numbers():
                    with SiteQueue(queue_path(self.old.root, number), recover=False) as queue:
                        for row in queue.rows():
                            history = row.history
                            copy.write_row((number, *row[:10], history.compared, history.changed,
                                            history.seconds, row.hops, row.priority,
                                            queue.cookies(row.origin),
                                            gatekeepers_text(dict(row.gatekeepers))))
            chosen = ("SELECT DISTINCT ON (origin) origin, CASE state WHEN 'active' THEN 'waiting'"
                      " ELSE state END AS state, due, inlinks, attempts, added, visits, note, restart,"
                      " next_visit, compared, changed, compared_seconds, hops, priority, cookies,"
                      " gatekeepers FROM migrate_sites ORDER BY origin, queue")
            cur.execute("INSERT INTO sites (origin, state, due, inlinks, attempts, added, visits, note,"
                        " restart, next_visit, compared, changed, compared_seconds, hops, priority,"
                        f" cookies, gatekeepers) {chosen} ON CONFLICT DO NOTHING")
            copied = cur.rowcount
            expected: dict[str, int] = dict(
                cur.execute(f"SELECT state, count(*) FROM ({chosen}) s GROUP BY state").fetchall())
            (queued,) = cur.execute("SELECT count(*) FROM migrate_sites").fetchone() or (0,)
        found: dict[str, int] = dict(
            self.db.execute("SELECT state, count(*) FROM sites GROUP BY state").fetchall())
        self._compare("sites", sum(expected.values()), sum(found.values()), "sites")
        for state in STATES:
            self._compare("sites", expected.get(state, 0), found.get(state, 0), f"{state} sites")
        twice = queued - sum(expected.values())
        by_state = ", ".join(f"{s} {found.get(s, 0)}" for s in STATES)
        self._say(f"sites: {copied} copied; verified {sum(found.values())} sites ({by_state})"
                  + (f"; {twice} found in two queues, taken from the lower-numbered" if twice else ""))

    def _queue_dirs(self, inboxes: InboxDatabase) -> list[Path]:
        """Every crawl queue's folder, and the folder of each site with inbox rows but no queue."""
        queues = folder(self.old.root, CRAWL_QUEUES)
        found: set[Path] = set()
        if queues.is_dir():
            for bucket in (p for p in queues.iterdir() if p.is_dir()):
                found.update(p for p in bucket.iterdir() if p.is_dir())
        for origin in inboxes.origins():
            try:
                found.add(queue_dir(self.old.root, origin))
            except ValueError as e:
                raise MigrationRefused(f"{inboxes.path}: rows for {origin[:80]!r}, which cannot have "
                                       f"a crawl queue ({e}): delete them") from None
        return sorted(found)

    def _read_queue(self, directory: Path, inboxes: InboxDatabase) -> _QueueFiles:
        try:
            origin = queue_origin(directory)
            if queue_dir(self.old.root, origin) != directory:
                raise ValueError("it is not where that origin's queue lives")
        except ValueError as e:
            raise MigrationRefused(f"{directory}: not a crawl queue ({e}): move it out of "
                                   f"{folder(self.old.root, CRAWL_QUEUES)}") from None
        cursor, pages, bytes_ = read_cursor(directory)
        entries, done = [], 0
        for entry in read_log(directory):
            entries.append((entry.url, entry.depth))
            if entry.end <= cursor:
                done = len(entries)
        return _QueueFiles(origin, entries, done, pages, bytes_, read_restarted(directory),
                           read_budget(directory),
                           list(read_inbox(directory, SiteInbox(inboxes, origin))),
                           list(read_all_decisions(directory)))

    def _crawl_queues(self) -> None:
        self._begin("crawl queues", ("crawl_cursors", "crawl_entries", "crawl_inbox",
                                     "crawl_decisions"))
        totals = {"queues": 0, "entries": 0, "inbox": 0, "decisions": 0}
        copied = 0
        progress = _Progress(self.err, "crawl queues", "queues")
        batch: list[_QueueFiles] = []
        inboxes = inbox_database(self.old.root)
        try:
            for directory in self._queue_dirs(inboxes):
                queue = self._read_queue(directory, inboxes)
                totals["queues"] += 1
                totals["entries"] += len(queue.entries)
                totals["inbox"] += len(queue.inbox)
                totals["decisions"] += len(queue.decisions)
                batch.append(queue)
                entries = sum(len(q.entries) for q in batch)
                if len(batch) >= QUEUE_BATCH_SITES or entries >= QUEUE_BATCH_ENTRIES:
                    copied += self._write_queues(batch)
                    batch = []
                    progress.show(totals["queues"])
        finally:
            inboxes.close()
        copied += self._write_queues(batch)
        found = {"queues": self._count("SELECT count(*) FROM crawl_cursors"),
                 "entries": self._count("SELECT count(*) FROM crawl_entries"),
                 "inbox": self._count("SELECT count(*) FROM crawl_inbox"),
                 "decisions": self._count("SELECT count(*) FROM crawl_decisions")}
        for what, count in totals.items():
            self._compare("crawl queues", count, found[what], what)
        self._say(f"crawl queues: {copied} copied; verified {found['queues']} queues, "
                  f"{found['entries']} entries, {found['inbox']} inbox lines, "
                  f"{found['decisions']} decisions")

    def _write_queues(self, batch: list[_QueueFiles]) -> int:
        """One transaction: the queues of ``batch`` not in NEW yet (their cursor row says so)."""
        if not batch:
            return 0
        with self.db.transaction(), self.db.cursor() as cur:
            cur.execute(
                "INSERT INTO crawl_cursors (origin, cursor, pages, bytes, restarted, budget_day,"
                " budget_pages) SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[],"
                " %s::bigint[], %s::float8[], %s::bigint[], %s::bigint[])"
                " ON CONFLICT DO NOTHING RETURNING origin",
                ([q.origin for q in batch], [q.cursor for q in batch], [q.pages for q in batch],
                 [q.bytes for q in batch], [q.restarted for q in batch],
                 [q.budget[0] for q in batch], [q.budget[1] for q in batch]))
            new = {row[0] for row in cur.fetchall()}
            with cur.copy("COPY crawl_entries (origin, seq, depth, url) FROM STDIN") as copy:
                for queue in batch:
                    if queue.origin in new:
                        for seq, (url, depth) in enumerate(queue.entries, 1):
                            copy.write_row((queue.origin, seq, depth, url))
            with cur.copy("COPY crawl_inbox (origin, depth, url) FROM STDIN") as copy:
                for queue in batch:
                    if queue.origin in new:
                        for url, depth in queue.inbox:
                            copy.write_row((queue.origin, depth, url))
            with cur.copy("COPY crawl_decisions (origin, url, at, kind, detail) FROM STDIN") as copy:
                for queue in batch:
                    if queue.origin in new:
                        for d in queue.decisions:
                            copy.write_row((queue.origin, d.url, d.time, d.kind, d.detail))
        return len(new)

    def _dns(self) -> None:
        path = self.old.root / "dns.sqlite"
        self._begin("dns", ("dns", "dns_names"))
        rows = names = 0
        if path.exists():
            with DnsHistory(path, readonly=True) as history, self.db.transaction(), \
                    self.db.cursor() as cur:
                cur.execute("CREATE TEMPORARY TABLE migrate_dns (LIKE dns) ON COMMIT DROP")
                with cur.copy("COPY migrate_dns (row, id, value, type, entered, superseded, source)"
                              " FROM STDIN") as copy:
                    for row in history.all_rows():
                        copy.write_row((row.row, row.id, row.value, row.type, row.entered,
                                        row.superseded, row.source))
                        rows += 1
                cur.execute("INSERT INTO dns (row, id, value, type, entered, superseded, source)"
                            " OVERRIDING SYSTEM VALUE SELECT row, id, value, type, entered, superseded,"
                            " source FROM migrate_dns ORDER BY row ON CONFLICT (row) DO NOTHING")
                cur.execute("SELECT setval(pg_get_serial_sequence('dns', 'row'), max(row))"
                            " FROM dns HAVING count(*) > 0")
                cur.execute("CREATE TEMPORARY TABLE migrate_dns_names (LIKE dns_names) ON COMMIT DROP")
                with cur.copy("COPY migrate_dns_names (name, checked, next_check, outcome, failures)"
                              " FROM STDIN") as copy:
                    for state in history.all_states():
                        copy.write_row((state.name, state.checked, state.next_check, state.outcome,
                                        state.failures))
                        names += 1
                cur.execute("INSERT INTO dns_names SELECT * FROM migrate_dns_names"
                            " ON CONFLICT (name) DO NOTHING")
                cur.execute("UPDATE dns_clock SET last = greatest(last, %s)", (history.clock(),))
        found_rows = self._count("SELECT count(*) FROM dns")
        found_names = self._count("SELECT count(*) FROM dns_names")
        self._compare("DNS history", rows, found_rows, "rows")
        self._compare("DNS history", names, found_names, "names")
        self._say(f"DNS history: verified {found_rows} rows, {found_names} names")

    def _ship(self, part: str, files: dict[str, Path]) -> dict[str, Fingerprint]:
        """Put each file under its key (unless recorded or held already), then check every one's
        stored size and checksum; the fingerprints by key."""
        progress = _Progress(self.err, part, "files")
        total = sum(p.stat().st_size for p in files.values())
        sent = done_bytes = 0
        shipped: dict[str, Fingerprint] = {}
        for number, (key, path) in enumerate(files.items(), 1):
            fingerprint = self.state.file(key)
            if fingerprint is None or self.objects.stored(key) != fingerprint:
                local = self.objects.fingerprint(path)
                there = self.objects.stored(key)
                if there is None:
                    local = put(self.objects, path, key)
                    sent += 1
                elif there != local:
                    raise MigrationRefused(
                        f"{self.objects.location(key)} holds another object than {path} "
                        f"({there.size} bytes, not {local.size}): a migrate never overwrites")
                self.state.record_file(key, local)
                fingerprint = local
            shipped[key] = fingerprint
            done_bytes += fingerprint.size
            progress.show(number, f"{number}/{len(files)} files, {done_bytes / 2**20:.1f}/"
                          f"{total / 2**20:.1f} MiB, {path.name}", force=True)
        for key, path in files.items():
            if path.stat().st_size != shipped[key].size:
                raise MigrationMismatch(f"{part}: {path} has {path.stat().st_size} bytes, "
                                        f"{shipped[key].size} were shipped: it changed meanwhile")
            there = self.objects.stored(key)
            if there != shipped[key]:
                raise MigrationMismatch(
                    f"{part}: {self.objects.location(key)} holds "
                    f"{'nothing' if there is None else f'{there.size} bytes, {there.checksum}'}, not "
                    f"the {shipped[key].size} bytes, {shipped[key].checksum} shipped")
        self._say(f"{part}: {sent} copied, {len(files) - sent} there already; verified "
                  f"{len(files)} files, {sum(f.size for f in shipped.values())} bytes "
                  "(size and SHA-256 as stored)")
        return shipped

    def _bundles(self) -> dict[str, Fingerprint]:
        self._begin("bundles", ())
        paths = sorted(self.source.warc_directory().glob("*.warc.gz"))
        return self._ship("bundles", {path.name: path for path in paths})

    def _catalog(self, bundles: dict[str, Fingerprint]) -> None:
        self._begin("catalog", ("catalog_captures",))
        folder = self.old.root / "catalog"
        with ExitStack() as stack:
            old = stack.enter_context(Catalog(folder, self.old.catalog.shards, readonly=True)) \
                if folder.is_dir() else None
            new = self.target.catalog()
            stack.callback(new.close)
            total = 0 if old is None else old.count()
            copied = self.state.data["catalog_copied"]
            if new.count() < copied:  # NEW lost entries since (a database made anew): copy them all
                copied = 0
            if old is not None and copied < total:
                progress = _Progress(self.err, "catalog", "entries")
                entries = islice(old.iter_all(), copied, None)
                while batch := list(islice(entries, CATALOG_BATCH)):
                    new.add(batch)
                    copied += len(batch)
                    self.state.data["catalog_copied"] = copied
                    self.state.save()
                    progress.show(copied, f"{copied}/{total} entries")
            found = new.count()
        self._compare("catalog", total, found, "entries")
        named = {name for (name,) in self.db.execute("SELECT name FROM catalog_files")}
        missing = sorted(named - bundles.keys())
        if missing:
            raise MigrationMismatch(
                f"catalog: it names {len(missing)} WARC files that OLD did not hold as closed bundles "
                f"and the object store lacks ({', '.join(missing[:3])}...): run `archiver catalog verify "
                "--config OLD`")
        self._say(f"catalog: verified {found} entries, in {len(named)} WARC files, each in the object store")

    def _spool(self) -> None:
        self._begin("spool", ())
        spool = folder(self.old.root, SPOOL)
        self._ship("spool", {OBJECT_PREFIX + name: spool / name for name in SpoolDirectory(spool).closed()})

    def _links(self) -> None:
        generation = self._count("SELECT generation FROM links_meta")
        if generation and not self.state.started("links"):
            raise MigrationRefused(f"{self.url}: the links state is at generation {generation}: a migrate "
                                   "goes into a database that holds no other archive")
        self._begin("links", ("links_ledger", "links_sites"))
        directory = self.old.root / "links"
        if not (directory / LINKS_STATE).exists():  # no links batch ever ran on OLD
            self._links_copied(0, [], _LinksTally(), (0, 0))
            return
        links = EmbeddedLinksState(directory)
        try:
            generations = links.slice_generations()
            files = {SLICE_PREFIX + slice_name(p, len(generations), g): directory / slice_name(
                p, len(generations), g) for p, g in enumerate(generations)}
            if links.generation and not generations:  # a state from before slices
                files = {bitmap_key(links.generation): bitmap_path(directory, links.generation)}
            for path in files.values():
                if not path.is_file():
                    raise MigrationRefused(f"{path} is missing: OLD's links ledger says generation "
                                           f"{links.generation}; restore it before migrating")
            if files:  # before the ledger names them, as the links batch itself does
                self._ship("links bitmap", files)
            tally, copied = self._copy_links(links, generations)
        finally:
            links.close()
        self._links_copied(links.generation, generations, tally, copied)

    def _copy_links(self, links: EmbeddedLinksState, slices: list[int]
                    ) -> tuple[_LinksTally, tuple[int, int]]:
        """One transaction: OLD's ledger rows and sites (those not in NEW yet), its slices'
        generations and its generation; what OLD holds, and the ledger rows and sites copied."""
        tally = _LinksTally()
        with self.db.transaction(), self.db.cursor() as cur:
            cur.execute("CREATE TEMPORARY TABLE migrate_ledger (LIKE links_ledger) ON COMMIT DROP")
            with cur.copy("COPY migrate_ledger (name, generation, lines, new_urls, bad, done)"
                          " FROM STDIN") as copy:
                for row in links.ledger():
                    copy.write_row(row)
                    tally.ledger += 1
            cur.execute("INSERT INTO links_ledger SELECT * FROM migrate_ledger ON CONFLICT DO NOTHING")
            ledger_copied = cur.rowcount
            cur.execute("CREATE TEMPORARY TABLE migrate_links (LIKE links_sites) ON COMMIT DROP")
            with cur.copy("COPY migrate_links (origin, inlinks, dirty, hops, priority) FROM STDIN"
                          ) as copy:
                for origin, inlinks, dirty, hops, priority in links.sites():
                    copy.write_row((origin, inlinks, dirty, hops, priority))
                    tally.sites += 1
                    tally.inlinks += inlinks
                    tally.dirty += dirty > 0
            cur.execute("INSERT INTO links_sites SELECT * FROM migrate_links ON CONFLICT DO NOTHING")
            sites_copied = cur.rowcount
            cur.execute("UPDATE links_meta SET generation = %s", (links.generation,))
            cur.execute("DELETE FROM links_slices")
            cur.execute("INSERT INTO links_slices (slice, generation)"
                        " SELECT * FROM unnest(%s::integer[], %s::bigint[])",
                        (list(range(len(slices))), slices))
        return tally, (ledger_copied, sites_copied)

    def _links_copied(self, generation: int, slices: list[int], expected: _LinksTally,
                      copied: tuple[int, int]) -> None:
        """Compare NEW's links state with OLD's (``expected``) and say what was copied."""
        held = [g for (g,) in self.db.execute("SELECT generation FROM links_slices ORDER BY slice")]
        if held != slices:
            raise MigrationMismatch(f"links: OLD's slices are at generations {slices}, NEW's at {held}")
        row = self.db.execute(
            "SELECT (SELECT generation FROM links_meta), (SELECT count(*) FROM links_ledger), count(*),"
            " coalesce(sum(inlinks), 0), count(*) FILTER (WHERE dirty > 0) FROM links_sites").fetchone()
        assert row is not None
        found = _LinksTally(*(int(n) for n in row[1:]))
        if generation != row[0]:
            raise MigrationMismatch(f"links: OLD is at generation {generation}, NEW at {row[0]}")
        for what, old, new in zip(("ledger rows", "sites", "in-links", "sites to push"),
                                  astuple(expected), astuple(found), strict=True):
            self._compare("links", old, new, what)
        self._say(f"links: {copied[0]} ledger rows and {copied[1]} sites copied; verified generation "
                  f"{generation}, {found.ledger} ledger rows, {found.sites} sites ({found.dirty} to push), "
                  f"{found.inlinks} in-links" + (f", {len(slices)} bitmap slices" if slices else
                                                  f", bitmap {bitmap_key(generation)}" if generation
                                                  else ""))

    # -- helpers

    def _count(self, sql: str) -> int:
        found = self.db.execute(sql).fetchone()
        return int(found[0]) if found else 0

    def _compare(self, part: str, expected: int, found: int, what: str) -> None:
        if expected != found:
            raise MigrationMismatch(f"{part}: OLD has {expected} {what}, NEW has {found}")

    def _say(self, line: str) -> None:
        print(f"store migrate: {line}", file=self.out, flush=True)


class _Progress:
    """Progress lines of one part on stderr: the first at once, then one every few seconds."""

    def __init__(self, out: TextIO, part: str, unit: str) -> None:
        self.out, self.part, self.unit = out, part, unit
        self.started = time.monotonic()
        self.last: float | None = None

    def show(self, done: int, text: str | None = None, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and self.last is not None and now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-6)
        print(f"store migrate: {self.part}: {text or f'{done} {self.unit}'} ({rate:.0f} {self.unit}/s)",
              file=self.out, flush=True)
