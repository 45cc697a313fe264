"""Engines: what runs a checkpoint's steps (archiver.links.steps) for the driver (archiver.links.batch).

The driver calls ``Engine.checkpoint(files, generations)`` with the pending spool files in spool
order and each slice's generation: the engine takes the next group of those files
(``steps.group_end``, or fewer if ``stop`` is set while it reads; none if ``files`` is empty),
tests every slice with their keys, saves every slice ``p`` at ``generations[p] + 1``, and returns
the group's ``FileResult``s in file order. The driver then commits. With ``save=False`` (a
reshard, before its last step) the slices at ``generations[p] + 1`` are kept in memory only, where
the next checkpoint finds them. ``close`` lets go of what the engine holds.

``links.engine = "local"``: ``LocalEngine``, every step in this process (spool files read ahead in
a thread; the slices stay in this process's memory between checkpoints). ``"dask"``: the steps on
a Dask cluster (archiver.links.dask_engine). The driver chooses (``batch.open_engine``), so that
neither engine module imports the other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from archiver.links import steps
from archiver.links.slices import SliceStore


class Progress(Protocol):
    """Told of the work as it goes, for the progress line."""

    def file_read(self, lines: int) -> None: ...

    def slice_done(self) -> None: ...


@dataclass(frozen=True)
class Work:
    """What an engine works on: the spool, the slices, the group size (``links.checkpoint_urls``
    lines, read afresh at each checkpoint), and when to stop early."""

    spool: steps.SpoolSource
    slices: SliceStore
    checkpoint_lines: Callable[[], int]
    stop: threading.Event
    progress: Progress


class Engine(Protocol):
    def checkpoint(self, files: list[str], generations: list[int], *, save: bool = True
                   ) -> list[steps.FileResult]:
        """Run one checkpoint's steps over the next group of ``files`` (see the module docstring)."""

    def close(self) -> None: ...


class LocalEngine:
    """Every step in this process; spool files are read ahead in ``READERS`` threads (most of a
    read runs in pyarrow, numpy and compiled loops, outside the GIL), and each file's keys are
    tested in every slice as soon as it is read, while the next files are read. (Two reading
    processes measured slower on 2 cores: 3.0-3.2x ``sort -u`` against 2.7-2.9x, their pickling
    on top of the same work; a second reading thread, 2.6x against 2.8-3.0x; a third, no
    change.) ``READ_AHEAD`` files are read ahead of the one waited for, across groups: enough
    to keep reading while this thread tests a file; more would only hold memory (about 13 MB per
    100,000-line file read). At a group's end ``GROUP_END`` more are: the driver may wait there
    for the commit before (which puts that group's new URLs together first), and the readers
    idled (0.35 s at 1 million lines).
    """

    READERS = 2
    READ_AHEAD = 3
    GROUP_END = 4

    def __init__(self, work: Work) -> None:
        self.work = work
        self._pool = ThreadPoolExecutor(self.READERS, thread_name_prefix="links-read")
        # The compiled loops, loaded beside the first reads (which would otherwise wait for them)
        # once there are files to read, and waited for before the first test: in a thread of
        # their own, so that both readers start at once (a read needs them only past its
        # columns).
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="links-kernels")
        self._kernels: Future[None] | None = None
        self._reads: dict[str, Future[steps.ReadFile]] = {}  # spool file -> its read

    def _read_ahead(self, names: list[str]) -> None:
        slice_count = self.work.slices.count
        for name in names:
            if name not in self._reads:
                self._reads[name] = self._pool.submit(steps.read_spool_file, self.work.spool, name,
                                                      slice_count)

    def checkpoint(self, files: list[str], generations: list[int], *, save: bool = True
                   ) -> list[steps.FileResult]:
        work = self.work
        slice_count = work.slices.count
        limit = work.checkpoint_lines()
        for name in self._reads.keys() - set(files):  # (not pending any more)
            self._reads.pop(name).cancel()
        # Each file's keys are tested as soon as it is read, while the next ones are read.
        bitmaps = [steps.open_slice(work.slices, p, generations[p]) for p in range(slice_count)]
        results: list[steps.FileResult] = []
        if files and self._kernels is None:
            self._kernels = self._loader.submit(steps.load_kernels)
        for i, name in enumerate(files):
            self._read_ahead(files[i:i + 1 + self.READ_AHEAD])
            read = self._reads.pop(name).result()
            assert self._kernels is not None
            self._kernels.result()
            work.progress.file_read(read.lines)
            results.append(steps.assemble(read, [steps.test_keys(bitmaps[p], read.keys[p])
                                                 for p in range(slice_count)]))
            if work.stop.is_set() or steps.group_end([r.lines for r in results], limit) is not None:
                break
        if not work.stop.is_set():  # the readers kept busy while the driver ends the group
            self._read_ahead(files[len(results):len(results) + self.READ_AHEAD + self.GROUP_END])
        for p, bitmap in enumerate(bitmaps):
            steps.keep_slice(work.slices, p, generations[p] + 1, bitmap, save=save)
            work.progress.slice_done()
        return results

    def close(self) -> None:
        """Cancel the reads run ahead (waiting for those under way), and drop the slices kept."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._loader.shutdown(wait=True)
        self._reads.clear()
        steps.forget_slices(self.work.slices)
