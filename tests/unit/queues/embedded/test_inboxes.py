"""Site inboxes in the embedded mode: rows of ``crawl-queues/inbox.sqlite`` appended without a directory
per site, merged through the site's bitmap at open and when the queue runs dry, deleted only up to
the rows taken; inbox files left by earlier versions merged too."""

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from archiver.queues.embedded.crawlqueue import INBOX, LOG, inbox_database, queue_dir, read_inbox
from archiver.queues.embedded.inboxes import INBOXES, PAGE_SIZE, SiteInbox
from tests.support.crawlqueues import drain, embedded_queues

A = "http://a.test"
B = "http://b.test"


def _rows(root: Path) -> list[tuple[str, bytes]]:
    with closing(sqlite3.connect(root / "crawl-queues" / INBOXES)) as db:
        return db.execute("SELECT origin, lines FROM inbox ORDER BY id").fetchall()


def test_appends_make_no_directory_and_are_merged_at_open(tmp_path: Path):
    with closing(embedded_queues(tmp_path)) as queues:
        queues.append(A, [(A + "/x", 2), (A + "/y", 3)])
        queues.append(A, [])
        for n in range(100):
            queues.append(f"http://s{n}.test", [(f"http://s{n}.test/", 0)], sync=False)
        queues.sync()
        assert sorted(p.name for p in (tmp_path / "crawl-queues").iterdir()) == \
            [INBOXES, f"{INBOXES}-shm", f"{INBOXES}-wal"]  # no folder per site
        assert _rows(tmp_path)[0] == (A, b"2\t" + A.encode() + b"/x\n3\t" + A.encode() + b"/y\n")
        assert not queues.exists(A)
        with queues.open(A) as crawl_queue:
            assert not crawl_queue.add(A + "/x", 0)
            assert [(e.url, e.depth) for e in drain(crawl_queue)] == [(A + "/x", 2), (A + "/y", 3)]
        assert queues.exists(A)
        assert len(_rows(tmp_path)) == 100  # A's rows went, the other sites' stay
        with pytest.raises(ValueError):
            queues.append(A, [(A + "/ok", 0), (A + "/\n", 0)])
        with pytest.raises(ValueError, match="too long"):
            queues.append("http://" + "a" * 300, [("http://" + "a" * 300 + "/", 0)])
        queues.sync()
    assert len(_rows(tmp_path)) == 100  # all or nothing


def test_appends_not_synced_wait_in_memory_and_close_drops_them(tmp_path: Path):
    with closing(embedded_queues(tmp_path)) as queues:
        queues.append(A, [(A + "/kept", 0)], sync=False)
        assert not (tmp_path / "crawl-queues").exists()  # nothing written before sync
        queues.sync()
        queues.append(A, [(A + "/dropped", 0)], sync=False)
    assert _rows(tmp_path) == [(A, b"0\t" + A.encode() + b"/kept\n")]


def test_merged_when_dry_through_the_bitmap(tmp_path: Path):
    with closing(embedded_queues(tmp_path)) as queues, queues.open(A) as crawl_queue:
        crawl_queue.add(A + "/", 0)
        assert crawl_queue.next() is not None
        assert not crawl_queue.inbox_waiting()
        queues.append(A, [(A + "/", 0), (A + "/new", 1)])
        assert crawl_queue.inbox_waiting()
        entry = crawl_queue.next(merge=False)
        assert entry is None  # the crawler merges it itself
        inbox = crawl_queue.take_inbox()
        assert crawl_queue.merge(inbox)
        crawl_queue.finish_inbox(inbox, True)
        assert not crawl_queue.inbox_waiting()
        assert [e.url for e in drain(crawl_queue)] == [A + "/new"]
        queues.append(A, [(A + "/", 0)])
        assert crawl_queue.next() is None  # merged when dry: nothing new
        assert not crawl_queue.inbox_waiting()
        assert len(crawl_queue) == 2
    assert (queue_dir(tmp_path, A) / LOG).read_bytes() == f"0\t{A}/\n1\t{A}/new\n".encode()


def test_rows_appended_during_a_merge_stay(tmp_path: Path):
    with closing(embedded_queues(tmp_path)) as batch, closing(embedded_queues(tmp_path)) as crawler:
        batch.append(A, [(A + "/1", 1)])
        with crawler.open(A) as crawl_queue:
            batch.append(A, [(A + "/2", 1)])
            inbox = crawl_queue.take_inbox()
            batch.append(A, [(A + "/3", 1)])  # after the take, before the delete
            for n in range(4, 8):
                batch.append(f"http://s{n}.test", [(f"http://s{n}.test/", 0)])
            assert crawl_queue.merge(inbox)
            crawl_queue.finish_inbox(inbox, True)
            assert crawl_queue.inbox_waiting()
            assert [e.url for e in drain(crawl_queue)] == [A + "/1", A + "/2", A + "/3"]
        assert [origin for origin, _ in _rows(tmp_path)] == [f"http://s{n}.test" for n in range(4, 8)]


def test_a_merge_that_fails_or_dies_before_the_delete_leaves_the_rows(tmp_path: Path):
    with closing(embedded_queues(tmp_path)) as queues:
        queues.append(A, [(A + "/1", 1), (A + "/2", 1)])
        with queues.open(A) as crawl_queue:
            queues.append(A, [(A + "/2", 1), (A + "/3", 1)])
            inbox = crawl_queue.take_inbox()
            crawl_queue.merge(inbox)
            crawl_queue.sync()  # the log is durable, the rows are not deleted yet: a crash here
            inbox.release()
            assert len(_rows(tmp_path)) == 1
        with queues.open(A) as crawl_queue:  # merged again, dropped by the bitmap
            assert [e.url for e in drain(crawl_queue)] == [A + "/1", A + "/2", A + "/3"]
        assert _rows(tmp_path) == []
    assert (queue_dir(tmp_path, A) / LOG).read_bytes().count(b"/3\n") == 1


def test_an_earlier_versions_inbox_file_is_merged_before_the_rows(tmp_path: Path):
    directory = queue_dir(tmp_path, A)
    directory.mkdir(parents=True)
    (directory / INBOX).write_bytes(f"1\t{A}/old\n2\t{A}/both\n1\t{A}/fra".encode())  # torn tail
    with closing(embedded_queues(tmp_path)) as queues:
        queues.append(A, [(A + "/both", 1), (A + "/new", 1)])
        inbox = SiteInbox(queues.inboxes, A)
        assert list(read_inbox(directory, inbox)) == [
            (A + "/old", 1), (A + "/both", 2), (A + "/both", 1), (A + "/new", 1)]
        with queues.open(A) as crawl_queue:
            assert [(e.url, e.depth) for e in drain(crawl_queue)] == [
                (A + "/old", 1), (A + "/both", 2), (A + "/new", 1)]
        assert (directory / INBOX).read_bytes() == b""
        assert _rows(tmp_path) == []
        assert list(read_inbox(directory, inbox)) == []


def test_an_inbox_file_alone_is_merged_when_dry(tmp_path: Path):
    with closing(embedded_queues(tmp_path)) as queues, queues.open(A) as crawl_queue:
        crawl_queue.add(A + "/", 0)
        assert crawl_queue.next() is not None
        (crawl_queue.directory / INBOX).write_bytes(f"1\t{A}/file\n".encode())
        assert crawl_queue.inbox_waiting()
        assert [e.url for e in drain(crawl_queue)] == [A + "/file"]
        assert not crawl_queue.inbox_waiting()
    assert not (tmp_path / "crawl-queues" / INBOXES).exists()  # reading made no database


def test_a_busy_database_answers_maybe_without_waiting(tmp_path: Path):
    with closing(embedded_queues(tmp_path)) as queues:
        queues.append(A, [(A + "/1", 1)])
    # Closed, the file is back in rollback-journal mode, where a writer's lock keeps readers out.
    with closing(inbox_database(tmp_path)) as inboxes, \
            closing(sqlite3.connect(tmp_path / "crawl-queues" / INBOXES, isolation_level=None)) as other:
        assert inboxes.waiting(A) and not inboxes.waiting(B)
        other.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        assert inboxes.waiting(B)  # maybe: the merge will look, in a worker thread
        assert time.monotonic() - started < 1  # without waiting for the lock
        other.execute("ROLLBACK")
        assert inboxes.waiting(A) and not inboxes.waiting(B)


def test_readers_of_an_absent_database_create_nothing(tmp_path: Path):
    with closing(inbox_database(tmp_path)) as inboxes:
        assert not inboxes.waiting(A)
        assert inboxes.take(A) is None
        inboxes.delete(A, 10)
        assert inboxes.origins() == []
        inboxes.commit()  # nothing staged
    assert not (tmp_path / "crawl-queues").exists()


def test_a_new_inbox_file_has_16_kib_pages_and_an_older_one_keeps_its_own(tmp_path: Path):
    for root, made_before in ((tmp_path / "new", None), (tmp_path / "old", 4096)):
        if made_before:  # a file made by a version that left SQLite's page size
            (root / "crawl-queues").mkdir(parents=True)
            with closing(sqlite3.connect(root / "crawl-queues" / INBOXES)) as db:
                db.execute(f"PRAGMA page_size = {made_before}")
                db.execute("CREATE TABLE inbox (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                           " origin TEXT NOT NULL, lines BLOB NOT NULL)")
        with closing(embedded_queues(root)) as queues:
            queues.append(A, [(A + "/x", 0)])
            with queues.open(A) as crawl_queue:
                assert [e.url for e in drain(crawl_queue)] == [A + "/x"]
        with closing(sqlite3.connect(root / "crawl-queues" / INBOXES)) as db:
            assert db.execute("PRAGMA page_size").fetchone() == (made_before or PAGE_SIZE,)
    assert PAGE_SIZE == 16384


@pytest.mark.parametrize("bulk", [False, True])
def test_a_bulk_writer_leaves_the_wal_to_settle(tmp_path: Path, bulk: bool):
    """Past SQLite's automatic checkpoint (1,000 pages of WAL), a writer copies the WAL into the
    file at its commit; the links batch's (``bulk``) leaves that to ``settle``, run beside other
    work. The rows read back alike."""
    path = tmp_path / "crawl-queues" / INBOXES
    lines = b"".join(b"0\thttp://a.test/%d/%s\n" % (n, b"x" * 990) for n in range(20))
    sites = [f"http://s{n:05}.test" for n in range(1000)]  # 20 MB of lines: 1,250 pages
    with closing(embedded_queues(tmp_path, bulk=bulk)) as queues:
        queues.append_lines(dict.fromkeys(sites, lines))
        in_file = path.stat().st_size
        queues.settle()
        settled = path.stat().st_size
        assert (in_file < 1 << 20) == bulk and settled > 16 << 20
        with queues.open(sites[-1]) as crawl_queue:
            assert [e.url for e in drain(crawl_queue)] == [
                line.split("\t")[1] for line in lines.decode().splitlines()]
