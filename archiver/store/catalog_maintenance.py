"""Catalog maintenance: rebuild from the WARC files, verify against them, export as CDXJ.

``reindex`` builds the new catalog beside the live one and swaps it in only when every file was
read, so a truncated or foreign file stops it with nothing written. Run it with the crawlers
stopped: they feed the live catalog.
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
from typing import TextIO

from archiver.store.catalog import Capture, Catalog
from archiver.store.interfaces import CatalogStore
from archiver.store.objectstore import NoSuchObject, ObjectRangeError, ObjectStore, open_object
from archiver.store.warcindex import (
    Stored,
    WarcError,
    index_stream,
    index_warc,
    parse_record,
    read_record,
)

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

    def __init__(self, total: int, what: str, out: TextIO = sys.stderr, every: float = 5.0) -> None:
        self.total, self.what, self.out, self.every = max(total, 1), what, out, every
        self.started = self.last = time.monotonic()
        self.tty = out.isatty()

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


def reindex(root: Path, shards: int, paths: list[Path],
            progress: Callable[[int, int], None] | None = None) -> int:
    """Rebuild ``<root>/catalog`` from ``paths`` alone; returns the number of entries.

    Raises :class:`WarcError` (and leaves the live catalog untouched) when a file cannot be read.
    """
    building = root / "catalog.reindex"
    shutil.rmtree(building, ignore_errors=True)
    catalog = Catalog(building, shards)
    entries = done = 0
    try:
        for path in paths:
            batch: list[Capture] = []
            for capture in index_warc(path):
                batch.append(capture)
                if len(batch) >= BATCH:
                    entries += catalog.add(batch)
                    batch = []
            entries += catalog.add(batch)
            done += path.stat().st_size
            if progress:
                progress(done, entries)
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


def verify(warcs: Path, catalog: CatalogStore, paths: Iterable[Path]) -> Verification:
    """Check every entry against its record, and every response/revisit record against the catalog."""
    result = Verification()
    indexed: set[tuple[str, int]] = set()
    for entry in catalog.iter_all():
        result.entries += 1
        indexed.add((entry.filename, entry.offset))
        where = f"{entry.filename}:{entry.offset}"
        try:
            stored = read_record(warcs, entry.filename, entry.offset, entry.length)
        except WarcError as e:
            result.bad_entries.append(f"{entry.timestamp} {entry.url}: {e}")
            continue
        if stored.url != entry.url or stored.rectype != entry.rectype:
            result.bad_entries.append(f"{entry.timestamp} {entry.url}: {where} holds a "
                                      f"{stored.rectype} record of {stored.url}")
    for path in paths:
        try:
            for capture in index_warc(path):
                result.records += 1
                if (capture.filename, capture.offset) not in indexed:
                    result.unindexed.append(f"{capture.filename}:{capture.offset} "
                                            f"{capture.timestamp} {capture.url}")
        except WarcError as e:
            result.unreadable.append(str(e))
    return result


def export_cdxj(catalog: CatalogStore, out: TextIO) -> int:
    """Write every entry as one CDXJ index sorted as text (as ``sort`` would), for pywb.

    The catalog orders by (urlkey, timestamp); captures sharing both (a retry within one second)
    are ordered by their whole line here.
    """
    lines = 0
    for _, group in itertools.groupby(catalog.iter_all(), key=lambda c: (c.urlkey, c.timestamp)):
        for line in sorted(c.to_cdxj() for c in group):
            out.write(line)
            out.write("\n")
            lines += 1
    return lines


class WarcFiles:
    """The WARC bundles in the folder ``directory``: read one record, list the files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def read(self, filename: str, offset: int, length: int) -> Stored:
        return read_record(self.directory, filename, offset, length)

    def paths(self, pattern: str | None = None, *, include_open: bool = False) -> list[Path]:
        return warc_paths(self.directory, pattern, include_open=include_open)


class ObjectWarcs:
    """The closed WARC bundles in an object store (keys ``under + name``): read one record by
    byte range, list the bundles, index one.

    Not yet a :class:`~archiver.store.interfaces.WarcReader`: that protocol's ``paths`` returns
    local files, which an object store has not; ``names``, ``size`` and ``index`` stand in.
    """

    def __init__(self, store: ObjectStore, under: str = "") -> None:
        self.store = store
        self.under = under

    def _key(self, filename: str) -> str:
        if "/" in filename or filename.startswith("."):
            raise WarcError(f"bad WARC file name {filename!r}")
        return self.under + filename

    def read(self, filename: str, offset: int, length: int) -> Stored:
        """The record at ``offset`` (``length`` bytes, one gzip member): one range request."""
        key = self._key(filename)
        where = self.store.location(key)
        try:
            data = self.store.read(key, offset, length)
        except NoSuchObject:
            raise WarcError(f"{where}: no such WARC file") from None
        except ObjectRangeError:
            size = self.store.size(key) or 0
            raise WarcError(f"{where}: record at {offset} is cut short "
                            f"({max(min(size - offset, length), 0)} of {length} bytes)") from None
        return parse_record(data, where, offset)

    def names(self, pattern: str | None = None) -> list[str]:
        """The closed bundles' names (``pattern``: a glob on the name), sorted."""
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
