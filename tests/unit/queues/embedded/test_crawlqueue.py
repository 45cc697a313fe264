import os
import re
import string
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.queues.embedded.crawlqueue import CURSOR, DONE, LOG, QueueNames, queue_dir, queue_origin
from archiver.queues.models import Entry
from tests.support.crawlqueues import drain, open_queue
from tests.support.fuzzing import examples


def test_add_dedups_and_appends_lines(tmp_path: Path):
    with open_queue(tmp_path / "s") as f:
        assert f.add("http://a/", 0)
        assert f.add("http://a/x?q=1\tz", 1)  # a tab inside the URL survives
        assert not f.add("http://a/", 3)
        assert len(f) == 2
        assert f.pending == 2
        with pytest.raises(ValueError):
            f.add("http://a/\nevil", 1)
        with pytest.raises(ValueError):
            f.add("http://a/neg", -1)
        with pytest.raises(ValueError):
            f.add("", 0)
        assert len(f) == 2
    assert (tmp_path / "s" / LOG).read_bytes() == b"0\thttp://a/\n1\thttp://a/x?q=1\tz\n"


def test_next_and_commit(tmp_path: Path):
    with open_queue(tmp_path) as f:
        f.add("http://a/", 0)
        first = f.next()
        assert first == Entry("http://a/", 0, len(b"0\thttp://a/\n"))
        assert f.next() is None
        f.add("http://a/b", 1)  # found while fetching the first: handed out next
        second = f.next()
        assert second is not None
        assert (second.url, second.depth) == ("http://a/b", 1)
        assert f.pending == 0
        f.commit(first, pages=1, bytes_=500)
        f.save(f.mark())
        assert (f.cursor, f.pages, f.bytes) == (first.end, 1, 500)
        f.add("http://a/c", 2)
        f.commit(second, pages=2, bytes_=900)
        f.save(f.mark())
        # Links found before a commit are in the log (not just a Python buffer) once it returns.
        assert (tmp_path / LOG).read_bytes().endswith(b"2\thttp://a/c\n")
        assert f.next() is not None
        assert f.next() is None
    log = (tmp_path / LOG).read_bytes()
    assert log[: second.end].endswith(b"1\thttp://a/b\n")


def test_reopen_resumes_at_cursor_and_rebuilds_bloom(tmp_path: Path):
    urls = [f"http://a/{i}" for i in range(10)]
    with open_queue(tmp_path) as f:
        for i, url in enumerate(urls):
            f.add(url, i)
        handed = [f.next() for _ in range(5)]
        assert handed[2] is not None
        f.commit(handed[2], pages=3, bytes_=3000)  # entries 3 and 4 are handed out, not committed
        f.save(f.mark())
        assert f.pending == 5
    with open_queue(tmp_path) as f:
        assert (f.cursor, f.pages, f.bytes) == (handed[2].end, 3, 3000)
        assert len(f) == 10
        assert f.pending == 7
        assert not any(f.add(url, 0) for url in urls)  # before and after the cursor
        rest = drain(f)
        assert [e.url for e in rest] == urls[3:]
        assert [e.depth for e in rest] == list(range(3, 10))
        assert rest[0] == handed[3]


def test_torn_tail_is_truncated(tmp_path: Path):
    with open_queue(tmp_path) as f:
        f.add("http://a/1", 0)
        f.add("http://a/2", 0)
    good = (tmp_path / LOG).read_bytes()
    for torn in (b"1\thttp://a/tor", b"garbage\n", b"x\tno-depth\n\xff\n", b"7\t\n"):
        with (tmp_path / LOG).open("ab") as log:
            log.write(torn)
        with open_queue(tmp_path) as f:
            assert (tmp_path / LOG).read_bytes() == good
            assert len(f) == 2
            assert f.add("http://a/tor", 1)  # the torn URL was never queued
            assert [e.url for e in drain(f)] == ["http://a/1", "http://a/2", "http://a/tor"]
        assert (tmp_path / LOG).read_bytes() == good + b"1\thttp://a/tor\n"
        (tmp_path / LOG).write_bytes(good)


def test_bad_line_inside_the_log_is_skipped(tmp_path: Path):
    (tmp_path / LOG).write_bytes(b"0\thttp://a/1\nnot a line\n0\thttp://a/2\n")
    with open_queue(tmp_path) as f:
        assert len(f) == 2
        assert [e.url for e in drain(f)] == ["http://a/1", "http://a/2"]
        assert f.pending == 0


def write_committed(directory: Path, commits: int) -> list[Entry]:
    with open_queue(directory) as f:
        for i in range(5):
            f.add(f"http://a/{i}", 0)
        entries = drain(f)
        for n in range(commits):
            f.commit(entries[n], pages=n + 1, bytes_=100 * (n + 1))
            f.save(f.mark())
    return entries


def test_torn_cursor_slot_falls_back_to_the_other(tmp_path: Path):
    entries = write_committed(tmp_path, 3)  # commit 3 wrote slot 1 (at 512), commit 2 slot 0
    raw = bytearray((tmp_path / CURSOR).read_bytes())
    raw[512 + 10] ^= 0xFF  # a torn write of the newest slot
    (tmp_path / CURSOR).write_bytes(raw)
    with open_queue(tmp_path) as f:
        assert (f.cursor, f.pages, f.bytes) == (entries[1].end, 2, 200)
        assert f.next() == entries[2]
        f.commit(entries[2], pages=3, bytes_=300)  # overwrites the damaged slot, not the good one
        f.save(f.mark())
    with open_queue(tmp_path) as f:
        assert (f.cursor, f.pages, f.bytes) == (entries[2].end, 3, 300)


@pytest.mark.parametrize("damage", ["garbage", "short", "empty"])
def test_unreadable_cursor_restarts_from_the_first_entry(tmp_path: Path, damage: str):
    entries = write_committed(tmp_path, 4)
    cursor = tmp_path / CURSOR
    if damage == "garbage":
        cursor.write_bytes(os.urandom(1024))
    elif damage == "short":
        cursor.write_bytes(cursor.read_bytes()[:20])
    else:
        cursor.write_bytes(b"")
    with open_queue(tmp_path) as f:
        assert (f.cursor, f.pages, f.bytes) == (0, 0, 0)
        assert f.pending == 5
        assert drain(f) == entries


def test_cursor_past_the_log_or_between_lines_rounds_down(tmp_path: Path):
    entries = write_committed(tmp_path, 5)
    log = (tmp_path / LOG).read_bytes()
    (tmp_path / LOG).write_bytes(log[: entries[2].end])  # the log's tail never reached the disk
    with open_queue(tmp_path) as f:
        assert (f.cursor, f.pages) == (entries[2].end, 5)
        assert f.pending == 0
        assert f.next() is None
        f.commit(Entry("http://a/1", 0, entries[1].end + 3), pages=5, bytes_=500)  # mid-line
        f.save(f.mark())
    with open_queue(tmp_path) as f:
        assert f.cursor == entries[1].end
        assert f.next() == entries[2]


def test_pending_counts(tmp_path: Path):
    with open_queue(tmp_path) as f:
        assert (len(f), f.pending) == (0, 0)
        for i in range(4):
            f.add(f"http://a/{i}", 0)
        f.next()
        assert (len(f), f.pending) == (4, 3)
        f.add("http://a/4", 1)
        f.add("http://a/4", 1)
        assert (len(f), f.pending) == (5, 4)
        drain(f)
        assert f.pending == 0


def test_long_urls_across_the_write_buffer(tmp_path: Path):
    urls = [f"http://a/{i}/" + "x" * 3000 for i in range(40)]
    with open_queue(tmp_path) as f:
        out = []
        for url in urls:
            f.add(url, 2)
            if len(out) % 3 == 0:
                out.append(f.next())
        out += drain(f)
        assert [e.url for e in out if e] == urls
        assert all(e.depth == 2 for e in out if e)


def test_second_open_of_a_site_is_refused(tmp_path: Path):
    f = open_queue(tmp_path)
    with pytest.raises(RuntimeError, match="already open"):
        open_queue(tmp_path)
    f.close()
    open_queue(tmp_path).close()


def test_site_dir_names():
    root = Path("/archive")
    d = queue_dir(root, "http://site-001.demo:8080")
    assert d.parent.parent == root / "crawl-queues"
    assert len(d.parent.name) == 2 and int(d.parent.name, 16) >= 0
    assert d.name == "http,site-001.demo,8080"
    assert queue_dir(root, "https://example.org").name == "https,example.org"
    odd = [
        "http://[::1]:8080",
        "http://[2001:db8::1]",
        "https://xn--bcher-kva.example",
        "http://bücher.example:81",
        "http://a,b%2C.example",
        "http://192.0.2.1:80",
    ]
    names = set()
    safe = set(string.ascii_letters + string.digits + "_.~%,-")
    for origin in [*odd, "http://site-001.demo:8080", "https://example.org"]:
        path = queue_dir(root, origin)
        assert set(path.name) <= safe
        assert queue_origin(path) == origin
        names.add(path.name)
    assert len(names) == 8
    assert queue_dir(root, "http://[::1]:8080").name == "http,%5B%3A%3A1%5D,8080"
    for bad in (
        "example.org",
        "http://",
        "http://a/b",
        "http://a:",
        "http://[::1",
        "http://[::1]x",
        "http://" + "a" * 260,
    ):
        with pytest.raises(ValueError):
            queue_dir(root, bad)


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(["http", "https"]), st.text("abz09._~-", min_size=1, max_size=245),
       st.one_of(st.none(), st.text("0123456789", min_size=0, max_size=6)))
def test_origins_the_always_fit_regex_matches_have_a_queue_name(scheme, host, port):
    """The links batch asks QueueNames only about sites ALWAYS_FIT does not match."""
    origin = f"{scheme}://{host}" + ("" if port is None else f":{port}")
    if re.fullmatch(QueueNames.ALWAYS_FIT.strip("^$"), origin):
        assert QueueNames(Path("/archive"))(origin) is None


def test_a_commit_not_saved_is_fetched_again_after_a_crash(tmp_path: Path):
    with open_queue(tmp_path) as f:
        for n in range(3):
            f.add(f"http://a/{n}", 0)
        first = f.next()
        f.commit(first, pages=1, bytes_=10)
        f.save(f.mark())                                  # page 0 is durable
        f.commit(f.next(), pages=2, bytes_=20)            # page 1: its WARC record is not yet
    with open_queue(tmp_path) as f:
        assert (f.pages, f.bytes) == (1, 10)
        assert [e.url for e in drain(f)] == ["http://a/1", "http://a/2"]


def test_restart_hands_every_entry_out_again_and_survives_reopen(tmp_path: Path):
    with open_queue(tmp_path / "s") as f:
        for n in range(3):
            f.add(f"http://a.test/{n}", 0)
        while (entry := f.next()) is not None:
            f.commit(entry, pages=5, bytes_=50)
            f.save(f.mark())
        f.restart()
        assert (f.cursor, f.pages, f.bytes, f.pending) == (0, 0, 0, 3)
        first = f.next()
        assert first is not None and first.url == "http://a.test/0"
        assert not f.add("http://a.test/1", 0)           # still known: not queued twice
    with open_queue(tmp_path / "s") as f:             # the restart was durable
        assert f.pending == 3 and f.pages == 0
        assert [f.next().url for _ in range(3)] == [f"http://a.test/{n}" for n in range(3)]


def test_recovered_moves_the_cursor_and_keeps_done_entries_beyond_a_gap(tmp_path: Path):
    with open_queue(tmp_path) as f:
        for n in range(5):
            f.add(f"http://a/{n}", 1)
        pending = [entry for entry, known in f.pending_entries()]
        assert [known for _, known in f.pending_entries()] == [False] * 5
        assert f.pending == 5                           # listing hands nothing out
        # /0 done, /1 has no record (a gap), /3 done: the cursor stops after /0.
        f.recovered(pending[0].end, [pending[3].end], pages=2, bytes_=200)
        assert (f.cursor, f.pages, f.bytes, f.pending) == (pending[0].end, 2, 200, 3)
        assert [known for _, known in f.pending_entries()] == [False, False, True, False]
        assert [e.url for e in drain(f)] == ["http://a/1", "http://a/2", "http://a/4"]
        with pytest.raises(ValueError):                # only on a fresh queue
            f.recovered(pending[4].end, [], pages=3, bytes_=300)
    assert (tmp_path / DONE).read_text().splitlines()[1:] == [str(pending[3].end)]
    with open_queue(tmp_path) as f:                 # durable, and the cursor file agrees
        assert (f.cursor, f.pages, f.pending) == (pending[0].end, 2, 3)
        first = f.next()
        assert first is not None and first.url == "http://a/1"
        # Once the visit's cursor passes the done entries, they are plain history.
        f.commit(pending[4], pages=5, bytes_=500)
        f.save(f.mark())
    with open_queue(tmp_path) as f:
        assert f.pending == 0 and f.next() is None
        f.recovered(f.cursor, [], pages=5, bytes_=500)
    assert not (tmp_path / DONE).exists()


def test_restart_forgets_the_done_set_and_records_when_it_ran(tmp_path: Path):
    with open_queue(tmp_path) as f:
        for n in range(3):
            f.add(f"http://a/{n}", 1)
        ends = [entry.end for entry, _ in f.pending_entries()]
        f.recovered(0, ends[1:], pages=2, bytes_=20)
        assert f.restarted_at is None
        before = time.time()
        f.restart()
        assert before <= f.restarted_at <= time.time()
        assert f.pending == 3 and [e.url for e in drain(f)] == [f"http://a/{n}" for n in range(3)]
    assert not (tmp_path / DONE).exists()
    with open_queue(tmp_path) as f:
        assert f.pending == 3 and f.restarted_at is not None
