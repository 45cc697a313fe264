import subprocess
import sys
from pathlib import Path

from tests.support.crawlqueues import drain, open_queue
from tests.support.repo import ROOT


def test_process_crash_after_commit_keeps_progress_and_links(tmp_path: Path):
    script = (
        "import os, sys\nfrom pathlib import Path\n"
        "from archiver.queues.embedded.crawlqueue import CrawlQueue\n"
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
