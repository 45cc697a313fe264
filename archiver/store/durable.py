"""Small helpers that make writes durable (fsync of files and of directory entries)."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Make a created or renamed entry in ``directory`` durable (a file's name lives there)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: Path, data: bytes) -> None:
    """``data`` as the file ``path``: written beside it, fsynced, then renamed over it (a crash
    leaves the old file or the new one, never a part of either)."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def fsync_all(fds: list[int]) -> None:
    """fsync, then close, each descriptor in order.

    Callers pass duplicates (``os.dup``) made for this, so a worker thread can run it while the
    owners of the originals go on writing, or close them.
    """
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


# Errors that mean "the disk cannot take more now": full, over quota, over the file-size limit,
# failing, or remounted read-only. The crawler pauses on them (or exits: crawl.on_disk_full).
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def is_disk_error(exc: BaseException) -> bool:
    """An OSError from DISK_ERRNOS, or SQLite's "database or disk is full" / disk I/O error."""
    if isinstance(exc, OSError):
        return exc.errno in DISK_ERRNOS
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc)
        return "disk is full" in text or "disk I/O error" in text
    return False



class Retired:
    """A file its writer has finished with (a full WARC bundle, a rotated spool file) that still
    has to be fsynced, closed and renamed to its published name. The writer hands it on at once
    and goes on writing a new file; a worker thread finishes it in the next ``SyncJob``. Each step
    is done once, so a job that failed half-way (a full disk) can be run again."""

    def __init__(self, fd: int, path: Path, final: Path) -> None:
        self.fd: int | None = fd
        self.path = path
        self.final = final
        self.synced = False

    def finish(self) -> None:
        if not self.synced:
            assert self.fd is not None
            os.fsync(self.fd)
            self.synced = True
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.path != self.final:
            self.path.replace(self.final)
            self.path = self.final
            fsync_directory(self.final.parent)

    def abandon(self) -> None:
        """Close without publishing (shutdown on a full disk: the next start repairs the file)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclass
class SyncJob:
    """The blocking part of making writes durable, gathered on the event loop from each writer
    and run in one worker thread, so the crawler's loop never waits on the disk: fsync the
    descriptors (duplicates made for the job), finish the retired files, make new directory
    entries durable, then run the writes of shared stores (``calls``: a crawl queue in PostgreSQL
    writing what the local files now hold)."""

    fds: list[int] = field(default_factory=list)
    retired: list[Retired] = field(default_factory=list)
    directories: set[Path] = field(default_factory=set)
    calls: list[Callable[[], None]] = field(default_factory=list)

    def drop(self) -> None:
        """Close the duplicates gathered, for a job that will not run."""
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)

    def run(self) -> None:
        fds, self.fds = self.fds, []  # closed by fsync_all even if it fails: never twice
        fsync_all(fds)
        for item in self.retired:
            item.finish()
        for directory in sorted(self.directories):
            fsync_directory(directory)
        for call in self.calls:
            call()
