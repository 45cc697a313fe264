"""The card catalog in PostgreSQL: the behaviour of ``store.embedded.catalog.Catalog``, one shared table.

``catalog_captures`` (schema in ``store.postgres.schema``) holds every entry under the primary key
``(shard, urlkey, ts, file, pos)``, where ``shard`` is ``catalog.shard_of(urlkey, shards)``, the
SQLite catalog's shard of the key; the table is hash-partitioned on it. Closest-capture is two
seeks of that key, sent as one statement; a listing of one host reads one shard's key range.
``catalog_meta`` records the shard count and function on first write, and opening with another
count is refused, as ``catalog.json`` does for the SQLite shards.

``add`` copies a batch into a temporary staging table (COPY, binary) and moves it into the
catalog with one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``: one transaction per batch, and
an entry already there (same key, timestamp, file and offset) is skipped, so a batch re-added
after a crash adds nothing twice.

That transaction commits without waiting for its WAL to reach the disk (``synchronous_commit =
off``, for it alone): the flush cost more than the insert (85,600 -> 139,700 inserts/s at 2 M
entries on the project's machine). Nothing is lost by it, because PostgreSQL writes its WAL in
order and every writer of catalog entries follows its adds with a durable commit in the same
database: a shipped bundle's entries are added, then its pending rows deleted and the bundle
marked shipped (``postgres.crawlers.BundleLedger.shipped``), and that commit's flush takes the
entries with it; a server crash before it leaves the rows pending, and they are added again. ``store migrate``
counts the catalog when it resumes and copies it again if entries are missing; a reindex replaces
in one durable transaction (``replace``). WARC file names live in ``catalog_files``, made before the batch
in their own statement (a name without entries is harmless) and never deleted, so cached ids stay
valid (they are read again after a failover, which a standby may have received late).

The connection is in autocommit: every call is its own transaction or statement, and no reader
holds a transaction open between calls. A call is run again on a new connection if the server
went away (``store.postgres.connection``): an add skips what committed, a listing reads its page again.
Listings read a page at a time by keyset; ``iter_all`` streams one sorted query through a
server-side cursor on a connection of its own, open while the iterator is. A PgCatalog is used
from one thread at a time, like the SQLite one.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from itertools import islice
from typing import Any

import mmh3
import psycopg

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
from archiver.store.models import Capture, CatalogError, HostTally
from archiver.store.postgres.connection import PgConnection, StoreWatch, retried
from archiver.store.postgres.schema import Connection, connect

# Captures per COPY and INSERT: bounds the client's memory when given a long iterator (a reindex).
_CHUNK = 50_000
# Rows per page of a listing (keyset paging: nothing stays open between two pages).
_PAGE = 1000
# Rows per round trip of iter_all's server-side cursor.
_ITERSIZE = 5000
_COLUMNS = "urlkey, ts, file, pos, url, status, mime, digest, redirect, length, revisit, labels"
_COPY_TYPES = ["int4", "text", "text", "int4", "int8", "text", "int4", "text", "text", "text", "int8", "bool",
               "text"]
_SIDE = (
    f"SELECT {_COLUMNS} FROM catalog_captures WHERE shard = %(shard)s AND urlkey = %(key)s AND ts"
)
# The last capture at or before the date and the first after it, in one round trip.
_CLOSEST = (
    f"(SELECT 0 AS side, * FROM ({_SIDE} <= %(at)s ORDER BY ts DESC, file DESC, pos DESC LIMIT 1) b)"
    f" UNION ALL (SELECT 1, * FROM ({_SIDE} > %(at)s ORDER BY ts, file, pos LIMIT 1) a)"
)
_SPAN = (
    f"SELECT {_COLUMNS} FROM catalog_captures WHERE shard = %s AND urlkey = %s AND ts >= %s AND ts <= %s"
    " ORDER BY ts, file, pos LIMIT %s"
)
_IN_SHARD = "FROM catalog_captures WHERE shard = %s"
_KEY = f"{_IN_SHARD} AND urlkey = %s"
# A walk's pages (PgCatalog.walk): keyset on (ts, file, pos) within one key, either way.
_FORWARD = f"SELECT {_COLUMNS} {_KEY} AND (ts, file, pos) > (%s, %s, %s) ORDER BY ts, file, pos LIMIT %s"
_BACKWARD = (f"SELECT {_COLUMNS} {_KEY} AND (ts, file, pos) < (%s, %s, %s)"
             " ORDER BY ts DESC, file DESC, pos DESC LIMIT %s")
# Span counts: where a chunk of TALLY_ROWS rows ends, and its counts.
_CHUNK_END = (f"SELECT ts, file, pos {_KEY} AND (ts, file, pos) > (%s, %s, %s) AND ts <= %s"
              " ORDER BY ts, file, pos LIMIT 1 OFFSET %s")
# Content rows only (content_condition), a chunk being TALLY_ROWS rows of any kind.
_CONTENT = content_condition("strpos")
_CHUNK_COUNTS = (f"SELECT substr(ts, 1, %s), count(*) {_KEY} AND (ts, file, pos) > (%s, %s, %s)"
                 f" AND (ts, file, pos) <= (%s, %s, %s) AND {_CONTENT} GROUP BY 1 ORDER BY 1")
_COUNT = f"SELECT count(*) FROM (SELECT labels {_KEY} ORDER BY ts, file, pos LIMIT %s) c WHERE {_CONTENT}"
_HOLDER = (f"SELECT {_COLUMNS} {_KEY} AND ts <= %s AND digest = %s AND NOT revisit"
           " ORDER BY ts DESC, file DESC, pos DESC LIMIT 1")
_Row = tuple[Any, ...]
# A host listing (PgCatalog.hosts): the next shard holding entries, the first key of a shard at
# or past a place, a host's captures counted up to a bound with their latest timestamp.
_NEXT_SHARD = "SELECT min(shard) FROM catalog_captures WHERE shard > %s"
_NEXT_KEY = f"SELECT urlkey, url {_IN_SHARD} AND urlkey >= %s ORDER BY urlkey LIMIT 1"
_HOST_COUNT = (f"SELECT count(*), max(ts) FROM (SELECT ts {_IN_SHARD} AND urlkey >= %s AND urlkey < %s"
               " LIMIT %s) c")



def _primary_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return row[:5]  # shard, urlkey, ts, file, pos


class PgCatalog:
    """The card catalog in the PostgreSQL database at ``url``, its keys in ``shards`` shards."""

    def __init__(self, url: str, shards: int, *, readonly: bool = False, digests: bool = False,
                 watch: StoreWatch | None = None) -> None:
        """``digests``: responses added also go to the digest index (table ``catalog_digests``,
        as ``Catalog``'s \"digests.sqlite\"); ``watch``: the process's (store.postgres.connection)."""
        if shards < 1:
            raise ValueError(f"shards must be at least 1, not {shards}")
        self.url = url
        self.shards = shards
        self.readonly = readonly
        self.digests = digests and not readonly
        self._db = PgConnection(url, readonly=readonly, watch=watch, on_connect=self._connected)
        self._staging = False
        self._file_ids: dict[str, int] = {}
        self._file_names: dict[int, str] = {}
        try:
            self._check_meta()
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> PgCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, captures: Iterable[Capture]) -> int:
        """Store captures, one transaction per chunk of them; return how many were new."""
        self._writable()
        added = 0
        it = iter(captures)
        while chunk := list(islice(it, _CHUNK)):
            # Twice is harmless: the second finds the entries there (see _insert).
            added += self._db.run(partial(self._add_chunk, chunk))
        return added

    @retried
    def closest(self, url: str, at: str) -> Capture | None:
        """The capture of ``url`` nearest to the 14-digit timestamp ``at``; a tie goes to the earlier.
        ValueError if ``at`` is not a valid 14-digit timestamp or ``url`` has no host."""
        check_dates(at)
        key = surt_key(url)
        params = {"shard": shard_of(key, self.shards), "key": key, "at": at}
        found = {row[0]: row[1:] for row in self._db.execute(_CLOSEST, params).fetchall()}
        before, after = found.get(0), found.get(1)
        row = nearest(before, after, at)
        return None if row is None else self._captures([row])[0]

    @retried
    def captures(
        self, url: str, *, from_: str | None = None, to: str | None = None, limit: int | None = None
    ) -> list[Capture]:
        """Captures of ``url`` in time order, within the inclusive 14-digit bounds if given."""
        check_dates(from_, to)
        key = surt_key(url)
        span = (shard_of(key, self.shards), key, from_ or "0" * 14, to or "9" * 14, limit)
        return self._captures(self._db.execute(_SPAN, span).fetchall())

    def walk(self, url: str, at: str, *, forward: bool) -> Iterator[Capture]:
        """As ``Catalog.walk``: captures of ``url`` from ``at`` on, nearest first, a page at a
        time by keyset (one row, then ten times more each page up to _PAGE)."""
        check_stamp(at)
        key = surt_key(url)
        return self._walk(shard_of(key, self.shards), key, at, forward)

    @retried
    def payload_holder(self, url: str, digest: str, at: str) -> Capture | None:
        """As ``Catalog.payload_holder``: the latest response of ``url`` at or before ``at`` with
        payload ``digest``, in one query."""
        check_stamp(at)
        key = surt_key(url)
        rows = self._db.execute(_HOLDER, (shard_of(key, self.shards), key, at, digest)).fetchall()
        return self._captures(rows)[0] if rows else None

    @retried
    def count_captures(self, url: str, *, at_most: int) -> int:
        """As ``Catalog.count_captures``: content captures among the first ``at_most``."""
        key = surt_key(url)
        found = self._db.execute(_COUNT, (shard_of(key, self.shards), key, at_most)).fetchone()
        return int(found[0]) if found else 0

    def hosts(self, *, after: str = "", at_most: int) -> Iterator[HostTally]:
        """As ``Catalog.hosts``: each host once, by shard then key, past the host ``after``; a
        seek per host and one query per shard holding entries (a seek per partition)."""
        shard = shard_of(after, self.shards) if after else self._next_shard(-1)
        place = after + HOST_END if after else ""
        while shard is not None:
            while found := self._db.read(_NEXT_KEY, (shard, place)):
                host, sep, _ = found[0][0].partition(")")
                place = host + HOST_END
                if sep:  # else not a key made from a URL with a host: no host to list
                    count, latest = self._db.read(_HOST_COUNT, (shard, host + ")", place, at_most))[0]
                    yield HostTally(host, found[0][1], int(count), latest)
            shard, place = self._next_shard(shard), ""

    def _next_shard(self, shard: int) -> int | None:
        return self._db.read(_NEXT_SHARD, (shard,))[0][0]

    def span_counts(self, url: str, digits: int, *, from_: str = "0" * 14, to: str = "9" * 14
                    ) -> Iterator[tuple[str, int]]:
        """As ``Catalog.span_counts``: content captures per span of ``digits`` digits, TALLY_ROWS rows
        counted by the server at a time, a span's count in pieces."""
        if not 1 <= digits <= 14:
            raise ValueError(f"spans are named by 1 to 14 digits, not {digits}")
        check_stamp(from_)
        check_stamp(to)
        key = surt_key(url)
        return self._span_counts(shard_of(key, self.shards), key, digits, from_, to)

    def list(self, url: str, match: str, *, limit: int | None = None) -> Iterator[Capture]:
        """Captures sorted by (urlkey, timestamp) whose key matches ``url`` as ``match`` says
        (exact, prefix, host, domain: see ``Catalog.list``). A domain spans shards: each page is
        one indexed range read per shard, merged by the server. Lazy; a bad ``url`` or ``match``
        raises at once."""
        key, rng = key_range(url, match)
        shards = list(range(self.shards)) if match == "domain" else [shard_of(key, self.shards)]
        found = self._read(shards, rng)
        return found if limit is None else islice(found, limit)

    def iter_all(self) -> Iterator[Capture]:
        """Every entry, sorted by (urlkey, timestamp): one query, streamed by a server-side cursor."""
        conn = connect(self.url, readonly=True)
        try:
            with conn.transaction(), conn.cursor(name="catalog_iter_all") as cur:
                cur.itersize = _ITERSIZE
                cur.execute(f"SELECT {_COLUMNS} FROM catalog_captures ORDER BY urlkey, ts, file, pos")
                while rows := cur.fetchmany(_ITERSIZE):
                    yield from self._captures(rows)
        finally:
            conn.close()

    @retried
    def count(self) -> int:
        """How many entries the catalog holds."""
        found = self._db.execute("SELECT count(*) FROM catalog_captures").fetchone()
        return int(found[0]) if found else 0

    @retried
    def remove_file(self, filename: str) -> int:
        """Drop every entry of one WARC file; return how many. A scan: there is no index on the file
        column (as in the SQLite catalog, for a rare repair)."""
        self._writable()
        found = self._db.execute("SELECT id FROM catalog_files WHERE name = %s", (filename,)).fetchone()
        if found is None:
            return 0
        self._db.execute("DELETE FROM catalog_digests WHERE file = %s", found)
        return self._db.execute("DELETE FROM catalog_captures WHERE file = %s", found).rowcount

    @retried
    def first_with_digest(self, digest: str) -> Capture | None:
        """As ``Catalog.first_with_digest``."""
        row = self._db.execute("SELECT url, ts FROM catalog_digests WHERE digest = %s",
                               (digest,)).fetchone()
        if row is None:
            return None
        return next((c for c in self.captures(row[0], from_=row[1], to=row[1])
                     if c.rectype == "response" and c.digest == digest), None)

    @retried
    def file_names(self) -> set[str]:
        """The names of every WARC file the catalog has named (with entries left or not)."""
        return {row[0] for row in self._db.execute("SELECT name FROM catalog_files")}

    def replace(self, files: Iterable[str], captures: Iterable[Capture]) -> int:
        """In one transaction, remove every entry of the WARC files ``files`` and add ``captures``;
        return how many were added. Until it commits, readers see the entries as they were; an
        exception while ``captures`` is read rolls it all back (a reindex meeting a damaged file).
        The removal is one scan of the table (there is no index on the file column)."""
        self._writable()
        names = builtins.list(files)
        added = 0
        try:
            with self._db.transaction():
                ids = [row[0] for row in self._db.execute(
                    "SELECT id FROM catalog_files WHERE name = ANY(%s)", (names,))]
                if ids:
                    self._db.execute("DELETE FROM catalog_captures WHERE file = ANY(%s)", (ids,))
                it = iter(captures)
                while chunk := builtins.list(islice(it, _CHUNK)):
                    added += self._add_chunk(chunk)
        except BaseException:
            # File names made in the transaction are gone with it: forget the ids cached for them.
            self._file_ids.clear()
            self._file_names.clear()
            raise
        return added

    def close(self) -> None:
        self._db.close()

    # -- internals

    def _connected(self, conn: Connection) -> None:
        """A new connection (the server restarted or failed over): the file ids cached may name
        rows a standby never received; read them again as needed."""
        self._staging = False
        self._file_ids.clear()
        self._file_names.clear()

    def _writable(self) -> None:
        if self.readonly:
            raise CatalogError("the PostgreSQL catalog is open read-only")

    def _check_meta(self) -> None:
        select = "SELECT shards, shard_function FROM catalog_meta"
        found = self._db.execute(select).fetchone()
        if found is None and not self.readonly:
            self._db.execute("INSERT INTO catalog_meta (shards, shard_function) VALUES (%s, %s)"
                             " ON CONFLICT DO NOTHING", (self.shards, SHARD_FUNCTION))
            found = self._db.execute(select).fetchone()
        if found is not None and tuple(found) != (self.shards, SHARD_FUNCTION):
            raise CatalogError(
                f"the PostgreSQL catalog has {found[0]} shards laid out by {found[1]!r}; opened with "
                f"{self.shards} shards by {SHARD_FUNCTION!r}: open it with its own shard count "
                "(catalog.shards), or reindex into a new database"
            )

    def _ids(self, names: set[str]) -> dict[str, int]:
        """File ids of ``names``, made if new (in their own statement, committed at once)."""
        missing = sorted(n for n in names if n not in self._file_ids)  # ids in name (time) order
        if missing:
            self._db.execute("INSERT INTO catalog_files (name) SELECT unnest(%s::text[])"
                             " ON CONFLICT DO NOTHING", (missing,))
            rows = self._db.execute("SELECT name, id FROM catalog_files WHERE name = ANY(%s)", (missing,))
            for name, fid in rows:
                self._file_ids[name] = fid
                self._file_names[fid] = name
        return self._file_ids

    def _add_chunk(self, chunk: builtins.list[Capture]) -> int:
        """One transaction. Captures are almost always new, so they are copied straight into the
        table in key order (index pages visited once each); only if some were there already (a
        unique violation undoes the copy to its savepoint) do they go through the staging table
        and ``ON CONFLICT DO NOTHING`` (measured: about 20 % fewer inserts/s)."""
        ids = self._ids({c.filename for c in chunk})
        shards = self.shards
        rows = sorted((
            (mmh3.hash(c.urlkey.partition(")")[0], 0, False) % shards,  # shard_of, inlined
             c.urlkey, c.timestamp, ids[c.filename], c.offset, c.url, c.status, c.mime,
             c.digest, c.redirect, c.length, c.rectype == "revisit", c.labels or None)
            for c in chunk
        ), key=_primary_key)
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SET LOCAL synchronous_commit = off")  # see the module docstring
            added = self._insert(cur, rows)
            if self.digests:
                self._add_digests(cur, chunk, ids)
            return added

    def _insert(self, cur: psycopg.Cursor[tuple[Any, ...]], rows: builtins.list[tuple[Any, ...]]
                ) -> int:
        try:
            with self._db.transaction():
                self._copy(cur, "catalog_captures", rows)
            return len(rows)
        except psycopg.errors.UniqueViolation:
            pass
        if not self._staging:
            cur.execute("CREATE TEMPORARY TABLE IF NOT EXISTS catalog_staging"
                        " (LIKE catalog_captures) ON COMMIT DELETE ROWS")
            self._staging = True
        self._copy(cur, "catalog_staging", rows)
        cur.execute(f"INSERT INTO catalog_captures (shard, {_COLUMNS})"
                    f" SELECT shard, {_COLUMNS} FROM catalog_staging"
                    " ORDER BY shard, urlkey, ts, file, pos ON CONFLICT DO NOTHING")
        return cur.rowcount

    @staticmethod
    def _add_digests(cur: psycopg.Cursor[tuple[Any, ...]], chunk: builtins.list[Capture],
                     ids: dict[str, int]) -> None:
        """The responses' digests into the digest index (an earlier capture wins)."""
        earliest: dict[str, Capture] = {}
        for c in chunk:
            if c.rectype == "response" and c.digest != "-" and (
                    c.digest not in earliest or c.timestamp < earliest[c.digest].timestamp):
                earliest[c.digest] = c
        if not earliest:
            return
        found = sorted(earliest.values(), key=lambda c: c.digest)  # one lock order
        cur.execute(
            "INSERT INTO catalog_digests (digest, url, ts, file) SELECT * FROM"
            " unnest(%s::text[], %s::text[], %s::text[], %s::integer[]) ON CONFLICT (digest)"
            " DO UPDATE SET url = excluded.url, ts = excluded.ts, file = excluded.file"
            " WHERE excluded.ts < catalog_digests.ts",
            ([c.digest for c in found], [c.url for c in found], [c.timestamp for c in found],
             [ids[c.filename] for c in found]))

    @staticmethod
    def _copy(cur: psycopg.Cursor[tuple[Any, ...]], table: str,
              rows: builtins.list[tuple[Any, ...]]) -> None:
        with cur.copy(f"COPY {table} (shard, {_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_COPY_TYPES)
            for row in rows:
                copy.write_row(row)

    def _read(self, shards: builtins.list[int], rng: KeyRange) -> Iterator[Capture]:
        """Captures of ``shards`` in ``rng``, in key order, a page at a time by keyset paging."""
        where = "shard = s.shard AND (urlkey, ts, file, pos) > (%(k)s, %(t)s, %(f)s, %(p)s)"
        params: dict[str, object] = {"shards": shards, "page": _PAGE}
        if rng.hi is not None and rng.hi.endswith("\0"):  # PostgreSQL text holds no NUL: "< k\0" is "<= k"
            where += " AND urlkey <= %(hi)s"
            params["hi"] = rng.hi[:-1]
        elif rng.hi is not None:
            where += " AND urlkey < %(hi)s"
            params["hi"] = rng.hi
        if rng.allowed is not None:
            where += " AND substr(urlkey, %(cut)s, 1) = ANY(%(allowed)s)"
            params.update(cut=rng.cut, allowed=list(rng.allowed))
        order = "ORDER BY urlkey, ts, file, pos LIMIT %(page)s"
        sql = (f"SELECT c.* FROM unnest(%(shards)s::integer[]) AS s(shard) CROSS JOIN LATERAL"
               f" (SELECT {_COLUMNS} FROM catalog_captures WHERE {where} {order}) c {order}")
        last: Sequence[object] = (rng.lo, "", -1, -1)
        while True:
            params.update(k=last[0], t=last[1], f=last[2], p=last[3])
            rows = self._db.read(sql, params)
            yield from self._captures(rows)
            if len(rows) < _PAGE:
                return
            last = rows[-1][:4]

    def _walk(self, shard: int, key: str, at: str, forward: bool) -> Iterator[Capture]:
        sql = _FORWARD if forward else _BACKWARD
        last: Sequence[object] = (at, -1, -1) if forward else (at, ABOVE, ABOVE)
        size = 1
        while True:
            rows = self._db.read(sql, (shard, key, *last, size))
            yield from self._captures(rows)
            if len(rows) < size:
                return
            last = rows[-1][1:4]
            size = min(size * 10, _PAGE)

    def _span_counts(self, shard: int, key: str, digits: int, from_: str, to: str
                     ) -> Iterator[tuple[str, int]]:
        last: Sequence[object] = (from_, -1, -1)
        while True:
            ends = self._db.read(_CHUNK_END, (shard, key, *last, to, TALLY_ROWS - 1))
            end = ends[0] if ends else None
            bound = (to, ABOVE, ABOVE) if end is None else tuple(end)
            counts = self._db.read(_CHUNK_COUNTS, (digits, shard, key, *last, *bound))
            yield from ((span, int(count)) for span, count in counts)
            if end is None:
                return
            last = bound

    def _captures(self, rows: Sequence[_Row]) -> builtins.list[Capture]:
        names = self._file_names
        unknown = list({row[2] for row in rows} - names.keys())
        if unknown:  # files added since we last looked, maybe by another process
            names.update(self._db.read("SELECT id, name FROM catalog_files WHERE id = ANY(%s)",
                                       (unknown,)))
        return [
            Capture(urlkey, ts, url, status, mime, digest, redirect, names[file], pos, length,
                    "revisit" if revisit else "response", labels or "")
            for urlkey, ts, file, pos, url, status, mime, digest, redirect, length, revisit, labels
            in rows
        ]
