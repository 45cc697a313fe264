"""What a crawler does at start after a crash: repair its torn WARC bundles and index their records.

Write order, which makes this enough (see also README "Crash safety"):

1. A fetched exchange is appended to the open bundle (in memory, handed to the OS within 256 KiB or
   at the next sync), and its catalog entry is queued in memory.
2. Every ``warc.sync_interval`` seconds, and at the end of every site visit, the bundle, the
   crawl-queue logs and the external-link spool are fsynced (in a worker thread); only then are
   the queued catalog entries committed and the crawl-queue cursors moved past the pages whose
   records were fsynced (a group commit).
3. A site is marked done only after its visit's last records are fsynced.

So after ``kill -9`` or a power loss: the cursor never stands past a page whose record is not on
disk (such pages are fetched again: duplicates, never gaps); the catalog never names bytes that
are not a complete record; and the bundle may end in a torn record, or hold complete records the
catalog does not know yet. This module removes the first and indexes the second.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from archiver.bundle import OPEN, SUFFIX, repair_open_bundle
from archiver.catalog import Catalog
from archiver.logs import event
from archiver.warcindex import WarcError, index_warc

log = logging.getLogger("archiver.recovery")


def open_bundles(warcs: Path, prefix: str, process: int) -> list[Path]:
    """The ``.open`` bundles process ``process`` left (no other process's)."""
    pattern = re.compile(rf"{re.escape(prefix)}-\d{{14}}-{process}-\d{{5,}}{re.escape(SUFFIX + OPEN)}")
    if not warcs.is_dir():
        return []
    return sorted(p for p in warcs.iterdir() if pattern.fullmatch(p.name))


def recover_bundles(warcs: Path, prefix: str, process: int, catalog: Catalog) -> int:
    """Repair and close each ``.open`` bundle of this process, then index its complete records
    (entries already in the catalog are kept as they are). Returns the bundles repaired."""
    repaired = 0
    for path in open_bundles(warcs, prefix, process):
        report = repair_open_bundle(path)
        repaired += 1
        if not report.final_path.exists():
            event(log, logging.INFO, "bundle-empty-removed", path=str(path))
            continue
        if report.kept_records == 0:
            event(log, logging.WARNING, "bundle-corrupt", path=str(path),
                  moved_to=str(report.final_path), bytes=report.cut_bytes)
            continue
        try:
            added = catalog.add(index_warc(report.final_path))
        except WarcError as e:  # repaired files are complete: this is a bug or a disk fault
            event(log, logging.ERROR, "bundle-reindex-failed", path=str(report.final_path),
                  error=str(e))
            continue
        event(log, logging.WARNING if report.cut_bytes else logging.INFO, "bundle-repaired",
              path=str(report.final_path), records=report.kept_records,
              cut_bytes=report.cut_bytes, catalog_added=added)
    return repaired
