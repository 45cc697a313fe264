"""Small helpers that make writes durable (fsync of files and of directory entries)."""

from __future__ import annotations

import os
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
