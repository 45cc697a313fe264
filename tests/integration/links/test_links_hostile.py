"""The external-link batch command counts a host too long for a crawl queue as a bad line."""

from __future__ import annotations

import subprocess

from tests.support.linkbatch import links_config, write_spool
from tests.support.repo import ARCHIVER

STAMP = "20261122000000"
LONG_HOST = ".".join(["a" * 62] * 4)  # 251 characters: a valid name, too long for a directory


def test_a_host_too_long_for_a_crawl_queue_is_a_bad_line(tmp_path):
    cfg = links_config(tmp_path)
    write_spool(cfg.root, "0-20261122000000-00001.tsv", [
        f"http://{LONG_HOST}/\thttp://x.test\t{STAMP}",
        f"http://b.test/\thttp://x.test\t{STAMP}",
    ])
    done = subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "2 URLs read, 1 new URLs, 1 new sites, 1 bad lines" in done.stdout
    assert "origin too long for a directory name" in done.stderr
    assert list((cfg.root / "spool" / "done").iterdir())          # the file is done
