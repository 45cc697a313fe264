"""Engines: what runs a checkpoint's steps (archiver.links.steps) for the driver (archiver.links.batch).

The driver calls ``Engine.checkpoint(files, generations)`` with the pending spool files in spool
order and each slice's generation: the engine takes the next group of those files
(``steps.group_end``, or fewer if ``stop`` is set while it reads; none if ``files`` is empty),
tests every slice with their keys, saves every slice ``p`` at ``generations[p] + 1``, and returns
the group's ``FileResult``s in file order. The driver then commits. With ``save=False`` (a
reshard, before its last step) the slices at ``generations[p] + 1`` are kept in memory only, where
the next checkpoint finds them. ``close`` lets go of what the engine holds.

``links.engine = "local"``: ``LocalEngine``, every step in this process, one after another (the
slices stay in this process's memory between checkpoints). ``"dask"``: the steps on a Dask
cluster (archiver.links.dask_engine).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from archiver.config import Config
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
    """Every step in this process."""

    def __init__(self, work: Work) -> None:
        self.work = work

    def checkpoint(self, files: list[str], generations: list[int], *, save: bool = True
                   ) -> list[steps.FileResult]:
        work = self.work
        partitions = work.slices.partitions
        limit = work.checkpoint_lines()
        reads: list[steps.ReadFile] = []
        for name in files:
            reads.append(steps.read_spool_file(work.spool, name, partitions))
            work.progress.file_read(reads[-1].lines)
            if work.stop.is_set() or steps.group_end([r.lines for r in reads], limit) is not None:
                break
        flags = []
        for p in range(partitions):
            flags.append(steps.test_slice(work.slices, p, generations[p],
                                          [steps.partition_keys(read, p) for read in reads],
                                          save=save))
            work.progress.slice_done()
        return [steps.assemble(read, [flags[p][n] for p in range(partitions)])
                for n, read in enumerate(reads)]

    def close(self) -> None:
        steps.forget_slices(self.work.slices)


def open_engine(config: Config, work: Work) -> Engine:
    """The engine ``links.engine`` names."""
    if config.links.engine == "dask":
        from archiver.links.dask_engine import DaskEngine

        return DaskEngine(config, work)
    return LocalEngine(work)
