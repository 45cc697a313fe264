"""The one way archiver opens, writes and closes its SQLite files (site queues, catalog shards, DNS
history, the links batch's state, the sites' inboxes).

- **Writers** get WAL mode with ``synchronous=NORMAL`` (the SQLite documentation's pairing: a commit
  is durable at the next checkpoint, and readers never wait for a writer), autocommit outside
  explicit transactions, and ``transaction()``: ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any
  exception. IMMEDIATE takes the write lock at the start, so two writers never deadlock upgrading a
  read lock. ``transaction(durable=True)`` commits with ``synchronous=FULL`` (the WAL is fsynced at
  the commit): for a caller that promises its rows survive a power loss once it returns.
- **Readers** open the file read-only (``mode=ro``): they cannot write it by mistake, and they work on
  a read-only mount.
- **Closing** a writer turns the file back to rollback-journal mode (best effort: another connection
  may hold it, and then it stays in WAL until that one closes). A WAL file is readable on a read-only
  file system only while its ``-shm`` index exists, so this keeps the archive readable by the replay
  under systemd's ``ReadOnlyPaths=`` when no writer runs. The next writer switches back to WAL.
- **Busy timeouts** are SQLite's wait for another process's write lock; past them the statement
  raises "database is locked". They are short where a caller can come back later and long where
  giving up would lose work:

  ================  =======  ================================================================
  store             timeout  why
  ================  =======  ================================================================
  site queue        30 s     claims and outcomes are retried by the crawler (``store.offloop``)
  catalog shard     60 s     a batch of entries whose records are already durable
  DNS history       60 s     an observation; the crawler skips one that gives up
  links state       60 s     a checkpoint of the batch; a rerun redoes it
  site inboxes      60 s     a links checkpoint's appends (a rerun redoes them), a seeds run's,
                             a merge's read and delete (the rows stay until the delete is done)
  inbox probe       0 s      a crawler's event loop asks whether a site's inbox has rows; busy
                             answers "maybe", and the merge then waits in a worker thread
  ================  =======  ================================================================

  The crawler makes every one of these calls in a worker thread, so a wait never holds its event
  loop; only the inbox probe runs on the loop, and it never waits.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

SITE_QUEUE_TIMEOUT = 30.0
CATALOG_TIMEOUT = 60.0
DNS_HISTORY_TIMEOUT = 60.0
LINKS_STATE_TIMEOUT = 60.0
INBOX_TIMEOUT = 60.0
INBOX_PROBE_TIMEOUT = 0.0
# Page cache of the files a links checkpoint writes a row of every site into (site queues, inboxes,
# the links state): one connection each per process.
SITES_CACHE_MIB = 64
# Rows per statement of ``insert_rows``: a third less CPU per row than a statement per row, alike
# from 16 to 256 rows (50,000 inbox rows of a links checkpoint).
ROWS_PER_STATEMENT = 64


def open_writer(path: Path, timeout: float, *, wal: bool = True, cache_mib: int = 0,
                page_size: int = 0, attach_uris: bool = False) -> sqlite3.Connection:
    """A read-write connection to ``path`` (created if absent), usable from any one thread at a
    time; ``wal=False`` leaves the journal mode as it is (a file being built). ``cache_mib``: a
    page cache of up to that size instead of SQLite's 2 MiB, for a file written all over at once
    (a links checkpoint's rows for every site: it took 40 % longer with the default at 100,000
    sites). ``page_size``: the page size of a file created here (SQLite's is 4 KiB; a file
    that exists keeps its own). ``attach_uris``: ``ATTACH`` takes ``file:`` URIs (``read_only``
    names), and ``path`` is made absolute so that it is never read as one. A file SQLite cannot
    use (not a database, say) raises its error with the file's name in front."""
    conn = sqlite3.connect(Path(path).resolve() if attach_uris else path, timeout=timeout,
                           uri=attach_uris, isolation_level=None, check_same_thread=False)
    try:
        if page_size:
            conn.execute(f"PRAGMA page_size = {int(page_size)}")
        if wal:
            with contextlib.suppress(sqlite3.OperationalError):  # a reader holds it: stay as is
                conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        if cache_mib:
            conn.execute(f"PRAGMA cache_size = {-1024 * cache_mib}")
    except sqlite3.DatabaseError as e:
        conn.close()
        raise _naming(e, path) from e
    except BaseException:
        conn.close()
        raise
    return conn


def _naming(error: sqlite3.DatabaseError, path: Path) -> sqlite3.DatabaseError:
    """``error`` again, its message led by the file's name (SQLite's own never names it), its
    codes kept (``store.offloop.is_busy`` reads them)."""
    named = type(error)(f"{path}: {error}")
    named.sqlite_errorcode, named.sqlite_errorname = error.sqlite_errorcode, error.sqlite_errorname
    return named


def read_only(path: Path) -> str:
    """``path`` as a URI SQLite opens read-only (for ``open_reader``, or ``ATTACH`` on a
    connection that takes URIs): a transaction of its connection then never locks the file for
    writing, not even ``BEGIN IMMEDIATE``."""
    return f"{Path(path).resolve().as_uri()}?mode=ro"


def open_reader(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection to the existing file ``path``; a file that is no database (or
    whose header is damaged) raises its error here, named as ``open_writer`` names it (a busy
    file is left to the caller's first statement)."""
    uri = read_only(path)
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute("PRAGMA schema_version")  # reads the file's header
    except sqlite3.OperationalError:
        pass
    except sqlite3.DatabaseError as e:
        conn.close()
        raise _naming(e, path) from e
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; ``ROLLBACK`` and re-raise on any exception. ``durable``:
    the commit fsyncs the WAL, so the transaction survives a power loss once this returns."""
    if durable:
        conn.execute("PRAGMA synchronous=FULL")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        if durable:
            conn.execute("PRAGMA synchronous=NORMAL")


def insert_rows(conn: sqlite3.Connection, insert: str, rows: Sequence[Sequence[object]],
                upsert: str = "") -> None:
    """``insert`` (``INSERT INTO t (a, b)``, no VALUES) of ``rows``, each of one value per column,
    then ``upsert`` (an ``ON CONFLICT`` clause naming the row's values as ``excluded.*`` only):
    what ``executemany`` of one row a statement does, rows in the same order, with
    ROWS_PER_STATEMENT rows a statement."""
    if not rows:
        return
    row = f"({', '.join('?' * len(rows[0]))})"
    full = len(rows) - len(rows) % ROWS_PER_STATEMENT
    if full:
        values = list(itertools.chain.from_iterable(rows[:full]))
        step = len(rows[0]) * ROWS_PER_STATEMENT  # the values of one statement
        conn.executemany(f"{insert} VALUES {', '.join([row] * ROWS_PER_STATEMENT)} {upsert}",
                         [values[i:i + step] for i in range(0, len(values), step)])
    conn.executemany(f"{insert} VALUES {row} {upsert}", rows[full:])


def close(conn: sqlite3.Connection, *, writer: bool) -> None:
    """Close; a writer first leaves the file in rollback-journal mode (see the module docstring)."""
    if writer:
        with contextlib.suppress(sqlite3.OperationalError):
            conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
