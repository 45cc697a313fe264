"""The local engine reading spool files in processes of their own (``links.read_processes``): the
same queues as reading in a thread, and a batch killed with its readers running leaves none of
them behind and reruns to the same queues."""

from __future__ import annotations

import os
import select
import signal
import subprocess
from functools import partial
from pathlib import Path

from archiver import config
from tests.integration.links.test_dask import with_links
from tests.support.linkbatch import batch_once, links_config, snapshot, synthetic_spool, write_spool
from tests.support.repo import ARCHIVER

_DEADLINE = 60.0


def spooled(directory: Path, read_processes: int) -> config.Config:
    """Checkpoints of 3,000 lines over 12 files of 1,500: 6 checkpoints."""
    cfg = links_config(directory, checkpoint=3000)
    synthetic_spool(partial(write_spool, cfg.root))
    return with_links(cfg.path, read_processes=read_processes)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (its children, theirs, ...), from /proc."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            parent_of[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parent_of.items() if parent in frontier} - found
        found |= frontier
    return found


def test_reading_processes_queue_the_same_as_the_reading_thread(tmp_path):
    thread, processes = spooled(tmp_path / "thread", 0), spooled(tmp_path / "processes", 2)
    expected, got = batch_once(thread), batch_once(processes)
    assert got.checkpoints == expected.checkpoints > 3
    assert (got.files, got.lines, got.bad, got.new_urls, got.new_sites, got.new_pairs) == (
        expected.files, expected.lines, expected.bad, expected.new_urls, expected.new_sites,
        expected.new_pairs)
    assert snapshot(processes.root, 2, marks=True) == snapshot(thread.root, 2, marks=True)


def test_a_batch_killed_with_its_readers_leaves_none_behind_and_reruns_clean(tmp_path):
    clean = spooled(tmp_path / "clean", 0)
    batch_once(clean)
    killed = spooled(tmp_path / "killed", 2)
    proc = subprocess.Popen([*ARCHIVER, "links", "run", "--once", "--config", str(killed.path)],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    readers: set[int] = set()
    for line in proc.stderr:                      # a checkpoint in, readers at work: kill it
        if "links-checkpoint" in line and "generation=2" in line:
            readers = descendants(proc.pid)
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=_DEADLINE)
    assert proc.returncode == -signal.SIGKILL
    assert len(readers) >= 3                      # the fork server and its two readers
    for pid in readers:                           # each one ends once the batch is gone
        try:
            handle = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            assert select.select([handle], [], [], _DEADLINE)[0], f"reader {pid} outlived the batch"
        finally:
            os.close(handle)
    rerun = batch_once(config.load(killed.path))
    assert 0 < rerun.files < 12                   # it really stopped halfway
    assert snapshot(killed.root, 2, marks=True) == snapshot(clean.root, 2, marks=True)
