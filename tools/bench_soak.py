"""Soak benchmark: a crawler daemon revisiting a demo web for a set time, one line per interval.

Serves a demo web from a child process and runs ``archiver crawl run`` as a daemon on it (no
``--until-idle``, no rests), with every site revisited ``--revisit`` seconds after its visit ends
(``crawl.revisit_interval``, ``revisit_min`` and ``revisit_max`` all set to it), so the same pages
are fetched again and again for ``--minutes``. Every ``--every`` seconds it prints the daemon's
resident memory, open descriptors, requests/s and CPU per request over the interval, and the
catalog's and WARC folder's bytes per capture; at the end, the slope of each per hour (least
squares over the intervals after the first, which holds the start-up). A service that stays flat
shows slopes near zero; a leak shows as a slope, whatever the machine's speed.

    python -m tools.bench_soak [--sites 100] [--pages 100] [--minutes 15] [--every 60]
                               [--revisit 2] [--json]

The crawler child is whichever ``archiver`` this interpreter imports: run it from an older
checkout for a before-and-after comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from demoweb import WebSpec, run_demo_process
from tools.benchconfig import demo_config

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Sample:
    """The daemon at one moment: cumulative requests and CPU, and what it holds."""

    seconds: float
    requests: int
    cpu_s: float
    rss_mib: float
    fds: int
    catalog_bytes: int
    warc_bytes: int


@dataclass
class Interval:
    """What the daemon did between two samples, and what it held at the end."""

    minute: float
    requests_per_s: float
    cpu_ms_per_request: float
    rss_mib: float
    fds: int
    catalog_bytes_per_capture: float
    warc_bytes_per_capture: float


def sample(pid: int, root: Path, started: float) -> Sample:
    """The daemon ``pid`` and its archive at ``root``, read from /proc and the status file."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    status = root / "state" / "crawl-0.json"
    requests = json.loads(status.read_text())["pages"] if status.exists() else 0
    return Sample(seconds=time.monotonic() - started, requests=requests, cpu_s=cpu, rss_mib=rss,
                  fds=len(os.listdir(f"/proc/{pid}/fd")),
                  catalog_bytes=_bytes(root / "catalog"), warc_bytes=_bytes(root / "warcs"))


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*") if p.is_file()) if folder.is_dir() else 0


def interval(before: Sample, after: Sample) -> Interval:
    requests = after.requests - before.requests
    captures = max(after.requests, 1)
    return Interval(
        minute=round(after.seconds / 60, 1),
        requests_per_s=round(requests / (after.seconds - before.seconds), 1),
        cpu_ms_per_request=round(1000 * (after.cpu_s - before.cpu_s) / max(requests, 1), 3),
        rss_mib=round(after.rss_mib, 1),
        fds=after.fds,
        catalog_bytes_per_capture=round(after.catalog_bytes / captures, 1),
        warc_bytes_per_capture=round(after.warc_bytes / captures, 1),
    )


def slope_per_hour(minutes: list[float], values: list[float]) -> float:
    """The least-squares slope of ``values`` over ``minutes``, per hour."""
    n = len(minutes)
    if n < 2:
        return 0.0
    mx, my = sum(minutes) / n, sum(values) / n
    spread = sum((x - mx) ** 2 for x in minutes)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(minutes, values, strict=True)) / spread


def run(args: argparse.Namespace, work: Path) -> list[Interval]:
    spec = WebSpec(sites=args.sites, pages_per_site=args.pages, port=0, trap=False)
    config = work / "archiver.toml"
    root = work / "archive"
    with run_demo_process(spec) as (web, _port, _proc):
        (work / "hosts").write_text(web.hosts_file())
        config.write_text(demo_config(
            sites_per_process=64, status_interval=min(5.0, args.every / 2), poll_interval=0.5,
            revisit_interval=args.revisit, revisit_min=args.revisit, revisit_max=args.revisit))
        (work / "seeds.txt").write_text("".join(f"{o}/\n" for o in web.origins()))
        with (work / "crawler.log").open("w") as log:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "archiver", "crawl", "run", "--config", str(config),
                 "--seeds", str(work / "seeds.txt")], stdout=subprocess.DEVNULL, stderr=log)
        started = time.monotonic()
        rows: list[Interval] = []
        try:
            last = sample(daemon.pid, root, started)
            deadline = started + 60 * args.minutes
            while time.monotonic() < deadline:
                time.sleep(max(0.0, min(args.every, deadline - time.monotonic())))
                if daemon.poll() is not None:
                    raise SystemExit(f"the crawler exited with {daemon.returncode}: see {work}/crawler.log")
                now = sample(daemon.pid, root, started)
                rows.append(interval(last, now))
                last = now
                if not args.json:
                    print(_line(rows[-1]), flush=True)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=120)
    return rows


_COLUMNS = ("minute", "requests/s", "CPU ms/request", "RSS MiB", "fds", "catalog B/capture",
            "WARC B/capture")


def _line(row: Interval) -> str:
    return "| " + " | ".join(str(v) for v in asdict(row).values()) + " |"


def summary(rows: list[Interval]) -> dict[str, float]:
    """Slopes per hour over the intervals after the first (start-up), and the first and last rows."""
    steady = rows[1:] or rows
    minutes = [r.minute for r in steady]
    return {
        name: round(slope_per_hour(minutes, [getattr(r, name) for r in steady]), 3)
        for name in ("requests_per_s", "cpu_ms_per_request", "rss_mib", "fds", "catalog_bytes_per_capture")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="archiver soak benchmark: a revisiting daemon over time")
    parser.add_argument("--sites", type=int, default=100)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between lines")
    parser.add_argument("--revisit", type=float, default=2.0, help="seconds before a site is revisited")
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")
    parser.add_argument("--keep", help="folder to keep the archive in (default: a temporary one)")
    args = parser.parse_args()
    if not args.json:
        print(f"demo web: {args.sites} sites x {args.pages} pages, revisited {args.revisit:g} s after "
              f"each visit, for {args.minutes:g} minutes")
        print("| " + " | ".join(_COLUMNS) + " |")
        print("|" + "---|" * len(_COLUMNS))
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
        rows = run(args, work)
    else:
        with tempfile.TemporaryDirectory(prefix="archiver-soak-") as tmp:
            rows = run(args, Path(tmp))
    slopes = summary(rows)
    if args.json:
        print(json.dumps({"intervals": [asdict(r) for r in rows], "slopes_per_hour": slopes}, indent=1))
    else:
        print("slopes per hour (after the first interval): "
              + ", ".join(f"{name} {value:+g}" for name, value in slopes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
