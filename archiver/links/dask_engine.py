"""The Dask engine (``links.engine = "dask"``): a checkpoint's steps as a graph on a Dask cluster.

The cluster is the scheduler at ``links.scheduler`` (``"tcp://host:8786"``), or, when that is
empty, a ``LocalCluster`` of ``links.workers`` processes started for the run (its dashboard
address is logged). Per checkpoint, over the group of spool files ``steps.group_end`` picks:

- ``read_spool_file`` per file, on any worker; reads run ahead of the group (a few files per
  worker), so the next checkpoint's files are read while this one's slices are tested, and a
  file read but not in this group is kept for the next;
- ``slice_keys`` per file and slice, where the file was read (the ``ReadFile`` never moves;
  only two arrays of hashes per slice do);
- ``test_slice`` per slice: one task per slice, on the slice's home worker (the one whose
  process keeps that slice between checkpoints), or on another if that one is gone;
- ``assemble`` per file, where the file was read, given that file's flags from every slice.

The driver (archiver.links.batch) gathers the ``FileResult``s in file order and commits, exactly as
with the local engine, so both engines give the same new URLs, inboxes and in-link counts.

A worker lost mid-run loses the results it held; Dask runs those tasks again elsewhere, and
``test_slice`` always starts from the generation the state holds, so the rerun gives the same
slice and flags. A lost scheduler or client fails the run: the next run starts from the last commit.
"""

from __future__ import annotations

import logging
import operator
from typing import Any

from archiver.config import Config
from archiver.links import steps
from archiver.links.engine import Work
from archiver.logs import event

log = logging.getLogger("archiver.links.dask")

# Spool files read ahead of the one the group waits for, per worker.
_READ_AHEAD_PER_WORKER = 2
_CONNECT_TIMEOUT = "30s"
# Dask's nannies start their workers with MALLOC_TRIM_THRESHOLD_=65536, to give freed memory back
# to the system at once; glibc then also stops raising its mmap threshold, so every array of over
# 128 KiB a read makes is mapped afresh and faulted in page by page: spool files read 1.5x slower.
# The LocalCluster's workers keep glibc's own thresholds.
_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


class ClusterUnavailable(RuntimeError):
    """The Dask scheduler cannot be reached, or the LocalCluster cannot start."""


def _lines(read: steps.ReadFile) -> int:
    return read.lines


class DaskEngine:
    """The steps of each checkpoint on a Dask cluster (see the module docstring)."""

    def __init__(self, config: Config, work: Work) -> None:
        # Imported here: only a batch with links.engine = "dask" needs Dask.
        import dask
        from distributed import Client, LocalCluster

        self.work = work
        self.cluster: Any = None
        links = config.links
        try:
            if links.scheduler:
                self.client = Client(links.scheduler, timeout=_CONNECT_TIMEOUT,
                                     set_as_default=False)
                event(log, logging.INFO, "dask-cluster", scheduler=links.scheduler,
                      workers=len(self._workers()), dashboard=self.client.dashboard_link)
            else:
                with dask.config.set({_TRIM: None}):
                    self.cluster = LocalCluster(n_workers=links.workers, threads_per_worker=1,
                                                processes=True, host="127.0.0.1",
                                                dashboard_address="127.0.0.1:8787")
                self.client = Client(self.cluster, set_as_default=False)
                event(log, logging.INFO, "dask-local-cluster", workers=links.workers,
                      scheduler=self.cluster.scheduler_address,
                      dashboard=self.client.dashboard_link)
        except (OSError, TimeoutError) as e:
            if self.cluster is not None:
                self.cluster.close()
            where = links.scheduler or f"a LocalCluster of {links.workers} workers"
            raise ClusterUnavailable(f"links.engine = \"dask\": cannot reach {where}: {e}") from None
        self._reads: dict[str, Any] = {}  # spool file -> its read_spool_file future
        self._line_counts: dict[str, Any] = {}  # spool file -> the future of its line count

    def _workers(self) -> list[str]:
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def _read_ahead(self, names: list[str]) -> None:
        work, slice_count = self.work, self.work.slices.count
        for name in names:
            if name not in self._reads:
                read = self.client.submit(steps.read_spool_file, work.spool, name, slice_count,
                                          pure=False, key=f"links-read-{name}-{id(self)}")
                self._reads[name] = read
                self._line_counts[name] = self.client.submit(_lines, read, pure=False)

    def checkpoint(self, files: list[str], generations: list[int], *, save: bool = True
                   ) -> list[steps.FileResult]:
        work, client = self.work, self.client
        slice_count = work.slices.count
        limit = work.checkpoint_lines()
        workers = self._workers()
        ahead = max(1, len(workers)) * _READ_AHEAD_PER_WORKER
        group: list[str] = []
        counts: list[int] = []
        for i, name in enumerate(files):
            self._read_ahead(files[i:i + 1 + ahead])
            counts.append(self._line_counts[name].result())
            group.append(name)
            work.progress.file_read(counts[-1])
            if work.stop.is_set() or steps.group_end(counts, limit) is not None:
                break
        reads = [self._reads[name] for name in group]
        keys = [[client.submit(steps.slice_keys, read, p, pure=False) for read in reads]
                for p in range(slice_count)]
        homes = [[workers[p % len(workers)]] if workers else None for p in range(slice_count)]
        tested = [client.submit(steps.test_slice, work.slices, p, generations[p], keys[p],
                                save=save, pure=False, workers=homes[p], allow_other_workers=True)
                  for p in range(slice_count)]
        results = [client.submit(steps.assemble, read,
                                 [client.submit(operator.getitem, tested[p], n, pure=False)
                                  for p in range(slice_count)], pure=False)
                   for n, read in enumerate(reads)]
        for finished in [client.submit(len, flags, pure=False) for flags in tested]:
            finished.result()  # a slice's flags stay on its worker; only their count comes here
            work.progress.slice_done()
        done: list[steps.FileResult] = client.gather(results)
        for name in group:
            del self._reads[name], self._line_counts[name]
        return done

    def close(self) -> None:
        """Cancel the reads run ahead, let go of the client, stop the LocalCluster if ours."""
        try:
            self.client.cancel(list(self._reads.values()) + list(self._line_counts.values()))
            self._reads.clear()
            self._line_counts.clear()
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()
