"""archiver.store.layout: the folders renamed by layout version 2, read under their old names
until an archive is moved, and moved only while no service runs."""

from __future__ import annotations

import fcntl
import logging
import os

import pytest

from archiver.store import layout


def old_archive(root):
    (root / "frontier" / "ab").mkdir(parents=True)
    (root / "frontier" / "inbox.sqlite").write_bytes(b"inbox")
    (root / "outlinks").mkdir()
    (root / "outlinks" / "1-x.tsv").write_text("line\n")
    return root


def test_an_old_archive_is_read_where_it_lies_with_one_warning(tmp_path, caplog):
    root = old_archive(tmp_path)
    caplog.set_level(logging.WARNING)
    assert layout.folder(root, layout.CRAWL_QUEUES) == root / "frontier"
    assert layout.folder(root, layout.CRAWL_QUEUES) == root / "frontier"
    assert layout.folder(root, layout.SPOOL) == root / "outlinks"
    warned = [r for r in caplog.records if r.getMessage() == "archive-layout-old"]
    assert len(warned) == 2  # once per folder
    assert layout.version(root) == 1


def test_a_new_archive_uses_the_new_names(tmp_path):
    assert layout.folder(tmp_path, layout.CRAWL_QUEUES) == tmp_path / "crawl-queues"
    assert layout.folder(tmp_path, layout.SPOOL) == tmp_path / "spool"
    assert layout.version(tmp_path) == layout.VERSION


def test_upgrade_moves_each_folder_with_its_files_and_writes_the_version(tmp_path):
    root = old_archive(tmp_path)
    assert layout.upgrade(root) == [("frontier", "crawl-queues"), ("outlinks", "spool")]
    assert (root / "crawl-queues" / "inbox.sqlite").read_bytes() == b"inbox"
    assert (root / "spool" / "1-x.tsv").read_text() == "line\n"
    assert not (root / "frontier").exists() and not (root / "outlinks").exists()
    assert layout.version(root) == layout.VERSION
    assert layout.folder(root, layout.SPOOL) == root / "spool"
    assert layout.upgrade(root) == []  # again: nothing to move


def test_upgrade_refuses_while_a_service_holds_its_lock_and_moves_nothing(tmp_path):
    root = old_archive(tmp_path)
    (root / "sites").mkdir()
    lock = root / "sites" / "0.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(layout.LayoutError, match="stop every archiver service"):
            layout.upgrade(root)
    finally:
        os.close(fd)
    assert (root / "frontier").is_dir() and not (root / "crawl-queues").exists()
    assert layout.upgrade(root)  # released: it moves


def test_upgrade_refuses_a_folder_under_both_names(tmp_path):
    root = old_archive(tmp_path)
    (root / "spool").mkdir()
    with pytest.raises(layout.LayoutError, match="both outlinks/ and spool/ exist"):
        layout.upgrade(root)
    assert (root / "frontier").is_dir()  # nothing moved


def test_a_damaged_version_file_is_a_clear_error(tmp_path):
    (tmp_path / "FORMAT").write_text("two\n")
    with pytest.raises(layout.LayoutError, match="not a layout version"):
        layout.version(tmp_path)
