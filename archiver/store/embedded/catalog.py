"""The card catalog: every capture in the WARC bundles, in SQLite shards chosen by a hash of the host.

Like the Internet Archive's 1997 card catalog ("about a thousand smaller tables, numbered with a
hashed value of the server name"), the catalog is ``<directory>/000.sqlite ... 999.sqlite``; a
capture goes to shard ``mmh3(host part of its SURT key) % shards``. Keys are the IA SURT keys that
pywb, cdxj-indexer and the Wayback CDX server use (``surt.surt``): they fold the scheme, ``www.``,
case and query order, so every spelling of a URL lands on one key and so in one shard.

Each shard holds one WITHOUT ROWID table clustered on its primary key ``(urlkey, ts, file, pos)``,
so all captures of a URL sit together in time order: "closest to a date" is two seeks of that key
and nothing else, and listings are range reads of it. File names are stored once per shard in a
``files`` table (a WARC name is as long as a URL; the id costs a byte or two). Shards are made on
first write in WAL mode with ``synchronous=NORMAL`` (a crash may lose the last commits but never
corrupts; the catalog can always be rebuilt from the WARC files, which are the archive).
``catalog.json`` beside the shards records their count and the shard function; opening with
another count is refused, since it would look for every key in the wrong file.

The **digest index** ``digests.sqlite`` beside the shards (written by a catalog opened with
``digests``: a crawler with ``crawl.dedupe = "digest"``) names, for each payload digest, the
earliest response found with it: the original a revisit of another URL refers to
(``first_with_digest``). It is an index to save bytes, not a record: a crash may lose its last
rows, and a response without a row there is only stored whole again.

A Catalog is used from one thread at a time (it may be a different thread each time, e.g. through
``trio.to_thread``). Several processes may share a catalog: SQLite's locks order the writers and
WAL lets readers go on meanwhile.
"""

from __future__ import annotations

import builtins
import heapq
import json
import os
import re
import resource
import sqlite3
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

import mmh3

from archiver.store.catalogkeys import (
    ABOVE,
    HOST_END,
    SHARD_FUNCTION,
    TALLY_ROWS,
    KeyRange,
    check_dates,
    check_stamp,
    content_condition,
    key_range,
    nearest,
    shard_of,
    surt_key,
)
from archiver.store.durable import fsync_directory
from archiver.store.embedded import sqlite
from archiver.store.models import Capture, CatalogError, HostTally

if TYPE_CHECKING:
    pass

_META = "catalog.json"
_SHARD_NAME = re.compile(r"(\d{3,})\.sqlite")
_DIGESTS = "digests.sqlite"
_DIGEST_SCHEMA = """
CREATE TABLE IF NOT EXISTS digests (
    digest TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    ts TEXT NOT NULL,
    file TEXT NOT NULL
) WITHOUT ROWID;
"""
_ADD_DIGEST = (
    "INSERT INTO digests (digest, url, ts, file) VALUES (?, ?, ?, ?) ON CONFLICT (digest) DO UPDATE"
    " SET url = excluded.url, ts = excluded.ts, file = excluded.file WHERE excluded.ts < digests.ts"
)
# Page cache per shard connection. Each open shard's fills up to it over a long run, so a
# process holds (open shards) x this: at 1 MiB a revisiting daemon's two catalogs grew it by
# 64 MiB in 10 minutes. A batch for one host, or a walk of one URL, touches one path through
# each B-tree, a dozen pages; the rest comes from the OS page cache at a syscall per page (a
# batch of 64 hosts' captures and their walks took the same CPU at 64 KiB as at 1 MiB).
_CACHE_KIB = 64
# A shard's write-ahead log is checkpointed at this many pages and cut back to their size after
# (SQLite's 1000 pages, never cut back, left a 4 MiB WAL beside every shard a daemon holds open:
# 400 MiB beside 50 MiB of catalog after 260,000 captures of a revisiting daemon).
_WAL_PAGES = 256
# Captures grouped per call of add(): bounds memory when given a long iterator (a reindex).
_CHUNK = 50_000
# Rows fetched per query by listings: a cursor never stays open between two yields, so the
# connection LRU may close a shard under a paused iterator; memory is shards * _PAGE rows at most.
_PAGE = 100

_SCHEMA = """
CREATE TABLE files (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE captures (
    urlkey TEXT NOT NULL,
    ts TEXT NOT NULL,
    file INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    url TEXT NOT NULL,
    status INTEGER,
    mime TEXT NOT NULL,
    digest TEXT NOT NULL,
    redirect TEXT,
    length INTEGER NOT NULL,
    revisit INTEGER NOT NULL,
    labels TEXT,
    PRIMARY KEY (urlkey, ts, file, pos)
) WITHOUT ROWID;
"""
# Shards made before labels existed get the column when a writer opens them (readers of such a
# shard read no labels).
_ADD_LABELS = "ALTER TABLE captures ADD COLUMN labels TEXT"
_INSERT = (
    "INSERT OR IGNORE INTO captures (urlkey, ts, file, pos, url, status, mime, digest, redirect, length,"
    " revisit, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# File names are resolved from a per-shard cache, not joined: each query reads captures only.
_SELECT = ("SELECT urlkey, ts, file, pos, url, status, mime, digest, redirect, length, revisit, labels"
           " FROM captures")
_BEFORE = f"{_SELECT} WHERE urlkey = ? AND ts <= ? ORDER BY ts DESC, file DESC, pos DESC LIMIT 1"
_AFTER = f"{_SELECT} WHERE urlkey = ? AND ts > ? ORDER BY ts, file, pos LIMIT 1"
_SPAN = f"{_SELECT} WHERE urlkey = ? AND ts >= ? AND ts <= ? ORDER BY ts, file, pos LIMIT ?"
# A walk's pages (Catalog.walk): keyset on (ts, file, pos) within one key, either way.
_FORWARD = f"{_SELECT} WHERE urlkey = ? AND (ts, file, pos) > (?, ?, ?) ORDER BY ts, file, pos LIMIT ?"
_BACKWARD = (f"{_SELECT} WHERE urlkey = ? AND (ts, file, pos) < (?, ?, ?)"
             " ORDER BY ts DESC, file DESC, pos DESC LIMIT ?")
# The latest response of a key up to a second with a payload digest (Catalog.payload_holder).
_HOLDER = (f"{_SELECT} WHERE urlkey = ? AND ts <= ? AND digest = ? AND NOT revisit"
           " ORDER BY ts DESC, file DESC, pos DESC LIMIT 1")
# Span counts (Catalog.span_counts): where a chunk of TALLY_ROWS rows ends, and its counts.
_CHUNK_END = ("SELECT ts, file, pos FROM captures WHERE urlkey = ? AND (ts, file, pos) > (?, ?, ?)"
              " AND ts <= ? ORDER BY ts, file, pos LIMIT 1 OFFSET ?")
# Content rows only (content_condition), a chunk being TALLY_ROWS rows of any kind.
_CONTENT = content_condition("instr")
_CHUNK_COUNTS = ("SELECT substr(ts, 1, ?), count(*) FROM captures WHERE urlkey = ?"
                 " AND (ts, file, pos) > (?, ?, ?) AND (ts, file, pos) <= (?, ?, ?)"
                 f" AND {_CONTENT} GROUP BY 1 ORDER BY 1")
_COUNT = (f"SELECT count(*) FROM (SELECT labels FROM captures WHERE urlkey = ? ORDER BY ts, file, pos"
          f" LIMIT ?) WHERE {_CONTENT}")
# A host listing (Catalog.hosts): the first key at or past a place, then a host's captures
# counted up to a bound with their latest timestamp.
_NEXT_KEY = "SELECT urlkey, url FROM captures WHERE urlkey >= ? ORDER BY urlkey LIMIT 1"
_HOST_COUNT = ("SELECT count(*), max(ts) FROM (SELECT ts FROM captures WHERE urlkey >= ? AND urlkey < ?"
               " LIMIT ?)")
_Row = tuple[str, str, int, int, str, int | None, str, str, str | None, int, int, str | None]


def _order(capture: Capture) -> tuple[str, str]:
    return capture.urlkey, capture.timestamp


def _default_max_open(shards: int) -> int:
    # A WAL connection holds 3 descriptors (database, -wal, -shm). Keep every shard open when
    # that fits in 3/8 of the soft RLIMIT_NOFILE, leaving the rest to sockets and WARC files;
    # under systemd's default soft limit of 1024 that is 128 connections.
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return shards
    return max(8, min(shards, soft // 8))


class Catalog:
    """The card catalog in ``directory``: ``shards`` SQLite files, made on first write.

    At most ``max_open`` shard connections stay open (least recently used closed first).
    """

    def __init__(
        self, directory: Path, shards: int, *, readonly: bool = False, max_open: int | None = None,
        digests: bool = False,
    ) -> None:
        if shards < 1:
            raise ValueError(f"shards must be at least 1, not {shards}")
        self.directory = Path(directory)
        self.shards = shards
        self.readonly = readonly
        self._width = max(3, len(str(shards - 1)))
        self._max_open = max_open or _default_max_open(shards)
        self._conns: OrderedDict[int, sqlite3.Connection] = OrderedDict()
        # Per shard, its files table both ways (WARC name -> id, id -> name). Rows there are
        # never deleted, so cached ids stay valid whatever other processes do.
        self._file_ids: dict[int, dict[str, int]] = {}
        self._file_names: dict[int, dict[int, str]] = {}
        self.digests = digests and not readonly  # responses' digests added to the digest index
        self._digest_db: sqlite3.Connection | None = None
        self._check_meta()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, captures: Iterable[Capture]) -> int:
        """Store captures, one transaction per shard touched; return how many were new.

        An entry already there (same urlkey, timestamp, filename and offset) is skipped, so a
        batch re-added after a crash, or a reindexed file tail, adds nothing twice.
        """
        self._writable()
        shards = self.shards
        added = 0
        it = iter(captures)
        while chunk := list(islice(it, _CHUNK)):
            groups: defaultdict[int, list[Capture]] = defaultdict(list)
            for capture in chunk:
                groups[mmh3.hash(capture.urlkey.partition(")")[0], 0, False) % shards].append(capture)
            for shard, group in groups.items():
                added += self._add_shard(shard, group)
            if self.digests:
                self._add_digests(chunk)
        return added

    def first_with_digest(self, digest: str) -> Capture | None:
        """The earliest response with payload ``digest`` the digest index names, or None (no
        index, no row, or its capture gone from the catalog)."""
        db = self._digest_index(create=False)
        row = db.execute("SELECT url, ts FROM digests WHERE digest = ?", (digest,)).fetchone() \
            if db is not None else None
        if row is None:
            return None
        return next((c for c in self.captures(row[0], from_=row[1], to=row[1])
                     if c.rectype == "response" and c.digest == digest), None)

    def closest(self, url: str, at: str) -> Capture | None:
        """The capture of ``url`` nearest to the 14-digit timestamp ``at``; a tie goes to the earlier.

        Two seeks of the (urlkey, ts, file, pos) key: the last capture at or before ``at`` and
        the first after it, captures of one second being in (file id, offset) order there.
        ValueError if ``at`` is not a valid 14-digit timestamp or ``url`` has no host.
        """
        check_dates(at)
        key = surt_key(url)
        shard = shard_of(key, self.shards)
        conn = self._conn(shard, create=False)
        if conn is None:
            return None
        before = conn.execute(_BEFORE, (key, at)).fetchone()
        after = conn.execute(_AFTER, (key, at)).fetchone()
        row = nearest(before, after, at)
        return None if row is None else self._capture(shard, conn, row)

    def captures(
        self, url: str, *, from_: str | None = None, to: str | None = None, limit: int | None = None
    ) -> list[Capture]:
        """Captures of ``url`` in time order, within the inclusive 14-digit bounds if given."""
        check_dates(from_, to)
        key = surt_key(url)
        shard = shard_of(key, self.shards)
        conn = self._conn(shard, create=False)
        if conn is None:
            return []
        span = (key, from_ or "0" * 14, to or "9" * 14, -1 if limit is None else limit)
        return [self._capture(shard, conn, row) for row in conn.execute(_SPAN, span).fetchall()]

    def walk(self, url: str, at: str, *, forward: bool) -> Iterator[Capture]:
        """Captures of ``url`` from the timestamp ``at`` on, nearest first: ``forward``, those at
        or after it in time order; backward, those at or before it, latest first (captures of
        one second in (file, offset) order, or its reverse). A seek of the (urlkey, ts, file,
        pos) key, then pages by keyset, the first of one row and each next ten times larger up
        to _PAGE rows, so that a walk that stops after a row or two reads no more. ``at`` is
        any 14 digits (compared as text); a bad ``at`` or ``url`` raises at once."""
        check_stamp(at)
        key = surt_key(url)
        return self._walk(shard_of(key, self.shards), key, at, forward)

    def payload_holder(self, url: str, digest: str, at: str) -> Capture | None:
        """The latest response of ``url`` at or before ``at`` with payload ``digest`` (what a
        revisit of it stands for): one query, the database reading the URL's captures back from
        ``at`` to it, none of them made into a Capture."""
        check_stamp(at)
        key = surt_key(url)
        shard = shard_of(key, self.shards)
        conn = self._conn(shard, create=False)
        if conn is None:
            return None
        row = conn.execute(_HOLDER, (key, at, digest)).fetchone()
        return None if row is None else self._capture(shard, conn, row)

    def count_captures(self, url: str, *, at_most: int) -> int:
        """How many content captures (``Capture.is_content``) ``url`` has among its first
        ``at_most`` captures in time order (at most that many rows of its key read)."""
        key = surt_key(url)
        conn = self._conn(shard_of(key, self.shards), create=False)
        return 0 if conn is None else int(conn.execute(_COUNT, (key, at_most)).fetchone()[0])

    def hosts(self, *, after: str = "", at_most: int) -> Iterator[HostTally]:
        """Each host of the catalog once (see HostTally), in the catalog's order: by shard, then
        by key; those past the host ``after`` (a ``shard_host``, "" from the start). Lazily: one
        index seek per host and per shard, and at most ``at_most`` rows counted per host."""
        start = shard_of(after, self.shards) if after else 0
        for shard in self._existing():
            if shard < start:
                continue
            place = after + HOST_END if after and shard == start else ""
            while (conn := self._conn(shard, create=False)) is not None:
                found = conn.execute(_NEXT_KEY, (place,)).fetchone()
                if found is None:
                    break
                host, sep, _ = found[0].partition(")")
                place = host + HOST_END
                if not sep:  # not a key made from a URL with a host: no host to list
                    continue
                count, latest = conn.execute(_HOST_COUNT, (host + ")", place, at_most)).fetchone()
                yield HostTally(host, found[1], count, latest)

    def span_counts(self, url: str, digits: int, *, from_: str = "0" * 14, to: str = "9" * 14
                    ) -> Iterator[tuple[str, int]]:
        """How many content captures (``Capture.is_content``) of ``url`` each span of time holds,
        a span being the captures whose timestamps begin with the same ``digits`` digits (4: a
        year, 8: a day), within the inclusive 14-digit bounds, in time order. Counted by the
        database TALLY_ROWS rows (of any kind) at a time and given chunk by chunk, so a span's
        count may come in several pieces, one after another: add them up; a chunk of no content
        gives none. Memory: one chunk's spans. A bad argument raises at once."""
        if not 1 <= digits <= 14:
            raise ValueError(f"spans are named by 1 to 14 digits, not {digits}")
        check_stamp(from_)
        check_stamp(to)
        key = surt_key(url)
        return self._span_counts(shard_of(key, self.shards), key, digits, from_, to)

    def list(self, url: str, match: str, *, limit: int | None = None) -> Iterator[Capture]:
        """Captures sorted by (urlkey, timestamp) whose key matches ``url`` as ``match`` says:

        - ``exact``: the URL's own key;
        - ``prefix``: keys starting with the URL's key; a URL ending in "/" is a folder: its key
          exactly, or followed by "/" or "?" ("example.org/dir/" takes /dir/, /dir/a, /dir/?q=1,
          not /dir2 — SURT erases the trailing slash);
        - ``host``: every key of the URL's host as it stands in the key (so with its port, and with
          ``www.`` folded as SURT folds it);
        - ``domain``: that host on any port and all its subdomains. Those hash to many shards:
          every existing shard is read with an indexed range query and the results merged.

        The iterator reads lazily, a page at a time; a bad ``url`` or ``match`` raises at once.
        """
        key, rng = key_range(url, match)
        found: Iterator[Capture]
        if match == "domain":
            found = heapq.merge(*(self._read(s, rng) for s in self._existing()), key=_order)
        else:
            found = self._read(shard_of(key, self.shards), rng)
        return found if limit is None else islice(found, limit)

    def iter_all(self) -> Iterator[Capture]:
        """Every entry, sorted by (urlkey, timestamp) across shards (a heap merge of shard scans)."""
        everything = KeyRange("", None)
        return heapq.merge(*(self._read(s, everything) for s in self._existing()), key=_order)

    def count(self) -> int:
        """How many entries the catalog holds (counts every shard)."""
        total = 0
        for shard in self._existing():
            conn = self._conn(shard, create=False)
            if conn is not None:
                total += conn.execute("SELECT count(*) FROM captures").fetchone()[0]
        return total

    def remove_file(self, filename: str) -> int:
        """Drop every entry of one WARC file (before reindexing a repaired one); return how many.

        There is no index on the file column (repeating the key, it would make the catalog about a
        third larger and every insert slower, for a rare repair), so this reads every shard once.
        """
        self._writable()
        removed = 0
        for shard in self._existing():
            conn = self._conn(shard, create=False)
            if conn is None:
                continue
            found = conn.execute("SELECT id FROM files WHERE name = ?", (filename,)).fetchone()
            if found is None:
                continue
            with sqlite.transaction(conn):
                removed += conn.execute("DELETE FROM captures WHERE file = ?", found).rowcount
        digests = self._digest_index(create=False)
        if digests is not None:
            with sqlite.transaction(digests):
                digests.execute("DELETE FROM digests WHERE file = ?", (filename,))
        return removed

    def close(self) -> None:
        """Close every open shard connection (the catalog reopens them if used again)."""
        while self._conns:
            self._release(self._conns.popitem()[1])
        if self._digest_db is not None:
            self._release(self._digest_db)
            self._digest_db = None

    def _digest_index(self, *, create: bool) -> sqlite3.Connection | None:
        """The digest index's connection; None if it has no file and not ``create``."""
        if self._digest_db is None:
            path = self.directory / _DIGESTS
            if not path.exists() and not create:
                return None
            if self.readonly:
                self._digest_db = sqlite.open_reader(path, sqlite.CATALOG_TIMEOUT)
            else:
                self._digest_db = sqlite.open_writer(path, sqlite.CATALOG_TIMEOUT)
                self._digest_db.executescript(_DIGEST_SCHEMA)
        return self._digest_db

    def _add_digests(self, captures: builtins.list[Capture]) -> None:
        """The responses' digests into the digest index (an earlier capture wins)."""
        rows = [(c.digest, c.url, c.timestamp, c.filename) for c in captures
                if c.rectype == "response" and c.digest != "-"]
        db = self._digest_index(create=True)
        if rows and db is not None:
            with sqlite.transaction(db):
                db.executemany(_ADD_DIGEST, rows)

    def _release(self, conn: sqlite3.Connection) -> None:
        sqlite.close(conn, writer=not self.readonly)

    # -- internals

    def _writable(self) -> None:
        if self.readonly:
            raise CatalogError(f"catalog {self.directory} is open read-only")

    def _path(self, shard: int) -> Path:
        return self.directory / f"{shard:0{self._width}d}.sqlite"

    def _existing(self) -> builtins.list[int]:
        """The shards that have a file, in order."""
        found = []
        for entry in os.scandir(self.directory):
            m = _SHARD_NAME.fullmatch(entry.name)
            if m and len(m[1]) == self._width and int(m[1]) < self.shards:
                found.append(int(m[1]))
        return sorted(found)

    def _check_meta(self) -> None:
        meta = {"format": 1, "shards": self.shards, "shard_function": SHARD_FUNCTION}
        path = self.directory / _META
        if not path.exists():
            if self.readonly:
                raise CatalogError(f"no catalog in {self.directory} (no {_META})")
            self.directory.mkdir(parents=True, exist_ok=True)
            if self._existing():
                raise CatalogError(f"{self.directory} has shard files but no {_META}: reindex")
            text = json.dumps(meta, indent=1) + "\n"
            _create_exclusive(path, _write_synced(text))
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CatalogError(f"unreadable {path}: {exc}") from None
        if not isinstance(found, dict):
            raise CatalogError(f"unreadable {path}: not a JSON object")
        if found != meta:
            raise CatalogError(
                f"catalog {self.directory} has {found.get('shards')} shards laid out by "
                f"{found.get('shard_function')!r} (format {found.get('format')}); opened with "
                f"{self.shards} shards by {SHARD_FUNCTION!r} (format 1): open it with its own "
                "shard count, or reindex into a new directory"
            )

    def _conn(self, shard: int, *, create: bool) -> sqlite3.Connection | None:
        """The shard's connection, opened if needed; None if the shard has no file and not ``create``."""
        conn = self._conns.get(shard)
        if conn is not None:
            self._conns.move_to_end(shard)
            return conn
        path = self._path(shard)
        if not path.exists():
            if not create:
                return None
            _create_exclusive(path, _make_shard)
        if self.readonly:
            conn = sqlite.open_reader(path, sqlite.CATALOG_TIMEOUT)
        else:
            conn = sqlite.open_writer(path, sqlite.CATALOG_TIMEOUT)
            conn.execute(f"PRAGMA wal_autocheckpoint={_WAL_PAGES}")
            conn.execute(f"PRAGMA journal_size_limit={_WAL_PAGES * 4096}")
        conn.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        _with_labels(conn, writable=not self.readonly)
        self._conns[shard] = conn
        if len(self._conns) > self._max_open:
            self._release(self._conns.popitem(last=False)[1])
        return conn

    def _add_shard(self, shard: int, group: builtins.list[Capture]) -> int:
        conn = self._conn(shard, create=True)
        assert conn is not None
        ids = self._file_ids.setdefault(shard, {})
        try:
            with sqlite.transaction(conn):
                return self._insert(conn, shard, ids, group)
        except BaseException:
            # Ids made in the rolled-back transaction are gone.
            self._file_ids.pop(shard, None)
            self._file_names.pop(shard, None)
            raise

    def _insert(self, conn: sqlite3.Connection, shard: int, ids: dict[str, int],
                group: builtins.list[Capture]) -> int:
        for name in {c.filename for c in group}.difference(ids):
            conn.execute("INSERT OR IGNORE INTO files (name) VALUES (?)", (name,))
            ids[name] = conn.execute("SELECT id FROM files WHERE name = ?", (name,)).fetchone()[0]
            self._file_names.setdefault(shard, {})[ids[name]] = name
        rows = [
            (
                c.urlkey,
                c.timestamp,
                ids[c.filename],
                c.offset,
                c.url,
                c.status,
                c.mime,
                c.digest,
                c.redirect,
                c.length,
                c.rectype == "revisit",
                c.labels or None,
            )
            for c in group
        ]
        return conn.executemany(_INSERT, rows).rowcount

    def _read(self, shard: int, rng: KeyRange) -> Iterator[Capture]:
        """Captures of one shard in ``rng``, in key order, fetched _PAGE at a time by keyset paging."""
        sql = f"{_SELECT} WHERE (urlkey, ts, file, pos) > (?, ?, ?, ?)"
        fixed: list[object] = []
        if rng.hi is not None:
            sql += " AND urlkey < ?"
            fixed.append(rng.hi)
        if rng.allowed is not None:
            sql += f" AND substr(urlkey, ?, 1) IN ({', '.join('?' * len(rng.allowed))})"
            fixed += [rng.cut, *rng.allowed]
        sql += " ORDER BY urlkey, ts, file, pos LIMIT ?"
        last: tuple[object, ...] = (rng.lo, "", -1, -1)
        while True:
            conn = self._conn(shard, create=False)
            if conn is None:
                return
            rows = conn.execute(sql, (*last, *fixed, _PAGE)).fetchall()
            for row in rows:
                yield self._capture(shard, conn, row)
            if len(rows) < _PAGE:
                return
            last = rows[-1][:4]

    def _walk(self, shard: int, key: str, at: str, forward: bool) -> Iterator[Capture]:
        sql = _FORWARD if forward else _BACKWARD
        last: tuple[object, ...] = (at, -1, -1) if forward else (at, ABOVE, ABOVE)
        size = 1
        while True:
            conn = self._conn(shard, create=False)
            if conn is None:
                return
            rows = conn.execute(sql, (key, *last, size)).fetchall()
            for row in rows:
                yield self._capture(shard, conn, row)
            if len(rows) < size:
                return
            last = rows[-1][1:4]
            size = min(size * 10, _PAGE)

    def _span_counts(self, shard: int, key: str, digits: int, from_: str, to: str
                     ) -> Iterator[tuple[str, int]]:
        last: tuple[object, ...] = (from_, -1, -1)
        while True:
            conn = self._conn(shard, create=False)
            if conn is None:
                return
            end = conn.execute(_CHUNK_END, (key, *last, to, TALLY_ROWS - 1)).fetchone()
            bound = (to, ABOVE, ABOVE) if end is None else tuple(end)
            yield from conn.execute(_CHUNK_COUNTS, (digits, key, *last, *bound)).fetchall()
            if end is None:
                return
            last = bound

    def _capture(self, shard: int, conn: sqlite3.Connection, row: _Row) -> Capture:
        urlkey, ts, file, pos, url, status, mime, digest, redirect, length, revisit, labels = row
        names = self._file_names.setdefault(shard, {})
        if file not in names:  # a file added since we last looked, maybe by another process
            names.update(conn.execute("SELECT id, name FROM files"))
        rectype = "revisit" if revisit else "response"
        return Capture(urlkey, ts, url, status, mime, digest, redirect, names[file], pos, length, rectype,
                       labels or "")


def _with_labels(conn: sqlite3.Connection, *, writable: bool) -> None:
    """Give a shard made before labels its ``labels`` column: a writer adds it (another process
    may do so at the same moment), a reader sees the shard through a view that reads none."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(captures)")}
    if "labels" in columns:
        return
    if writable:
        try:
            with sqlite.transaction(conn):
                conn.execute(_ADD_LABELS)
        except sqlite3.OperationalError as e:
            if "duplicate column" not in str(e):
                raise
    else:
        conn.execute("CREATE TEMP VIEW captures AS SELECT *, NULL AS labels FROM main.captures")


def _make_shard(path: Path) -> None:
    # Built unsynced (nobody sees the temporary file), then synced once before it is linked in:
    # one fsync instead of SQLite's ten for a journal switch and a schema.
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
    finally:
        conn.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(text: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    return write


def _create_exclusive(path: Path, make: Callable[[Path], None]) -> None:
    """Make ``path`` whole or not at all: build it under a temporary name, then hard-link it into
    place, which fails if another process got there first (theirs is as good as ours)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        make(tmp)
        os.link(tmp, path)
        fsync_directory(path.parent)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
