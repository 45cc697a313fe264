"""Small helpers that make writes durable (fsync of files and of directory entries)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Make a created or renamed entry in ``directory`` durable (a file's name lives there)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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

