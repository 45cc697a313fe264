"""External-link spool files, written by crawlers for the external-link batch.

A crawler answers "seen it?" only for its own sites; every link that leaves a site is appended here,
one line each: ``URL <TAB> linking origin <TAB> 14-digit UTC time <TAB> hops <TAB> priority``, where
hops is the linking site's hop count (how many site-to-site links from a seed site it is, for
``scope.max_hops``) and priority the site priority the crawler gave the link (a finite float; the
batch keeps each site's highest). Lines of three fields, from before hops and priorities, still
read: as hops 0 and priority 0 (a linking site treated as a seed site: no link of an old spool is
dropped by ``scope.max_hops``). A spool file is named
``<process>-<yyyymmddhhmmss>-<serial>.tsv`` and carries an ``.open`` suffix while it is written, so the
batch never reads a file still growing. Files rotate by line count and age.

The batch reads closed files through :class:`SpoolDirectory` (the embedded mode: ``<root>/outlinks``)
or :class:`ObjectSpool` (several machines: each crawler ships its closed files to the object store
under ``outlinks/``, where the batch, on any machine, finds them); files it is done with are kept
under ``done/`` in both, for ``archiver links reshard``.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import IO, NamedTuple

from archiver.store.durable import Retired, SyncJob
from archiver.store.objectstore import NoSuchObject, ObjectStore, put

DONE = "done"  # the folder of spool files the links batch has read
OBJECT_PREFIX = "outlinks/"  # where closed spool files go in an object store
MAX_HOPS = 999_999_999  # the most a spool line's hops field holds (9 digits)


# The hops field: up to 9 ASCII digits. The priority field: a decimal number as Python writes a
# float (an optional sign, digits with an optional point, an optional exponent), finite.
HOPS = r"^[0-9]{1,9}$"
PRIORITY = r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?$"
_HOPS = re.compile(HOPS)
_PRIORITY = re.compile(PRIORITY)


class SpoolLine(NamedTuple):
    """One good spool line: the URL as written (the batch normalises it), the linking origin, the
    linking site's hop count and the link's priority."""

    url: str
    source: str
    hops: int
    priority: float


def parse_line(line: str) -> SpoolLine | str:
    """One spool line (of three or five fields), or why the line is unusable."""
    parts = line.rstrip("\n").split("\t")
    if len(parts) not in (3, 5):
        return f"expected 3 or 5 tab-separated fields, found {len(parts)}"
    url, source, when = parts[:3]
    if not source.startswith(("http://", "https://")) or "/" in source[8:]:
        return f"linking site {source[:80]!r} is not an origin"
    if len(when) != 14 or not when.isdigit():
        return f"time {when[:20]!r} is not 14 digits"
    if len(parts) == 3:
        return SpoolLine(url, source, 0, 0.0)
    hops, priority = parts[3:]
    if not _HOPS.match(hops):
        return f"hops {hops[:20]!r} is not a count of at most 9 digits"
    value = float(priority) if _PRIORITY.match(priority) else math.nan
    if not math.isfinite(value):
        return f"priority {priority[:20]!r} is not a finite number"
    return SpoolLine(url, source, int(hops), value)


def timestamp14(t: float) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(t))


class SpoolWriter:
    """Appends external links to the current spool file of one crawler process."""

    def __init__(self, directory: Path, process: int, *, max_lines: int, max_age: float) -> None:
        self.directory = directory
        self.process = process
        self.max_lines = max_lines
        self.max_age = max_age
        self.lines_written = 0
        self._file: IO[str] | None = None
        self._path: Path | None = None
        self._lines = 0
        self._opened = 0.0
        self._serial = 0
        self._retired: list[Retired] = []  # rotated files not yet fsynced and published
        directory.mkdir(parents=True, exist_ok=True)
        self._close_leftovers()

    def _close_leftovers(self) -> None:
        """Close ``.open`` files a crash left: drop a torn last line, then publish them."""
        for path in self.directory.glob(f"{self.process}-*.tsv.open"):
            data = path.read_bytes()
            keep = data.rfind(b"\n") + 1
            if keep < len(data):
                with path.open("r+b") as f:
                    f.truncate(keep)
            os.replace(path, path.with_suffix(""))

    def add(self, url: str, source: str, when: float, *, hops: int = 0,
            priority: float = 0.0) -> None:
        """Spool one external link of ``source`` (a site ``hops`` links from a seed site) with
        its site ``priority``; ValueError for a hop count or priority no reader would take."""
        if not 0 <= hops <= MAX_HOPS:
            raise ValueError(f"hops must be 0 to {MAX_HOPS}, not {hops}")
        if not math.isfinite(priority):
            raise ValueError(f"priority must be a finite number, not {priority}")
        if self._file is None:
            self._open(when)
        assert self._file is not None
        self._file.write(f"{url}\t{source}\t{timestamp14(when)}\t{hops}\t{float(priority)!r}\n")
        self._lines += 1
        self.lines_written += 1
        if self._lines >= self.max_lines:
            self._retire()

    def tick(self, now: float) -> None:
        """Rotate the current file once it is older than ``max_age``."""
        if self._file is not None and now - self._opened >= self.max_age:
            self._retire()

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def prepare_sync(self) -> int | None:
        """Flush; the descriptor to fsync (None when no file is open)."""
        self.flush()
        return None if self._file is None else self._file.fileno()

    def add_to(self, job: SyncJob) -> list[Retired]:
        """Flush, and give ``job`` the current file's descriptor (a duplicate) and the rotated
        files to fsync and publish; returns those, for ``finished``."""
        fd = self.prepare_sync()
        if fd is not None:
            job.fds.append(os.dup(fd))
        job.retired += self._retired
        return list(self._retired)

    def finished(self, retired: list[Retired]) -> None:
        self._retired = [r for r in self._retired if r not in retired]

    def sync(self) -> None:
        """Make every line written so far durable (blocking: the crawler uses ``add_to``)."""
        job = SyncJob()
        handed = self.add_to(job)
        job.run()
        self.finished(handed)

    def close(self) -> None:
        """Flush, fsync and publish the current file and the rotated ones (drop ``.open``)."""
        self._retire()
        self.sync()

    def _retire(self) -> None:
        """Hand the current file over to the next sync job (fsync and publish, in a worker
        thread); the next link opens a new one."""
        if self._file is None or self._path is None:
            return
        self._file.flush()
        self._retired.append(Retired(os.dup(self._file.fileno()), self._path,
                                     self._path.with_suffix("")))
        self._file.close()
        self._file = self._path = None

    def _open(self, now: float) -> None:
        while True:
            self._serial += 1
            name = f"{self.process}-{timestamp14(now)}-{self._serial:05d}.tsv"
            final = self.directory / name
            if not final.exists():
                break
        self._path = final.with_name(name + ".open")
        self._file = self._path.open("x", encoding="utf-8", newline="\n")
        self._lines = 0
        self._opened = now


def spool_order(name: str) -> tuple[str, int, str]:
    """Spool files ``<process>-<time>-<serial>.tsv`` in time order, then by process."""
    process, _, rest = name.partition("-")
    return rest[:14], int(process) if process.isdigit() else -1, name


class SpoolDirectory:
    """The spool as the links batch reads it: the crawlers' closed files in ``directory``, oldest
    first; a file the batch is done with moves to ``done/`` (its history, which a reshard reads
    again; the operator may prune it). Picklable: a worker of the batch's engine reads through it.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def closed(self) -> list[str]:
        """Spool files the crawlers have closed (never one still ``.open``), oldest first."""
        if not self.directory.is_dir():
            return []
        return sorted((p.name for p in self.directory.glob("*.tsv") if p.is_file()), key=spool_order)

    def read(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()

    def location(self, name: str) -> str:
        return str(self.directory / name)

    def done(self, name: str) -> None:
        (self.directory / DONE).mkdir(exist_ok=True)
        (self.directory / name).replace(self.directory / DONE / name)

    def history(self) -> SpoolDirectory:
        """The files done, as a spool of their own."""
        return SpoolDirectory(self.directory / DONE)


class ObjectSpool:
    """The spool in an object store: the closed files the crawlers shipped under ``outlinks/``
    (``store.shipping.ship_closed``), oldest first; a file the batch is done with moves to
    ``outlinks/done/`` (copied there, checked, then deleted: its history, as in the embedded
    mode). Picklable when its store is (a folder, or an S3 store opened from the config)."""

    def __init__(self, store: ObjectStore, prefix: str = OBJECT_PREFIX) -> None:
        self.store = store
        self.prefix = prefix

    def closed(self) -> list[str]:
        names = (key[len(self.prefix):] for key in self.store.list(self.prefix))
        return sorted((n for n in names if "/" not in n and n.endswith(".tsv")), key=spool_order)

    def read(self, name: str) -> bytes:
        """The whole file in one ranged GET (a spool file is ``spool.max_lines`` lines, and the
        batch holds one in memory anyway)."""
        key = self.prefix + name
        size = self.store.size(key)
        if size is None:
            raise NoSuchObject(f"{self.store.location(key)}: no such object")
        return self.store.read(key, 0, size) if size else b""

    def location(self, name: str) -> str:
        return self.store.location(self.prefix + name)

    def done(self, name: str) -> None:
        """Move the file under ``done/``: the store has no move, so it is written there from a
        local copy (a verified put) before the original is deleted (done again after a kill in
        between, it writes the same bytes again)."""
        key = self.prefix + name
        with tempfile.TemporaryDirectory(prefix="archiver-spool-") as scratch:
            local = Path(scratch) / name
            local.write_bytes(self.read(name))
            put(self.store, local, f"{self.prefix}{DONE}/{name}")
        self.store.delete(key)

    def history(self) -> ObjectSpool:
        """The files done, as a spool of their own."""
        return ObjectSpool(self.store, f"{self.prefix}{DONE}/")
