"""Shipping closed files to object storage: WARC bundles (and spool files) leave the crawler's disk.

:func:`ship_closed` uploads every closed file of a folder (``*.warc.gz``, never a ``.open`` one),
checks that the store holds exactly its bytes (:func:`archiver.store.objectstore.put`) and only
then deletes the local copy. It is idempotent and resumable: killed at any point, the next call
finishes the work. A file the store already holds with the right size and checksum (a run killed
between the upload and the deletion) is only deleted; anything else under its key (a partial or
foreign object) is uploaded again. A failed check raises ObjectMismatch and keeps the local file.

It blocks (file and network I/O): the crawler calls it from a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from archiver.store.durable import fsync_directory
from archiver.store.objectstore import ObjectStore, put


@dataclass(frozen=True)
class Shipped:
    """One local file now held by the store (and deleted here)."""

    name: str
    key: str
    size: int
    uploaded: bool  # False: the store held it already (an earlier run stopped before deleting)


def ship_closed(directory: Path, store: ObjectStore, *, pattern: str = "*.warc.gz",
                under: str = "") -> list[Shipped]:
    """Ship every file of ``directory`` matching ``pattern`` to ``store`` under the key
    ``under + name``, oldest name first; what was shipped, in order."""
    return [ship_file(path, store, under + path.name)
            for path in sorted(p for p in directory.glob(pattern) if p.is_file())]


def ship_file(path: Path, store: ObjectStore, key: str, *,
              then: Callable[[Shipped], object] | None = None) -> Shipped:
    """Ship one closed file: upload it (unless the store holds it already), verify, call
    ``then`` (the catalog learns of it), and only then delete the local copy."""
    held = store.stored(key)
    if held is not None and held == store.fingerprint(path):
        shipped = Shipped(path.name, key, held.size, False)
    else:
        shipped = Shipped(path.name, key, put(store, path, key).size, True)
    if then is not None:
        then(shipped)
    path.unlink()
    fsync_directory(path.parent)
    return shipped
