"""Crawl benchmark: pages/s, CPU per page, peak memory and WARC MB/s of one crawler process.

Generates a demo web (default 200 sites x 100 pages plus assets), serves it from a separate
process on 127.0.0.1, and crawls it with ``archiver crawl run --until-idle`` and ``min_rest = 0`` as a
real child process, WARCs written. CPU and peak RSS are the crawler child's own (getrusage), so the
server's work is not counted. Targets on the project's 2-core machine: >= 500 pages/s, <= 2 ms of
CPU per page, and peak memory bounded by active sites, not by URLs crawled (compare two sizes).
``decisions`` counts the lines the crawl wrote to the sites' decision logs. ``open_files_peak`` is
the most descriptors the crawler held at once (``/proc/<pid>/fd``, sampled every 50 ms) and
``open_files_by_kind`` what they were then (catalog shards, crawl queues, sockets...); ``--nofile N``
runs the crawler with ``RLIMIT_NOFILE`` N, soft and hard.

    python -m tools.bench_crawl [--sites 200] [--pages 100] [--slots 64] [--nofile N]
        [--store sqlite | postgresql://... | postgres] [--warc-store FOLDER | s3]

``--store`` runs the same crawl on the shared stores (docs/cluster.md): a
PostgreSQL URL (an empty database: the benchmark runs ``archiver store init`` on it) or
``postgres`` for a throwaway local server with fsync on (``tools.pgserver``). Closed bundles are
then shipped to ``--warc-store``: a folder (default: one in the work folder) or ``s3`` for a
throwaway moto server (``tools.s3server``; moto's speed, not S3's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

from archiver.store.s3.objectstore import s3_client
from demoweb import WebSpec, run_demo_process
from tools.benchconfig import demo_config
from tools.pgserver import running_postgres
from tools.s3server import CREDENTIALS, running_moto


def archiver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "archiver", *args], capture_output=True, text=True,
                          check=False)


@contextlib.contextmanager
def shared_stores(work: Path, store: str, warc_store: str) -> Iterator[tuple[str, str]]:
    """(database URL, config lines) of the shared stores, servers started for the run if asked."""
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(running_postgres(durable=True)).url() if store == "postgres" else store
        lines = f'[store]\nurl = "{url}"\n'
        if warc_store == "s3":
            endpoint = stack.enter_context(running_moto())
            os.environ.update(CREDENTIALS)
            s3_client(endpoint, CREDENTIALS["AWS_DEFAULT_REGION"]).create_bucket(Bucket="bench")
            lines += f'[warc]\nstore = "s3://bench/crawl"\n[s3]\nendpoint_url = "{endpoint}"\n'
        else:
            lines += f'[warc]\nstore = "{warc_store or work / "shipped"}"\n'
        yield url, lines


def prepare(config: Path, url: str) -> None:
    """``archiver store init`` on an empty database (SystemExit otherwise)."""
    initialised = archiver("store", "init", "--config", str(config))
    if initialised.returncode != 0:
        raise SystemExit(f"store init failed: {initialised.stderr}")
    with psycopg.connect(url) as db:
        if db.execute("SELECT count(*) FROM sites").fetchone() != (0,):
            raise SystemExit("the benchmark needs an empty database (it has sites already)")


# What a descriptor's target is, by the first pattern it matches (``/proc/<pid>/fd`` links).
FILE_KINDS = (
    ("catalog", re.compile(r"/catalog/\d+\.sqlite")),
    ("digests", re.compile(r"/catalog/digests\.sqlite")),
    ("crawl-queue", re.compile(r"/crawl-queues/")),
    ("site-queue", re.compile(r"/sites/")),
    ("dns-history", re.compile(r"/dns\.sqlite")),
    ("warc", re.compile(r"/warcs/|/shipped/")),
    ("spool", re.compile(r"/spool/")),
    ("socket", re.compile(r"^socket:")),
    ("pipe", re.compile(r"^pipe:")),
)


def file_kind(target: str) -> str:
    return next((kind for kind, pattern in FILE_KINDS if pattern.search(target)), "other")


def open_files(pid: int) -> Counter[str]:
    """The process's open descriptors by kind (empty once it has exited)."""
    kinds: Counter[str] = Counter()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                kinds[file_kind(os.readlink(f"/proc/{pid}/fd/{fd}"))] += 1
    return kinds


def watch_files(pid: int, stop: threading.Event, peak: list[Counter[str]]) -> None:
    """Keep in ``peak[0]`` the descriptors by kind at the moment the process held the most."""
    while not stop.wait(0.05):
        now = open_files(pid)
        if now.total() > peak[0].total():
            peak[0] = now


def limit_files(nofile: int | None) -> Callable[[], None] | None:
    """The child's preexec_fn setting its RLIMIT_NOFILE, soft and hard (None: left as it is)."""
    if nofile is None:
        return None
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))


def run(sites: int, pages: int, slots: int, work: Path, store: str = "sqlite", warc_store: str = "",
        nofile: int | None = None) -> dict[str, object]:
    spec = WebSpec(sites=sites, pages_per_site=pages, port=0, trap=False)
    config = work / "archiver.toml"
    with contextlib.ExitStack() as stack:
        web, _port, _proc = stack.enter_context(run_demo_process(spec))
        (work / "hosts").write_text(web.hosts_file())
        config.write_text(demo_config(sites_per_process=slots, status_interval=5.0))
        if store != "sqlite":
            url, lines = stack.enter_context(shared_stores(work, store, warc_store))
            config.write_text(config.read_text() + lines)
            prepare(config, url)
        (work / "seeds.txt").write_text("".join(f"{o}/\n" for o in web.origins()))
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "archiver", "crawl", "run", "--config", str(config),
                                 "--seeds", str(work / "seeds.txt"), "--until-idle"],
                                stdout=subprocess.DEVNULL, preexec_fn=limit_files(nofile))
        stop, peak = threading.Event(), [Counter[str]()]
        watcher = threading.Thread(target=watch_files, args=(proc.pid, stop, peak))
        watcher.start()
        _, status, usage = os.wait4(proc.pid, 0)
        stop.set()
        watcher.join()
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"crawl failed with exit code {proc.returncode}")
        state = json.loads(archiver("status", "--config", str(config), "--json").stdout)[0]
        warc_bytes = sum(p.stat().st_size for folder in (work / "archive" / "warcs", work / "shipped")
                         for p in folder.glob("*.warc.gz")) if warc_store != "s3" else 0
        decisions = decisions_logged(work, url if store != "sqlite" else "")
    pages_done = state["pages"]
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "store": store, "warc_store": warc_store or "folder",
        "sites": sites, "pages_per_site": pages, "fetched": pages_done, "wall_s": round(wall, 2),
        "pages_per_s": round(pages_done / wall, 1),
        "cpu_ms_per_page": round(1000 * cpu / pages_done, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "warc_mib": round(warc_bytes / 2**20, 1),
        "warc_mib_per_s": round(warc_bytes / 2**20 / wall, 2),
        "http_mib_per_s": round(state["bytes"] / 2**20 / wall, 2),
        "decisions": decisions,
        "open_files_peak": peak[0].total(),
        "open_files_by_kind": dict(peak[0].most_common()),
    }


def decisions_logged(work: Path, url: str) -> int:
    """Lines of the sites' decision logs (``archiver why``): their files, or the shared table."""
    if url:
        with psycopg.connect(url) as db:
            return int((db.execute("SELECT count(*) FROM crawl_decisions").fetchone() or (0,))[0])
    return sum(path.read_bytes().count(b"\n")
               for path in (work / "archive" / "crawl-queues").glob("*/*/decisions*"))


def main() -> int:
    parser = argparse.ArgumentParser(description="archiver crawl benchmark")
    parser.add_argument("--sites", type=int, default=200)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--keep", help="folder to keep the archive in (default: a temporary one)")
    parser.add_argument("--store", default="sqlite",
                        help='"sqlite" (default), a postgresql:// URL, or "postgres" (a local server)')
    parser.add_argument("--warc-store", default="", help='with --store: a folder, or "s3" (moto)')
    parser.add_argument("--nofile", type=int, help="the crawler's RLIMIT_NOFILE, soft and hard")
    args = parser.parse_args()
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
        result = run(args.sites, args.pages, args.slots, work, args.store, args.warc_store,
                         args.nofile)
    else:
        with tempfile.TemporaryDirectory(prefix="archiver-bench-") as tmp:
            result = run(args.sites, args.pages, args.slots, Path(tmp), args.store, args.warc_store,
                         args.nofile)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
