import subprocess
import sys
from pathlib import Path

from tests.support.crawlqueues import drain, open_queue
from tests.support.repo import ROOT


def test_append_external_from_another_process_while_open(tmp_path: Path):
    script = (
        "import sys\nfrom pathlib import Path\nfrom archiver.queues.crawlqueue import CrawlQueue\n"
        "CrawlQueue.append_external(Path(sys.argv[1]), [(f'http://a/p{i}', 1) for i in range(500)])\n"
    )
    with open_queue(tmp_path) as f:
        f.add("http://a/p7", 1)
        children = [
            subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT)
            for _ in range(2)
        ]
        assert [child.wait() for child in children] == [0, 0]
        urls = [e.url for e in drain(f)]
    assert sorted(urls) == sorted(f"http://a/p{i}" for i in range(500))
    assert urls[0] == "http://a/p7"


def test_process_crash_after_commit_keeps_progress_and_links(tmp_path: Path):
    script = (
        "import os, sys\nfrom pathlib import Path\nfrom archiver.queues.crawlqueue import CrawlQueue\n"
        "f = CrawlQueue.open(Path(sys.argv[1]), bloom_bits=262_144, max_fp=1e-3)\n"
        "f.add('http://a/', 0)\n"
        "f.sync()\n"
        "entry = f.next()\n"
        "f.add('http://a/found', 1)\n"  # a link found on the page, still in a Python buffer
        "f.commit(entry, pages=1, bytes_=123)\n"
        "f.save(f.mark())\n"  # the crawler saves a mark once the page's WARC record is fsynced
        "f.add('http://a/lost', 1)\n"  # found after the last commit: not promised
        "os._exit(9)\n"  # no close, no flush
    )
    assert subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT).returncode == 9
    with open_queue(tmp_path) as f:
        assert (f.pages, f.bytes) == (1, 123)
        assert [e.url for e in drain(f)] == ["http://a/found"]
