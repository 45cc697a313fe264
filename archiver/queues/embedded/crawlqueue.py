"""One site's crawl queue on disk: an append-only log of URLs, a cursor, and an inbox.

A site's inbox holds the URLs other processes queued for it (the links batch, ``archiver seeds``
while a crawler holds the site): rows of the one inbox database ``<root>/crawl-queues/inbox.sqlite``
(archiver.queues.embedded.inboxes), so appending to a new site creates no directory and no file. The queue
merges them into its log through its bitmap when it opens and whenever it runs dry, so the log has
one writer and external URLs are deduplicated like discovered ones.

Files in a site's directory (created when its queue is first opened):

``queue.log``
    One ``depth<TAB>url\\n`` line per queued URL, in discovery order. The log alone is the truth:
    the Bloom bitmap that deduplicates URLs is rebuilt from it on every open, so the bitmap is never
    saved and can never disagree with the queue.
``cursor``
    How far the crawl got (the log offset just after the last finished entry) and the site's page
    and byte totals. Two fixed-width slots, each with a sequence number and a CRC-32, written
    alternately by one ``pwrite``: a crash mid-write tears at most the slot being written, and the
    other still holds the previous record (as LMDB alternates its two meta pages). The slots sit
    512 bytes apart, in different disk sectors.
``inbox``
    Left by earlier versions, which kept each site's inbox as a file of ``depth<TAB>url\\n``
    lines: merged like the database's rows (before them), and emptied once merged. Nothing
    writes one any more.
``done``
    Entries past the cursor that are already done: crash recovery (``archiver.crawl.recovery``) found
    their WARC records complete but could not move the cursor over them, because an entry before
    them has no record; ``next`` skips them. A first line ``sequence cursor pages bytes`` (the
    cursor record recovery writes next), then one log offset (an entry's end) a line. Replaced
    whole (write, fsync, rename) before that cursor record, so if the cursor write is lost the
    file's newer sequence number makes its cursor and totals count; removed by ``restart``.
``restarted``
    The wall-clock time (ns) of the last ``restart``: crash recovery ignores this site's records
    older than that, which belong to the visit before the recrawl.
``budget``
    The site's daily page count for its sheet's budget (archiver.web.sheets): the day and the
    pages fetched that day, in two slots as the cursor's, written by one ``pwrite`` per page (a
    killed process loses none) and fsynced with the log. Only a site with a budget has one.
``decisions``, ``decisions.1``
    The site's decision log (archiver.queues.decisions): URLs the crawl did not capture, and why.

Recovery: a log tail without its newline (a crash mid-append) and any unparsable lines at the end
are truncated; an unparsable line inside the log is skipped. A cursor past the log's end (the
cursor reached the disk, the log's tail did not) or between two lines falls back to the nearest
line start before it. If neither cursor slot is valid the crawl restarts at the first entry with
zero totals: fetching some pages twice is the safe direction for an archive, skipping is not.
Entries handed out but not committed are handed out again after a restart (at-least-once).
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar
from urllib.parse import quote, unquote

import mmh3

from archiver.queues.bloom import GrowingBloom
from archiver.queues.decisions import Decision, DecisionLog, read_decisions
from archiver.queues.embedded.inboxes import INBOXES, InboxDatabase, SiteInbox
from archiver.queues.models import CrawlQueueBusy, Entry, QueuePosition, parse_entry
from archiver.store.durable import SyncJob, fsync_all, fsync_directory
from archiver.store.layout import CRAWL_QUEUES, folder

LOG = "queue.log"
CURSOR = "cursor"
INBOX = "inbox"  # an earlier version's inbox file
DONE = "done"
RESTARTED = "restarted"
BUDGET = "budget"

# Cursor slot: sequence, cursor, pages, bytes, then the CRC-32 of those 32 bytes.
_SLOT = struct.Struct("<QQQQ")
_SLOT_SIZE = _SLOT.size + 4
_SLOT_OFFSETS = (0, 512)
_READ_BUFFER = 65_536
# Longest file name on Linux file systems (ext4, xfs, btrfs: NAME_MAX).
_NAME_MAX = 255


def queue_dir(root: Path, origin: str) -> Path:
    """``<root>/crawl-queues/<2 hex digits of mmh3(origin)>/<scheme,host[,port]>``, percent-escaped
    (``frontier/`` in an archive laid out before layout version 2: archiver.store.layout).

    The name is reversible (``queue_origin``) and holds only ``[A-Za-z0-9_.~%,-]``; the hash prefix
    spreads sites over 256 folders. ValueError for a malformed origin or one too long for a name.
    """
    bucket = f"{mmh3.hash(origin, signed=False) & 0xFF:02x}"
    return folder(root, CRAWL_QUEUES) / bucket / _queue_name(origin)


def _queue_name(origin: str) -> str:
    """The last component of ``queue_dir``; ValueError if ``origin`` can have none."""
    scheme, sep, hostport = origin.partition("://")
    if not sep or not scheme or not hostport or any(c in hostport for c in "/?#@"):
        raise ValueError(f"not an origin: {origin!r}")
    if hostport.startswith("["):
        host, bracket, rest = hostport.partition("]")
        host += bracket
        port = rest.removeprefix(":") if rest.startswith(":") else None
        if not bracket or (rest and port is None):
            raise ValueError(f"not an origin: {origin!r}")
    else:
        host, colon, port = hostport.partition(":")
        port = port if colon else None
    parts = [scheme, host] if port is None else [scheme, host, port]
    if not all(parts):
        raise ValueError(f"not an origin: {origin!r}")
    name = ",".join(quote(part, safe="") for part in parts)
    if len(name) > _NAME_MAX:
        raise ValueError(f"origin too long for a directory name: {origin[:80]!r}...")
    return name


def queue_origin(directory: Path) -> str:
    """The origin whose ``queue_dir`` is ``directory`` (its last path component)."""
    parts = [unquote(part) for part in directory.name.split(",")]
    if len(parts) not in (2, 3):
        raise ValueError(f"not a crawl-queue directory name: {directory.name!r}")
    scheme, host = parts[0], parts[1]
    return f"{scheme}://{host}" + (f":{parts[2]}" if len(parts) == 3 else "")


def position_in(entries: Iterable[Entry], cursor: int, url: str) -> QueuePosition | None:
    """Where ``url`` stands among a queue's ``entries`` (log order) given its ``cursor``: its first
    entry not yet handled (a requeued URL is in the log twice), else its last; None if absent."""
    found: QueuePosition | None = None
    pending = 0
    for entry in entries:
        done = entry.end <= cursor
        if not done:
            pending += 1
        if entry.url == url and (found is None or found.done):
            found = QueuePosition(entry.depth, done, 0 if done else pending - 1, 0)
    return None if found is None else found._replace(pending=pending)


def _check(url: str, depth: int) -> None:
    if depth < 0 or not url or "\n" in url:
        raise ValueError(f"cannot queue {url!r} at depth {depth}")


def _line(url: str, depth: int) -> bytes:
    _check(url, depth)
    return f"{depth}\t{url}\n".encode()


def read_slots(fd: int) -> tuple[int, int, int, int]:
    """(sequence, a, b, c) from the newest valid of a file's two slots; all zero if none is.

    The cursor file holds (cursor, pages, bytes); ``archiver.crawl.recovery`` keeps its commit point
    in the same format."""
    best = (0, 0, 0, 0)
    for offset in _SLOT_OFFSETS:
        raw = os.pread(fd, _SLOT_SIZE, offset)
        if len(raw) != _SLOT_SIZE:
            continue
        body, crc = raw[: _SLOT.size], int.from_bytes(raw[_SLOT.size :], "little")
        if zlib.crc32(body) == crc:
            record = _SLOT.unpack(body)
            best = max(best, record)
    return best


def write_slot(fd: int, seq: int, a: int, b: int, c: int) -> None:
    """Write (a, b, c) with sequence ``seq`` into the slot ``seq`` selects (one pwrite)."""
    body = _SLOT.pack(seq, a, b, c)
    os.pwrite(fd, body + zlib.crc32(body).to_bytes(4, "little"), _SLOT_OFFSETS[seq % 2])


def _replace(path: Path, data: bytes) -> None:
    """Replace ``path`` whole and durably: write a temporary file, fsync, rename, fsync the folder."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_directory(path.parent)


def _read_done(directory: Path) -> tuple[tuple[int, int, int, int], set[int]]:
    """The done file's (sequence, cursor, pages, bytes) and entry ends; zeros and none if absent."""
    try:
        lines = (directory / DONE).read_text("ascii").splitlines()
    except FileNotFoundError:
        return (0, 0, 0, 0), set()
    head = lines[0].split() if lines else []
    if len(head) != 4 or not all(field.isdigit() for field in head):
        return (0, 0, 0, 0), set()  # not written by us: the cursor file alone decides
    seq, cursor, pages, bytes_ = map(int, head)
    return (seq, cursor, pages, bytes_), {int(line) for line in lines[1:] if line.isdigit()}


def read_log(directory: Path) -> Iterator[Entry]:
    """The entries of a site's log in order, read without opening the queue (nothing is written,
    no lock taken): the lines ``CrawlQueue.open`` would keep (an unparsable line is skipped, a
    tail without its newline ignored)."""
    try:
        log = (directory / LOG).open("rb", buffering=_READ_BUFFER)
    except FileNotFoundError:
        return
    with log:
        yield from _entries_from(log, 0)


def _entries_from(log: BinaryIO, start: int) -> Iterator[Entry]:
    """The entries of an open log from offset ``start`` (a line start) to its last whole line."""
    log.seek(start)
    end = start
    for line in log:
        if not line.endswith(b"\n"):
            return
        end += len(line)
        entry = parse_entry(line)
        if entry is not None:
            yield Entry(entry[0], entry[1], end)


def read_cursor(directory: Path) -> tuple[int, int, int]:
    """The (cursor, pages, bytes) ``CrawlQueue.open`` would start from: the newer of the cursor
    file's record and the done file's; zeros if neither holds one."""
    _, cursor, pages, bytes_ = max(_slots_of(directory / CURSOR), _read_done(directory)[0])
    return cursor, pages, bytes_


def read_budget(directory: Path) -> tuple[int, int]:
    """The (day, pages) of a site's daily budget count, read without opening the queue; (0, 0)
    if it has none."""
    _, day, pages, _ = _slots_of(directory / BUDGET)
    return day, pages


def _slots_of(path: Path) -> tuple[int, int, int, int]:
    """``read_slots`` of the file at ``path``, read-only; all zero if it is absent."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0, 0, 0, 0
    try:
        return read_slots(fd)
    finally:
        os.close(fd)


def inbox_database(root: Path, *, checkpoints: bool = True) -> InboxDatabase:
    """The inbox database of the archive at ``root`` (not opened yet: its first use does)."""
    return InboxDatabase(folder(root, CRAWL_QUEUES) / INBOXES, checkpoints=checkpoints)


def read_inbox(directory: Path, inbox: SiteInbox | None = None) -> Iterator[tuple[str, int]]:
    """The (url, depth) of a site's inbox, as a merge would read them, without merging: the lines
    of an earlier version's inbox file in ``directory``, then those of its rows in ``inbox``."""
    try:
        data = (directory / INBOX).read_bytes()
    except FileNotFoundError:
        data = b""
    rows = inbox.take() if inbox is not None else None
    yield from _inbox_entries(_whole_lines(data) + (rows[1] if rows else b""))


def _whole_lines(data: bytes) -> bytes:
    """``data`` up to its last newline: a writer that died mid-line left a fragment after it."""
    return data[: data.rfind(b"\n") + 1]


def _inbox_entries(data: bytes) -> Iterator[tuple[str, int]]:
    for line in data.splitlines(keepends=True):
        entry = parse_entry(line) if line.endswith(b"\n") else None
        if entry is not None:
            yield entry


def read_restarted(directory: Path) -> float | None:
    """When the queue in ``directory`` was last restarted (seconds since the epoch), or None."""
    try:
        text = (directory / RESTARTED).read_text("ascii").strip()
    except FileNotFoundError:
        return None
    return int(text) / 1e9 if text.isdigit() else None


@dataclass
class Inbox:
    """An inbox taken for a merge: the lines taken, the highest inbox-database row they came from
    (0 if none), and an earlier version's inbox file, open and locked, if it had lines."""

    data: bytes
    last_row: int
    file: BinaryIO | None

    def release(self) -> None:
        """The merge failed: let go of the file; the file and the rows keep their lines for the
        next merge."""
        if self.file is not None:
            self.file.close()


class CrawlQueue:
    """One site's crawl queue. Not thread-safe; one open CrawlQueue per directory (flock)."""

    def __init__(
        self,
        directory: Path,
        bloom: GrowingBloom,
        writer: BinaryIO,
        reader: BinaryIO,
        cursor_fd: int,
        inbox: SiteInbox | None,
        decisions: DecisionLog,
    ) -> None:
        self.directory = directory
        self._decisions = decisions
        self._inbox = inbox  # the site's rows in the inbox database
        self.cursor = 0
        self.pages = 0
        self.bytes = 0
        self._bloom = bloom
        self._writer = writer  # O_APPEND, holds the flock
        self._reader = reader
        self._cursor_fd = cursor_fd
        self._seq = 0
        self._count = 0  # parsable entries in the log
        self._handed = 0  # of which handed out by next()
        self._pos = 0  # log offset after the last entry handed out
        self._dirty = False  # the writer holds lines not yet written to the log
        self._new_dirs: list[Path] = []  # directories whose new entries sync() must make durable
        self._saved = (0, 0, 0)  # the mark the cursor file holds
        self._done: set[int] = set()  # ends of entries past the open-time cursor known done
        self._budget_fd: int | None = None  # the budget file, opened on first use
        self._budget = (0, 0, 0)  # its (sequence, day, pages)

    @classmethod
    def open(cls, directory: Path, *, bloom_bits: int, max_fp: float,
             inbox: SiteInbox | None = None, max_decisions: int = 0) -> CrawlQueue:
        """Open (creating if absent) the queue in ``directory``; rebuild its bitmap from the log
        (``crawl.site_bitmap_bits`` and ``crawl.site_bitmap_max_fp`` size a new one) and merge
        its inbox: an inbox file left in ``directory``, and the rows of ``inbox``.
        ``max_decisions`` bounds the site's decision log (0: ``decide`` logs nothing)."""
        bloom = GrowingBloom(initial_bits=bloom_bits, max_fp=max_fp)
        new_dirs = _make_dirs(directory)
        new_log = not (directory / LOG).exists()
        with ExitStack() as stack:
            fd = os.open(directory / LOG, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            writer = stack.enter_context(open(fd, "ab"))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise CrawlQueueBusy(f"crawl queue {directory} is already open") from None
            cursor_fd = os.open(directory / CURSOR, os.O_RDWR | os.O_CREAT, 0o644)
            stack.callback(os.close, cursor_fd)
            reader = stack.enter_context(open(directory / LOG, "rb", buffering=_READ_BUFFER))
            self = cls(directory, bloom, writer, reader, cursor_fd, inbox,
                       DecisionLog(directory, max_decisions))
            record, done = _read_done(directory)
            self._seq, cursor, self.pages, self.bytes = max(read_slots(cursor_fd), record)
            self._rebuild(cursor, done)
            self._saved = (self.cursor, self.pages, self.bytes)
            self._new_dirs = ([directory] if new_log else []) + new_dirs
            self._merge_inbox()
            stack.pop_all()
        return self

    def _rebuild(self, cursor: int, done: set[int]) -> None:
        """Fill the bitmap from every log line, repair the tail, put the reader at the cursor.
        Entries past the cursor whose end is in ``done`` count as handed out (``next`` skips them)."""
        reader, bloom = self._reader, self._bloom
        offset = good_end = start = handed = 0
        for line in reader:
            if not line.endswith(b"\n"):
                break
            end = offset + len(line)
            if end <= cursor:
                start = end
            entry = parse_entry(line)
            if entry is not None:
                bloom.add(entry[0])
                self._count += 1
                good_end = end
                if end <= cursor:
                    handed += 1
                elif end in done:
                    self._done.add(end)
                    handed += 1
            offset = end
        if os.fstat(self._writer.fileno()).st_size > good_end:
            os.ftruncate(self._writer.fileno(), good_end)
        self._pos = self.cursor = min(start, good_end)
        self._handed = handed
        reader.seek(self._pos)

    def add(self, url: str, depth: int) -> bool:
        """Queue ``url`` unless the bitmap has seen it; True if it was appended to the log."""
        _check(url, depth)
        if not self._bloom.add(url):
            return False
        self._writer.write(f"{depth}\t{url}\n".encode())
        self._dirty = True
        self._count += 1
        return True

    def known(self, url: str) -> bool:
        """Has the bitmap seen ``url`` (queued, or a false positive)?"""
        return url in self._bloom

    def decide(self, url: str, kind: str, detail: str = "") -> None:
        """Log why ``url`` is not captured (archiver.queues.decisions): written with the log."""
        self._decisions.add(Decision(time.time(), kind, url, detail))

    def requeue(self, url: str, depth: int) -> None:
        """Queue ``url`` again at the end of the log although the bitmap has seen it: the site
        asked us to come back later (429/503), and the URL must not be lost."""
        self._writer.write(_line(url, depth))
        self._dirty = True
        self._count += 1

    def next(self, *, merge: bool = True) -> Entry | None:
        """The next entry after those already handed out, or None when the queue is empty.

        When the log runs dry the inbox is merged first, unless ``merge`` is False: the crawler
        merges it itself (``take_inbox``, ``merge``, ``finish_inbox``), keeping the lock and the
        fsync off its event loop.
        """
        reader = self._reader
        while True:
            line = reader.readline()
            if not line.endswith(b"\n"):
                if line:  # the writer's buffer split this line; reread it once flushed
                    reader.seek(self._pos)
                if self._dirty:
                    self._flush()
                    continue
                if merge and self._merge_inbox():
                    continue
                return None
            self._pos += len(line)
            entry = parse_entry(line)
            if entry is not None and self._pos not in self._done:
                self._handed += 1
                return Entry(entry[0], entry[1], self._pos)

    def commit(self, entry: Entry, *, pages: int, bytes_: int) -> None:
        """Record, in memory, that ``entry`` is done and the site's totals so far.

        The cursor reaches the file only through ``save``, which the crawler calls once the WARC
        records of the entries committed up to a ``mark`` are fsynced (a group commit): a crash
        or power loss can then cost refetches, never a page the cursor says was archived.
        """
        # Write the queued links first: once the cursor has passed the page that found them,
        # only the log still has them (a process crash keeps written data, loses Python buffers).
        self._flush()
        self.cursor, self.pages, self.bytes = entry.end, pages, bytes_

    def mark(self) -> tuple[int, int, int]:
        """The committed position and totals now (cursor, pages, bytes), for a later ``save``."""
        self._flush()
        return self.cursor, self.pages, self.bytes

    def save(self, mark: tuple[int, int, int]) -> None:
        """Write a ``mark`` to the cursor file (one pwrite into the older slot; not fsynced)."""
        if mark == self._saved:
            return
        self._seq += 1
        self._write_slot(*mark)
        self._saved = mark

    def _write_slot(self, cursor: int, pages: int, bytes_: int) -> None:
        write_slot(self._cursor_fd, self._seq, cursor, pages, bytes_)

    def day_pages(self, day: int) -> int:
        """Pages counted for the daily budget on ``day`` (see archiver.web.sheets.Sheet.day_of)."""
        if self._budget_fd is None:
            self._budget_fd = os.open(self.directory / BUDGET, os.O_RDWR | os.O_CREAT, 0o644)
            self._budget = read_slots(self._budget_fd)[:3]
        _, counted_day, pages = self._budget
        return pages if counted_day == day else 0

    def count_day_page(self, day: int) -> None:
        """Count one page fetched on ``day`` (written at once; fsynced with the log)."""
        pages = self.day_pages(day) + 1
        assert self._budget_fd is not None
        self._budget = (self._budget[0] + 1, day, pages)
        write_slot(self._budget_fd, *self._budget, 0)

    def restart(self) -> None:
        """Start a new visit (a recrawl): the cursor goes back to the first entry, totals to zero.

        The log keeps every URL the site ever queued, so the recrawl fetches all of them again, in
        discovery order, and only links new since then are appended. Durable when this returns:
        first the done-set goes (it speaks of the last visit), then the restart time is written,
        then the cursor.
        """
        self._flush()
        self._remove_done()
        _replace(self.directory / RESTARTED, f"{time.time_ns()}\n".encode())
        self._seq += 1
        self._write_slot(0, 0, 0)
        self._saved = (0, 0, 0)
        os.fsync(self._cursor_fd)
        self._reader.seek(0)
        self._pos = self._handed = 0
        self.cursor = self.pages = self.bytes = 0
        self._done = set()

    @property
    def restarted_at(self) -> float | None:
        """When ``restart`` last ran (seconds since the epoch), or None if it never did."""
        return read_restarted(self.directory)

    def pending_entries(self) -> Iterator[tuple[Entry, bool]]:
        """The entries after the cursor in log order, each with whether it is already done (in
        the done-set), without handing them out."""
        self._flush()
        with (self.directory / LOG).open("rb", buffering=_READ_BUFFER) as log:
            for entry in _entries_from(log, self.cursor):
                yield entry, entry.end in self._done

    def recovered(self, cursor: int, done: Iterable[int], *, pages: int, bytes_: int) -> None:
        """Crash recovery: the entries up to ``cursor`` and those ending at ``done`` (ends from
        ``pending_entries``) have complete WARC records; the totals become ``pages``, ``bytes_``.

        Only right after ``open`` (nothing handed out). Durable when this returns, in this order:
        the log (with the links queued since open), the done file (with the new cursor record),
        the cursor file: a crash between the last two is undone by the done file's newer sequence
        number (see the module docstring).
        """
        if self._pos != self.cursor or cursor < self.cursor:
            raise ValueError("recovered() needs a fresh crawl queue and a cursor that moves forward")
        os.fsync(self.prepare_sync())
        remaining = {end for end in (*self._done, *done) if end > cursor}
        self._seq += 1
        if remaining:
            ends = "".join(f"{end}\n" for end in sorted(remaining))
            _replace(self.directory / DONE,
                     f"{self._seq} {cursor} {pages} {bytes_}\n{ends}".encode())
        self._write_slot(cursor, pages, bytes_)
        os.fsync(self._cursor_fd)
        if not remaining:
            self._remove_done()
        passed = self._entries_between(self.cursor, cursor)
        self._handed += passed - len(self._done) + len(remaining)
        self._saved = (cursor, pages, bytes_)
        self.cursor, self.pages, self.bytes, self._done = cursor, pages, bytes_, remaining
        self._pos = cursor
        self._reader.seek(cursor)

    def _entries_between(self, start: int, end: int) -> int:
        """Parsable entries whose lines lie between log offsets ``start`` and ``end``."""
        with (self.directory / LOG).open("rb", buffering=_READ_BUFFER) as log:
            log.seek(start)
            count, offset = 0, start
            for line in log:
                offset += len(line)
                if offset > end:
                    break
                if line.endswith(b"\n") and parse_entry(line) is not None:
                    count += 1
            return count

    def _remove_done(self) -> None:
        if (self.directory / DONE).exists():
            (self.directory / DONE).unlink()
            fsync_directory(self.directory)

    def sync(self) -> None:
        """Make the log and then the cursor durable (the cursor never runs ahead of its log)."""
        os.fsync(self.prepare_sync())
        os.fsync(self._cursor_fd)
        if self._budget_fd is not None:
            os.fsync(self._budget_fd)
        if (decisions := self._decisions.unsynced_descriptor()) is not None:
            fsync_all([decisions])

    def log_descriptor(self) -> int:
        """A duplicate of the log's descriptor, for a worker thread to fsync and close."""
        return os.dup(self._writer.fileno())

    def add_to(self, job: SyncJob) -> None:
        """Hand buffered lines to the OS; give ``job`` the log's descriptor (a duplicate) and the
        new directories whose entries must be made durable (fsynced in the job's thread)."""
        self._flush()
        job.fds.append(self.log_descriptor())
        if self._budget_fd is not None:
            job.fds.append(os.dup(self._budget_fd))
        if (decisions := self._decisions.unsynced_descriptor()) is not None:
            job.fds.append(decisions)
        job.directories.update(self._new_dirs)
        self._new_dirs = []

    def prepare_sync(self) -> int:
        """Hand buffered lines to the OS; the log's descriptor to fsync.

        The crawler fsyncs it in a worker thread so the event loop never waits on the disk. The
        cursor needs no fsync there: ``save`` writes it only once its pages are durable.
        """
        self._flush()
        for directory in self._new_dirs:
            fsync_directory(directory)
        self._new_dirs = []
        return self._writer.fileno()

    def close(self) -> None:
        """Write out the log and close; not fsynced (call ``sync`` first for that)."""
        try:
            self._flush()
        finally:
            self._decisions.close()
            self._reader.close()
            self._writer.close()
            os.close(self._cursor_fd)
            if self._budget_fd is not None:
                os.close(self._budget_fd)

    def __enter__(self) -> CrawlQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pending(self) -> int:
        """Entries in the log not yet handed out by next()."""
        return self._count - self._handed

    def __len__(self) -> int:
        return self._count

    def _flush(self) -> None:
        self._decisions.flush()
        if self._dirty:
            self._writer.flush()
            self._dirty = False

    def _merge_inbox(self) -> bool:
        """Move the inbox's lines into the log through the bitmap; True if any was new."""
        inbox = self.take_inbox()
        if inbox is None:
            return False
        try:
            added = self.merge(inbox)
        except BaseException:
            inbox.release()
            raise
        self.finish_inbox(inbox, added)
        return added

    def inbox_waiting(self) -> bool:
        """True if other processes left URLs in the inbox: one stat for an inbox file, and one
        indexed read of the inbox database that never waits (a busy database says True)."""
        try:
            if (self.directory / INBOX).stat().st_size > 0:
                return True
        except FileNotFoundError:
            pass
        return self._inbox is not None and self._inbox.waiting()

    def take_inbox(self) -> Inbox | None:
        """Read the inbox (blocking: the database may be busy): an inbox file's lines, locked
        until ``finish_inbox``, then the site's rows; None if both are empty."""
        file, data = self._take_inbox_file()
        try:
            rows = self._inbox.take() if self._inbox is not None else None
        except BaseException:
            if file is not None:
                file.close()
            raise
        last_row, lines = rows or (0, b"")
        if file is None and not lines:
            return None
        return Inbox(data + lines, last_row, file)

    def _take_inbox_file(self) -> tuple[BinaryIO | None, bytes]:
        """An earlier version's inbox file, open and locked, and its whole lines; (None, b"") if
        it is absent or empty."""
        try:
            file = (self.directory / INBOX).open("r+b")
        except FileNotFoundError:
            return None, b""
        try:
            fcntl.flock(file, fcntl.LOCK_EX)
            data = file.read()
        except BaseException:
            file.close()
            raise
        if not data:
            file.close()
            return None, b""
        return file, _whole_lines(data)

    def merge(self, inbox: Inbox) -> bool:
        """Add the inbox's lines to the log through the bitmap and hand them to the OS; True if
        any was new (then the log must be fsynced before the inbox is emptied)."""
        added = False
        for entry in _inbox_entries(inbox.data):
            if self.add(*entry):
                added = True
        self._flush()
        return added

    def finish_inbox(self, inbox: Inbox, added: bool) -> None:
        """Blocking: fsync the log if ``merge`` added lines, then empty the inbox: the file, and
        the rows taken (not those appended since). Lines must be durable in the log before they
        leave the inbox: if ``merge`` did not complete, call ``inbox.release()`` instead, which
        keeps them there."""
        try:
            if added:
                fsync_all([self.log_descriptor()])
            if inbox.file is not None:
                inbox.file.truncate(0)
        finally:
            inbox.release()
        if inbox.last_row and self._inbox is not None:
            self._inbox.delete(inbox.last_row)


def _make_dirs(directory: Path) -> list[Path]:
    """``mkdir -p``; return the directories that gained an entry (to fsync once files exist)."""
    changed = []
    top = directory
    while not top.exists():
        top = top.parent
        changed.append(top)
    directory.mkdir(parents=True, exist_ok=True)
    return changed


@dataclass(frozen=True)
class QueueNames:
    """The embedded crawl queues' rule for sites (``EmbeddedCrawlQueues.unfit``): a crawl queue is
    a folder named after its site (``queue_dir``), and a site whose name cannot be one has none.
    Picklable: the links batch's workers are given it."""

    root: Path
    # Origins this regex matches always have a name (at most 5 + 1 + 240 + 6 characters, none
    # escaped), so the links batch asks only about the others.
    ALWAYS_FIT: ClassVar[str] = r"^https?://[a-z0-9._~-]{1,240}(?::[0-9]{1,5})?$"

    def __call__(self, origin: str) -> str | None:
        try:
            queue_dir(self.root, origin)
        except ValueError as e:
            return str(e).partition(":")[0]
        return None


class EmbeddedCrawlQueues:
    """Every site's crawl queue as a folder under ``<root>/crawl-queues/`` (see ``queue_dir``), and
    their inboxes in ``<root>/crawl-queues/inbox.sqlite``."""

    def __init__(self, root: Path, *, bloom_bits: int, max_fp: float,
                 max_decisions: int = 0, bulk: bool = False) -> None:
        """``bulk``: for the links batch, which calls ``settle`` after its syncs."""
        self.root = root
        self.bloom_bits = bloom_bits
        self.max_fp = max_fp
        self.max_decisions = max_decisions
        self.inboxes = inbox_database(root, checkpoints=not bulk)

    def open(self, origin: str) -> CrawlQueue:
        return CrawlQueue.open(queue_dir(self.root, origin), bloom_bits=self.bloom_bits,
                               max_fp=self.max_fp, inbox=SiteInbox(self.inboxes, origin),
                               max_decisions=self.max_decisions)

    def position(self, origin: str, url: str) -> QueuePosition | None:
        """Where ``url`` stands in ``origin``'s queue, read without opening it (no lock taken;
        the cursor as last saved); None if it was never queued there."""
        if self.unfit(origin) is not None:
            return None
        directory = queue_dir(self.root, origin)
        return position_in(read_log(directory), read_cursor(directory)[0], url)

    def decisions(self, origin: str, url: str) -> list[Decision]:
        """The logged decisions about ``url`` in ``origin``'s decision log, oldest first."""
        if self.unfit(origin) is not None:
            return []
        return read_decisions(queue_dir(self.root, origin), url)

    def append(self, origin: str, entries: Iterable[tuple[str, int]], *, sync: bool = True) -> None:
        """Queue (url, depth) pairs in the inbox of ``origin`` (ValueError, and nothing queued, if
        one is malformed or no crawl queue can hold the origin); with ``sync`` False they wait in
        memory for ``sync``, which writes every site's in one transaction."""
        _queue_name(origin)  # the origin must be able to have a crawl queue
        self.append_lines({origin: b"".join(_line(url, depth) for url, depth in entries)}, sync=sync)

    def append_lines(self, lines: Mapping[str, bytes | memoryview], *, sync: bool = True) -> None:
        self.inboxes.stage(lines)
        if sync:
            self.inboxes.commit()

    def sync(self) -> None:
        self.inboxes.commit()

    def settle(self) -> None:
        self.inboxes.checkpoint()

    def close(self) -> None:
        """Close the inbox database (each queue's files are opened and closed by its own calls)."""
        self.inboxes.close()

    def unfit(self, origin: str) -> str | None:
        return QueueNames(self.root)(origin)

    def exists(self, origin: str) -> bool:
        return self.unfit(origin) is None and (queue_dir(self.root, origin) / LOG).exists()
