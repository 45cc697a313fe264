"""The archive root's folders whose names changed, and the one place that knows both names.

``<root>/FORMAT`` holds the layout's version. Version 2 renamed two folders so that the disk says
what the code, the config and the logs say: ``frontier/`` is ``crawl-queues/`` (every site's crawl
queue and their inboxes) and ``outlinks/`` is ``spool/`` (the external-link spool). An archive
laid out before is still read where it lies, with a warning (``archive-layout-old``), until the
next release; ``archiver store upgrade --config FILE`` moves it, each
folder in one atomic rename, while no service runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from archiver.logs import event
from archiver.store.durable import fsync_directory, write_durably

log = logging.getLogger("archiver.store.layout")

VERSION = 2
FORMAT_FILE = "FORMAT"
CRAWL_QUEUES = "crawl-queues"
SPOOL = "spool"
# Each folder renamed by version 2, by its new name: its name before.
RENAMED = {CRAWL_QUEUES: "frontier", SPOOL: "outlinks"}

_warned: set[Path] = set()


class LayoutError(Exception):
    """The archive root cannot be moved to the current layout as it is."""


def folder(root: Path, name: str) -> Path:
    """``<root>/<name>``, or its folder under the old name while only that one exists (warned
    about once per process)."""
    path = root / name
    old = root / RENAMED[name]
    if path.exists() or not old.is_dir():
        return path
    if old not in _warned:
        _warned.add(old)
        event(log, logging.WARNING, "archive-layout-old", folder=str(old), now=name,
              note="run `archiver store upgrade --config FILE` while no service runs to move it")
    return old


def version(root: Path) -> int:
    """The layout version of the archive at ``root`` (1: before FORMAT was written)."""
    try:
        return int((root / FORMAT_FILE).read_text().strip())
    except FileNotFoundError:
        return VERSION if not any((root / old).exists() for old in RENAMED.values()) else 1
    except ValueError:
        raise LayoutError(f"{root / FORMAT_FILE}: not a layout version number") from None


def upgrade(root: Path) -> list[tuple[str, str]]:
    """Move the archive at ``root`` to the current layout: each old folder renamed, then FORMAT
    written, holding every process lock of the archive meanwhile (so no service starts on it
    half moved). Returns the (old, new) names moved. LayoutError, and nothing moved, if a
    service holds one of those locks or a folder exists under both names."""
    with _locks_held(root):
        moves = [(old, new) for new, old in RENAMED.items() if (root / old).exists()]
        for old, new in moves:
            if (root / new).exists():
                raise LayoutError(f"{root}: both {old}/ and {new}/ exist (one folder under its old "
                                  f"and new name); keep the one in use and remove the other")
        for old, new in moves:
            os.rename(root / old, root / new)
            event(log, logging.INFO, "archive-layout-moved", old=old, new=new)
        if moves:
            fsync_directory(root)
        write_durably(root / FORMAT_FILE, f"{VERSION}\n".encode())
    return moves


@contextlib.contextmanager
def _locks_held(root: Path) -> Iterator[None]:
    """Hold the archive's lock files (a crawler's ``sites/<p>.lock``, a service's
    ``state/<role>.lock``); LayoutError if a process holds one."""
    with contextlib.ExitStack() as held:
        for path in [*root.glob("sites/*.lock"), *root.glob("state/*.lock")]:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            held.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LayoutError(f"{path} is held: stop every archiver service on {root} "
                                  "first") from None
        yield
