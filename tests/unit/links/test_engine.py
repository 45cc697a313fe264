"""The local engine: spool files read ahead in threads, each tested as soon as it is read, give the
groups, results and slices that reading one file after another gives, each file is read once, and
a read that fails fails the checkpoint of its group, not an earlier one, and leaves no trace."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from archiver.links import steps
from archiver.links.engine import LocalEngine, Work
from archiver.queues.spool import SpoolDirectory
from tests.unit.links.test_slices import STAMP, by_site, run_steps, spool_file, store


class Quiet:
    def file_read(self, lines: int) -> None: ...

    def slice_done(self) -> None: ...


class CountedSpool(SpoolDirectory):
    """A spool that counts its reads and fails to read the files named in ``broken``."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.reads: dict[str, int] = {}
        self.broken: set[str] = set()
        self.lock = threading.Lock()

    def read(self, name: str) -> bytes:
        with self.lock:
            self.reads[name] = self.reads.get(name, 0) + 1
        if name in self.broken:
            raise OSError(5, f"Input/output error: {name}")
        return super().read(name)


def spool_of(tmp_path, files: int) -> CountedSpool:
    for n in range(files):
        spool_file(tmp_path, f"0-20261122{n:06d}-{n:05d}.tsv",
                   [f"http://s{n % 3}.test/{n}/{k}\thttp://x{k}.test\t{STAMP}" for k in range(3)])
    return CountedSpool(tmp_path / "spool")


def engine(spool: CountedSpool, slices, lines: int = 6) -> LocalEngine:
    return LocalEngine(Work(steps.SpoolSource(spool), slices, lambda: lines, threading.Event(),
                            Quiet()))


def test_reads_run_ahead_and_each_file_is_read_once(tmp_path):
    spool = spool_of(tmp_path, 7)
    files, slices = spool.closed(), store(tmp_path / "ahead")
    local = engine(spool, slices)
    groups, generation = [], 0
    try:
        while files:
            results = local.checkpoint(files, [generation] * 4)
            groups.append([by_site(r) for r in results])
            files, generation = files[len(results):], generation + 1
    finally:
        local.close()
    assert [len(g) for g in groups] == [2, 2, 2, 1]                  # 6 lines a group
    assert spool.reads == dict.fromkeys(spool.closed(), 1)
    # One file after another, without the engine: the same new URLs, group by group.
    plain, names, expected = store(tmp_path / "plain"), spool.closed(), []
    for g, size in enumerate([2, 2, 2, 1]):
        expected.append([by_site(r) for r in run_steps(steps.SpoolSource(spool), plain,
                                                       names[:size], g)])
        names = names[size:]
    assert groups == expected
    assert all(slices.load(p, 4)._array == plain.load(p, 4)._array for p in range(4))


def test_a_read_that_fails_fails_its_own_group(tmp_path):
    spool = spool_of(tmp_path, 4)
    files = spool.closed()
    spool.broken = {files[2]}                                      # read ahead by the first group
    local = engine(spool, store(tmp_path))
    try:
        assert len(local.checkpoint(files, [0] * 4)) == 2
        with pytest.raises(OSError, match="Input/output error"):
            local.checkpoint(files[2:], [1] * 4)
    finally:
        local.close()


def test_a_group_that_fails_after_some_of_its_files_were_tested_leaves_no_trace(tmp_path):
    spool = spool_of(tmp_path, 4)
    files = spool.closed()
    spool.broken = {files[3]}        # the second group's first file is tested, then this fails
    slices = store(tmp_path / "failed")
    local = engine(spool, slices)
    try:
        first = [by_site(r) for r in local.checkpoint(files, [0] * 4)]
        with pytest.raises(OSError, match="Input/output error"):
            local.checkpoint(files[2:], [1] * 4)
        spool.broken = set()
        second = [by_site(r) for r in local.checkpoint(files[2:], [1] * 4)]
    finally:
        local.close()
    # As one clean run: the slices kept from the first group, not the half-tested copies.
    plain, source = store(tmp_path / "plain"), steps.SpoolSource(spool)
    assert first == [by_site(r) for r in run_steps(source, plain, files[:2], 0)]
    assert second == [by_site(r) for r in run_steps(source, plain, files[2:], 1)]
    assert all(slices.load(p, 2)._array == plain.load(p, 2)._array for p in range(4))
