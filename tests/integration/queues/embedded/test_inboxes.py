"""Site inboxes across processes: two appending at once while the site's queue merges, a kill -9 in
the middle of appends, and one between the log's fsync and the rows' delete."""

import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from archiver.queues.embedded.crawlqueue import LOG, queue_dir
from archiver.queues.embedded.inboxes import INBOXES
from tests.support.crawlqueues import drain, embedded_queues
from tests.support.repo import ROOT

A = "http://a.test"
_QUEUES = ("import os, signal, sys\nfrom pathlib import Path\n"
           "from tests.support.crawlqueues import embedded_queues\n"
           "queues = embedded_queues(Path(sys.argv[1]))\n")


def _child(script: str, root: Path, *args: str, **popen) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _QUEUES + script, str(root), *args], cwd=ROOT,
                            text=True, **popen)


def test_two_processes_append_while_the_queue_merges(tmp_path: Path):
    appender = (
        "name = sys.argv[2]\n"
        "for i in range(0, 400, 8):\n"  # 50 appends of 8 URLs, each its own transaction
        "    queues.append('http://a.test', [(f'http://a.test/{name}/{j}', 1) for j in range(i, i + 8)])\n"
        "    for n in range(20):\n"  # and 20 other sites' appends in one transaction
        "        queues.append(f'http://s{n}.test', [(f'http://s{n}.test/{name}{i}', 0)], sync=False)\n"
        "    queues.sync()\n"
    )
    with closing(embedded_queues(tmp_path)) as queues, queues.open(A) as crawl_queue:
        children = [_child(appender, tmp_path, name) for name in ("x", "y")]
        seen = []
        while any(child.poll() is None for child in children):  # merging while they append
            seen += [e.url for e in drain(crawl_queue)]
        assert [child.returncode for child in children] == [0, 0]
        seen += [e.url for e in drain(crawl_queue)]
        assert not crawl_queue.inbox_waiting()
    assert sorted(seen) == sorted(f"{A}/{name}/{j}" for name in ("x", "y") for j in range(400))
    with closing(sqlite3.connect(tmp_path / "crawl-queues" / INBOXES)) as db:
        assert db.execute("SELECT count(*), count(DISTINCT origin) FROM inbox").fetchone() == (2000, 20)


def test_a_kill_mid_append_loses_no_committed_append(tmp_path: Path):
    rounds = (
        "r = 0\n"
        "while True:\n"  # each round: 200 sites' appends in one transaction, then its number
        "    for n in range(200):\n"
        "        queues.append(f'http://s{n}.test', [(f'http://s{n}.test/{r}/{j}', 1) for j in range(10)],"
        " sync=False)\n"
        "    queues.sync()\n"
        "    print(r, flush=True)\n"
        "    r += 1\n"
    )
    child = _child(rounds, tmp_path, stdout=subprocess.PIPE)
    assert child.stdout is not None
    confirmed = [int(child.stdout.readline()) for _ in range(6)]
    child.send_signal(signal.SIGKILL)  # somewhere in round 6 or later
    child.wait()
    assert confirmed == list(range(6))
    with closing(sqlite3.connect(tmp_path / "crawl-queues" / INBOXES)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    per_round: dict[int, int] = {}
    with closing(embedded_queues(tmp_path)) as queues:
        for n in range(200):
            with queues.open(f"http://s{n}.test") as crawl_queue:
                for entry in drain(crawl_queue):
                    r = int(entry.url.split("/")[3])
                    per_round[r] = per_round.get(r, 0) + 1
    assert sorted(per_round)[:6] == confirmed  # every round confirmed is there
    assert sorted(per_round) == list(range(len(per_round)))
    assert set(per_round.values()) == {2000}  # all or nothing, also for the round the kill cut


def test_a_kill_between_the_logs_fsync_and_the_rows_delete(tmp_path: Path):
    merge_then_die = (
        "crawl_queue = queues.open('http://a.test')\n"  # merges at open: rows appended after it
        "print('open', flush=True)\n"
        "sys.stdin.readline()\n"
        "inbox = crawl_queue.take_inbox()\n"
        "crawl_queue.merge(inbox)\n"
        "os.fsync(crawl_queue.prepare_sync())\n"  # the lines are durable in the log...
        "os.kill(os.getpid(), signal.SIGKILL)\n"  # ...and the rows not deleted yet
    )
    with closing(embedded_queues(tmp_path)) as queues:
        queues.append(A, [(A + "/", 0)])
        child = _child(merge_then_die, tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "open\n"
        queues.append(A, [(A + "/1", 1), (A + "/2", 1)])
        child.stdin.write("go\n")
        child.stdin.close()
        assert child.wait() == -signal.SIGKILL
        log = queue_dir(tmp_path, A) / LOG
        assert log.read_bytes() == f"0\t{A}/\n1\t{A}/1\n1\t{A}/2\n".encode()
        with queues.open(A) as crawl_queue:  # the rows are merged again, and dropped as seen
            assert [e.url for e in drain(crawl_queue)] == [A + "/", A + "/1", A + "/2"]
            assert not crawl_queue.inbox_waiting()
        assert log.read_bytes() == f"0\t{A}/\n1\t{A}/1\n1\t{A}/2\n".encode()
