"""The resident memory of a process tree (archiver.browser.chromium.tree_memory), read from a
/proc written for the test: down the threads' children files, or from every process's parent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from archiver.browser.chromium import tree_memory

PAGE = os.sysconf("SC_PAGE_SIZE")
# pid: (parent, resident pages, children by thread); 1 is outside the tree of 10.
TREE = {1: (0, 1000, {1: [10, 30]}), 10: (1, 5, {10: [11], 12: [13]}), 11: (10, 7, {11: []}),
        13: (10, 11, {13: [14]}), 14: (13, 13, {14: []}), 30: (1, 17, {30: []})}


def write_proc(root: Path, *, children: bool) -> Path:
    for pid, (parent, pages, threads) in TREE.items():
        folder = root / str(pid)
        (folder / "task").mkdir(parents=True)
        (folder / "stat").write_text(f"{pid} (a) name) S {parent} 1 1")  # ") " in the name
        (folder / "statm").write_text(f"{pages * 2} {pages} 0 0 0 0 0")
        for tid, kids in threads.items():
            (folder / "task" / str(tid)).mkdir()
            if children:
                (folder / "task" / str(tid) / "children").write_text(" ".join(map(str, kids)))
    (root / "self").mkdir()  # not a process
    return root


@pytest.mark.parametrize("children", [True, False])
def test_the_tree_counts_its_descendants_through_every_thread(tmp_path, children) -> None:
    proc = write_proc(tmp_path, children=children)
    assert tree_memory(10, proc) == (5 + 7 + 11 + 13) * PAGE
    assert tree_memory(14, proc) == 13 * PAGE
    assert tree_memory(99, proc) == 0  # gone
