"""Catalog maintenance: rebuild from the WARC bundles, verify against them, export as CDXJ.

The bundles are reached through a :class:`~archiver.store.interfaces.WarcReader`: the files of a
folder (:class:`WarcFiles`) or the objects of an object store (:class:`ObjectWarcs`).
``reindex`` builds a new SQLite catalog beside the live one and swaps it in only when every
bundle was read, so a truncated or foreign file stops it with nothing written; run it with the
crawlers stopped, as they feed the live catalog. ``reindex_in_place`` rebuilds the PostgreSQL
catalog in one transaction, safe while crawlers run.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from archiver.store.embedded.catalog import Catalog
from archiver.store.interfaces import CatalogStore, WarcReader
from archiver.store.models import Capture
from archiver.store.objectstore import NoSuchObject, ObjectRangeError, ObjectStore, open_object
from archiver.store.warcindex import (
    HEAD_BYTES,
    OpenRecord,
    Stored,
    WarcError,
    final_name,
    http_head_of,
    index_stream,
    index_warc,
    locate,
    open_record,
    parse_record,
    read_head,
    read_raw,
    read_record,
)

if TYPE_CHECKING:
    from archiver.store.postgres.catalog import PgCatalog  # psycopg: only the shared stores load it

BATCH = 10_000


def warc_paths(warcs: Path, pattern: str | None = None, *, include_open: bool = False) -> list[Path]:
    """The bundles to read: ``pattern`` (a glob) or every closed bundle in the folder ``warcs``."""
    if pattern:
        paths = [Path(p) for p in glob.glob(pattern)]
    else:
        paths = list(warcs.glob("*.warc.gz"))
        if include_open:
            paths += warcs.glob("*.warc.gz.open")
    return sorted(p for p in paths if p.is_file())


class Progress:
    """A progress line on stderr: a bar on a terminal, a line every few seconds otherwise."""

    def __init__(self, total: int, what: str, out: TextIO | None = None, every: float = 5.0) -> None:
        self.total, self.what, self.every = max(total, 1), what, every
        self.out = sys.stderr if out is None else out  # (the one in force now, not at import)
        self.started = self.last = time.monotonic()
        self.tty = self.out.isatty()

    def update(self, done: int, entries: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < (0.2 if self.tty else self.every):
            return
        self.last = now
        share = min(done / self.total, 1.0)
        rate = entries / max(now - self.started, 1e-6)
        text = f"{self.what}: {share:6.1%} {done / 2**20:.1f}/{self.total / 2**20:.1f} MiB, " \
               f"{entries} entries, {rate:.0f} entries/s"
        if self.tty:
            bar = "#" * int(share * 30)
            self.out.write(f"\r[{bar:<30}] {text}")
            if force:
                self.out.write("\n")
        else:
            self.out.write(text + "\n")
        self.out.flush()


def _indexed(warcs: WarcReader, names: list[str],
             progress: Callable[[int, int], None] | None) -> Iterator[Capture]:
    """The entries of every bundle of ``names`` in turn, ``progress(bytes, entries)`` after each."""
    done = entries = 0
    for name in names:
        for capture in warcs.index(name):
            entries += 1
            yield capture
        done += warcs.size(name)
        if progress:
            progress(done, entries)


def reindex(root: Path, shards: int, warcs: WarcReader, names: list[str],
            progress: Callable[[int, int], None] | None = None) -> int:
    """Rebuild the SQLite catalog ``<root>/catalog`` from the bundles ``names`` alone; returns the
    number of entries.

    Raises :class:`WarcError` (and leaves the live catalog untouched) when a file cannot be read.
    """
    building = root / "catalog.reindex"
    shutil.rmtree(building, ignore_errors=True)
    catalog = Catalog(building, shards)
    entries = 0
    found = _indexed(warcs, names, progress)
    try:
        while batch := list(itertools.islice(found, BATCH)):
            entries += catalog.add(batch)
    except BaseException:
        catalog.close()
        shutil.rmtree(building, ignore_errors=True)
        raise
    catalog.close()
    live, old = root / "catalog", root / "catalog.old"
    shutil.rmtree(old, ignore_errors=True)
    if live.exists():
        live.rename(old)
    building.rename(live)
    shutil.rmtree(old, ignore_errors=True)
    return entries


def reindex_in_place(catalog: PgCatalog, warcs: WarcReader, names: list[str],
                     progress: Callable[[int, int], None] | None = None) -> int:
    """Rebuild the PostgreSQL catalog from the bundles ``names`` in the object store; returns the
    number of entries added.

    One transaction (:meth:`PgCatalog.replace`) removes the entries of those bundles and of every
    bundle the catalog names but the store no longer holds, and adds what the bundles hold. Why
    not a staging table swapped in: crawlers may run meanwhile and move the entries of newly
    shipped bundles into the live table, which a swap would lose; this transaction touches only
    the bundles it reads and the ones gone, and until it commits every reader sees the old
    entries. A bundle that cannot be read (WarcError) rolls it all back: the catalog is left as
    it was. The bundles gone are found by asking for the catalog's file names *before* listing
    the store: a crawler ships a bundle before its entries reach the catalog, so a name the
    catalog held then and the listing lacks is a bundle really gone, not one being shipped.
    """
    known = catalog.file_names()
    held = set(warcs.names())
    return catalog.replace({*names, *(known - held)}, _indexed(warcs, names, progress))


@dataclass
class Verification:
    """What ``verify`` found: entries that point at no good record, records not indexed."""

    entries: int = 0
    records: int = 0
    bad_entries: list[str] = field(default_factory=list)
    unindexed: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.bad_entries or self.unindexed or self.unreadable)


def _fingerprint(capture: Capture) -> int:
    """What an entry must agree on with its record (in a process's memory only)."""
    return hash((capture.url, _kind(capture.rectype), capture.length))


def _kind(rectype: str) -> str:
    """A record type as the catalog keeps it: revisit or not (a resource record is a response)."""
    return "revisit" if rectype == "revisit" else "response"


def verify(warcs: WarcReader, catalog: CatalogStore, names: Iterable[str]) -> Verification:
    """Check every entry against its record, and every response/revisit record of the bundles
    ``names`` against the catalog.

    Each bundle is read once, from start to end (one stream from an object store, not one range
    request per entry), keeping only a fingerprint of each record (URL, type, length) by
    (bundle, offset). An entry naming a bundle not read whole, or disagreeing with the
    fingerprint, is checked by reading its record alone, which says what is wrong; the records
    no entry names are reported from a second reading of just their bundles.
    """
    result = Verification()
    records: dict[tuple[str, int], int | None] = {}  # None: named by an entry already
    whole: set[str] = set()
    for name in names:
        try:
            found = {(c.filename, c.offset): _fingerprint(c) for c in warcs.index(name)}
        except WarcError as e:
            result.unreadable.append(str(e))
            continue
        whole.add(name)
        records.update(found)
    result.records = len(records)
    for entry in catalog.iter_all():
        result.entries += 1
        problem = _check_entry(warcs, entry, records, whole)
        if problem:
            result.bad_entries.append(f"{entry.timestamp} {entry.url}: {problem}")
    missed = {key for key, fingerprint in records.items() if fingerprint is not None}
    for name in sorted({name for name, _ in missed}):
        result.unindexed.extend(f"{c.filename}:{c.offset} {c.timestamp} {c.url}"
                                for c in warcs.index(name) if (c.filename, c.offset) in missed)
    return result


def _check_entry(warcs: WarcReader, entry: Capture, records: dict[tuple[str, int], int | None],
                 whole: set[str]) -> str | None:
    """What is wrong with ``entry`` (None: nothing), marking the record it names in ``records``."""
    key = (entry.filename, entry.offset)
    where = f"{entry.filename}:{entry.offset}"
    if entry.filename in whole:
        fingerprint = records.get(key, 0)
        if fingerprint == _fingerprint(entry):
            records[key] = None
            return None
        if fingerprint is None:
            return f"{where} is named by another entry too"
    try:
        stored = warcs.read(entry.filename, entry.offset, entry.length)
    except WarcError as e:
        return str(e)
    if stored.url != entry.url or _kind(stored.rectype) != _kind(entry.rectype):
        return f"{where} holds a {stored.rectype} record of {stored.url}"
    if entry.filename in whole:
        return f"{where}: the record there is not {entry.length} bytes long"
    return None


def export_cdxj(catalog: CatalogStore, out: TextIO) -> int:
    """Write every entry as one CDXJ index sorted as text (as ``sort`` would), for pywb.

    The catalog orders by (urlkey, timestamp); captures sharing both (a retry within one second)
    are ordered by their whole line here. A rendered page's screenshot and text are left out:
    their keys hold a space (archiver.store.catalogkeys), which CDXJ readers take for the end of
    the key; pywb finds their ``urn:`` records when it indexes the WARC files itself.
    """
    lines = 0
    entries = (c for c in catalog.iter_all() if " " not in c.urlkey)
    for _, group in itertools.groupby(entries, key=lambda c: (c.urlkey, c.timestamp)):
        for line in sorted(c.to_cdxj() for c in group):
            out.write(line)
            out.write("\n")
            lines += 1
    return lines


class WarcFiles:
    """The WARC bundles in the folder ``directory``, named by file name: a bundle still written
    (``.open``) by the name it will have once closed, as the catalog names it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._elsewhere: dict[str, Path] = {}

    def read(self, filename: str, offset: int, length: int) -> Stored:
        return read_record(self.directory, filename, offset, length)

    def open(self, filename: str, offset: int, length: int) -> OpenRecord:
        return open_record(self.directory, filename, offset, length)

    def read_head(self, filename: str, offset: int, length: int) -> bytes:
        return read_head(self.directory, filename, offset, length)

    def raw(self, filename: str, offset: int, length: int) -> bytes:
        return read_raw(self.directory, filename, offset, length)

    def names(self, pattern: str | None = None, *, include_open: bool = False) -> list[str]:
        """Every closed bundle in the folder (``include_open``: and the open ones), or the files
        the file-system glob ``pattern`` matches (``catalog reindex --warcs``), which may lie
        outside the folder: they are indexed where they are. WarcError if two of them share a
        name, which the catalog could not tell apart."""
        paths = warc_paths(self.directory, pattern, include_open=include_open)
        named: dict[str, Path] = {}
        for path in paths:
            name = final_name(path)
            if name in named:
                raise WarcError(f"{named[name]} and {path} would have the same name in the catalog")
            named[name] = path
        if pattern:
            self._elsewhere.update(named)
        return sorted(named)

    def _path(self, name: str) -> Path:
        return self._elsewhere.get(name) or locate(self.directory, name)

    def size(self, name: str) -> int:
        return self._path(name).stat().st_size

    def index(self, name: str) -> Iterator[Capture]:
        return index_warc(self._path(name), name)

    def location(self, name: str) -> str:
        return str(self._elsewhere.get(name) or self.directory / name)


class ObjectWarcs:
    """The closed WARC bundles in an object store (keys ``under + name``), a
    :class:`~archiver.store.interfaces.WarcReader`: read one record by byte range, list the
    bundles, index one as a stream of range reads."""

    def __init__(self, store: ObjectStore, under: str = "") -> None:
        self.store = store
        self.under = under

    def _key(self, filename: str) -> str:
        if "/" in filename or filename.startswith("."):
            raise WarcError(f"bad WARC file name {filename!r}")
        return self.under + filename

    def read(self, filename: str, offset: int, length: int) -> Stored:
        """The record at ``offset`` (``length`` bytes, one gzip member): one range request."""
        return parse_record(self.raw(filename, offset, length),
                            self.store.location(self._key(filename)), offset)

    def open(self, filename: str, offset: int, length: int) -> OpenRecord:
        """The record opened for reading: one range request, its body read as it goes."""
        key = self._key(filename)
        where = self.store.location(key)
        try:
            return OpenRecord(self.store.open_range(key, offset, length), where, offset)
        except NoSuchObject:
            raise WarcError(f"{where}: no such WARC file") from None

    def raw(self, filename: str, offset: int, length: int) -> bytes:
        """The record's bytes as stored: one range request."""
        key = self._key(filename)
        where = self.store.location(key)
        try:
            return self.store.read(key, offset, length)
        except NoSuchObject:
            raise WarcError(f"{where}: no such WARC file") from None
        except ObjectRangeError:
            size = self.store.size(key) or 0
            raise WarcError(f"{where}: record at {offset} is cut short "
                            f"({max(min(size - offset, length), 0)} of {length} bytes)") from None

    def read_head(self, filename: str, offset: int, length: int) -> bytes:
        """The record's HTTP head: a range request for its first bytes only, unless the head is
        longer than they hold."""
        key = self._key(filename)
        try:
            head = http_head_of(self.store.read(key, offset, min(length, HEAD_BYTES)))
            if head is None and length > HEAD_BYTES:
                head = http_head_of(self.store.read(key, offset, length), None)
        except (NoSuchObject, ObjectRangeError):
            head = None  # the whole read says what is wrong
        return head if head is not None else self.read(filename, offset, length).http_head

    def names(self, pattern: str | None = None, *, include_open: bool = False) -> list[str]:
        """The bundles' names (``pattern``: a glob on the name), sorted. An object store holds
        closed bundles only (``include_open`` changes nothing)."""
        names = [key[len(self.under):] for key in self.store.list(self.under)]
        return [n for n in names if "/" not in n and n.endswith(".warc.gz")
                and (pattern is None or fnmatch.fnmatchcase(n, pattern))]

    def size(self, filename: str) -> int:
        size = self.store.size(self._key(filename))
        if size is None:
            raise WarcError(f"{self.store.location(self._key(filename))}: no such WARC file")
        return size

    def index(self, filename: str) -> Iterator[Capture]:
        """Entries of every response and revisit record of the bundle (WarcError as index_warc)."""
        key = self._key(filename)
        try:
            with open_object(self.store, key) as f:
                yield from index_stream(f, filename, self.store.location(key))
        except NoSuchObject:
            raise WarcError(f"{self.store.location(key)}: no such WARC file") from None

    def location(self, name: str) -> str:
        return self.store.location(self._key(name))
