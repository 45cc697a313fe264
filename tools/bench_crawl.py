"""Crawl benchmark: pages/s, CPU per page, peak memory and WARC MB/s of one crawler process.

Generates a demo web (default 200 sites x 100 pages plus assets), serves it from a separate
process on 127.0.0.1, and crawls it with ``archiver crawl --until-idle`` and ``min_rest = 0`` as a
real child process, WARCs written. CPU and peak RSS are the crawler child's own (getrusage), so the
server's work is not counted. Targets on the project's 2-core machine: >= 500 pages/s, <= 2 ms of
CPU per page, and peak memory bounded by active sites, not by URLs crawled (compare two sizes).

    python -m tools.bench_crawl [--sites 200] [--pages 100] [--slots 64]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from demoweb import WebSpec, run_demo_process

CONFIG = """\
[archive]
root = "archive"
[crawl]
# Every demo site lives on 127.0.0.1: allow one connection per site, not per address.
connections_per_address = 64
allowed_networks = ["127.0.0.0/8"]
sites_per_process = {slots}
min_rest = 0.0
max_rest = 0.0
rest_factor = 0.0
status_interval = 5.0
retry_delay = 0.5
site_retries = 1
[dns]
hosts_file = "hosts"
nameservers = ["127.0.0.1:9"]
[log]
level = "warning"
"""


def run(sites: int, pages: int, slots: int, work: Path) -> dict[str, float]:
    spec = WebSpec(sites=sites, pages_per_site=pages, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        (work / "hosts").write_text(web.hosts_file())
        (work / "archiver.toml").write_text(CONFIG.format(slots=slots))
        (work / "seeds.txt").write_text("".join(f"{o}/\n" for o in web.origins()))
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "archiver", "crawl", "--config",
                                 str(work / "archiver.toml"), "--seeds", str(work / "seeds.txt"),
                                 "--until-idle"], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"crawl failed with exit code {proc.returncode}")
    state = json.loads((work / "archive" / "state" / "crawl-0.json").read_text())
    pages_done = state["pages"]
    warc_bytes = sum(p.stat().st_size for p in (work / "archive" / "warcs").glob("*.warc.gz"))
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "sites": sites, "pages_per_site": pages, "fetched": pages_done, "wall_s": round(wall, 2),
        "pages_per_s": round(pages_done / wall, 1),
        "cpu_ms_per_page": round(1000 * cpu / pages_done, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "warc_mib": round(warc_bytes / 2**20, 1),
        "warc_mib_per_s": round(warc_bytes / 2**20 / wall, 2),
        "http_mib_per_s": round(state["bytes"] / 2**20 / wall, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="archiver crawl benchmark")
    parser.add_argument("--sites", type=int, default=200)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--keep", help="folder to keep the archive in (default: a temporary one)")
    args = parser.parse_args()
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
        result = run(args.sites, args.pages, args.slots, work)
    else:
        with tempfile.TemporaryDirectory(prefix="archiver-bench-") as tmp:
            result = run(args.sites, args.pages, args.slots, Path(tmp))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
