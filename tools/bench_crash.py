"""What a ``kill -9`` costs: crawl a demo web, kill the crawler at random moments, count refetches.

The demo web runs in its own process and logs every request it answers; the crawler is a real
``archiver crawl --until-idle`` child, sent SIGKILL after a random number of fetches and started
again, then left to finish. A refetch is a request for a URL that an earlier run (one ended by a
kill) had already requested. For each kill it reports the sites active at the kill (from the
crawler's own log: visits started and not ended) and the refetches it caused: pages (URLs
requested before the kill and again later) and robots.txt (sites whose robots.txt was requested
before the kill and again later: every interrupted visit starts over with its robots.txt).

    python -m tools.bench_crash [--sites 25] [--pages 30] [--rest 0.1] [--sync 2.0] [--kills 6]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from demoweb import WebSpec, run_demo_process

ARCHIVER = [sys.executable, "-m", "archiver"]
CONFIG = """\
[archive]
root = "archive"
[crawl]
min_rest = {rest}
max_rest = 2.0
rest_factor = 0.0
retry_delay = 0.2
site_retries = 2
status_interval = 0.5
poll_interval = 0.2
# Every demo site lives on 127.0.0.1: per-address politeness would crawl them one at a time.
connections_per_address = 64
allowed_networks = ["127.0.0.0/8"]
[warc]
sync_interval = {sync}
[dns]
hosts_file = "hosts"
nameservers = ["127.0.0.1:9"]
[log]
level = "debug"
"""
_ENDED = frozenset({"site-done", "site-retry", "site-deferred", "site-stopped", "site-crashed"})


@dataclass
class Run:
    """One crawler run: when it started, its log, and whether it was killed."""

    started: float
    log: list[str] = field(default_factory=list)
    killed: bool = False

    def active(self) -> set[str]:
        """Sites whose visit started in this run and had not ended when its log stops."""
        active: set[str] = set()
        for line in self.log:
            name = _field(line, "event")
            if name == "site-start":
                active.add(_field(line, "site"))
            elif name in _ENDED:
                active.discard(_field(line, "site"))
        return active


@dataclass(frozen=True)
class KillCost:
    active: int  # sites whose visit was under way at the kill
    pages: int  # URLs requested before the kill and again after it (robots.txt aside)
    robots: int  # sites whose robots.txt was requested before the kill and again after it


def _field(line: str, name: str) -> str:
    for part in line.split():
        if part.startswith(name + "="):
            return part[len(name) + 1 :].strip('"')
    return ""


def crawl(cfg: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*ARCHIVER, "crawl", "--config", str(cfg), "--until-idle", *extra],
                            stderr=subprocess.PIPE, text=True)


def run_until_fetches(proc: subprocess.Popen[str], fetches: int, log: list[str] | None = None
                      ) -> bool:
    """Read the crawler's log until it reports ``fetches`` fetches (with 0, until its first line,
    which a start after a kill writes while it recovers); False if it ended first."""
    assert proc.stderr is not None
    seen = 0
    for line in proc.stderr:
        if log is not None:
            log.append(line)
        seen += "event=fetched" in line
        if seen >= fetches:
            return True
    return False


def kill_and_restart(cfg: Path, seeds: Path, *, kills: int, max_fetches: int,
                     rng: random.Random, early_every: int = 0
                     ) -> tuple[list[Run], subprocess.CompletedProcess[str]]:
    """Kill the crawler ``kills`` times (or until the crawl ends), each time after 1 to
    ``max_fetches`` fetches, or with ``early_every`` every so many kills at its first log line
    (during its recovery), then let a last run finish. Returns every run and the last one's
    result."""
    runs: list[Run] = []
    while (done := sum(run.killed for run in runs)) < kills:
        run = Run(time.time())
        proc = crawl(cfg, *([] if runs else ["--seeds", str(seeds)]))
        early = early_every and done % early_every == early_every - 1
        if not run_until_fetches(proc, 0 if early else rng.randint(1, max_fetches), run.log):
            assert proc.stderr is not None
            run.log += proc.stderr.readlines()
            proc.wait(timeout=60)
            runs.append(run)
            break                                        # the crawl finished before this kill
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        assert proc.stderr is not None
        run.log += proc.stderr.readlines()               # everything it logged before dying
        run.killed = True
        runs.append(run)
    runs.append(Run(time.time()))
    final = subprocess.run([*ARCHIVER, "crawl", "--config", str(cfg), "--until-idle"],
                           capture_output=True, text=True, timeout=600, check=False)
    runs[-1].log = final.stderr.splitlines(keepends=True)
    return runs, final


def kill_costs(request_log: Path, runs: list[Run], *, exclude_host: str = "robots500."
               ) -> list[KillCost]:
    """What each kill cost (one per killed run, in order), from the demo server's request log.

    A request belongs to the last run started before the server received it."""
    starts = [run.started for run in runs]
    seen_in: dict[tuple[str, str], set[int]] = defaultdict(set)  # (host, target) -> run indexes
    for line in request_log.read_text().splitlines():
        entry = json.loads(line)
        if entry["host"].startswith(exclude_host):
            continue
        robots = entry["target"].startswith("/robots")  # robots.txt and its redirect target
        key = (entry["host"], "robots" if robots else entry["target"])
        seen_in[key].add(max(0, sum(start <= entry["start"] for start in starts) - 1))
    costs = []
    for index, run in enumerate(runs):
        if not run.killed:
            continue
        again = [key for key, seen in seen_in.items() if index in seen and max(seen) > index]
        robots = sum(target == "robots" for _, target in again)
        costs.append(KillCost(len(run.active()), len(again) - robots, robots))
    return costs


def main() -> int:
    parser = argparse.ArgumentParser(description="what a kill -9 of a crawler costs")
    parser.add_argument("--sites", type=int, default=25)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--rest", type=float, default=0.1)
    parser.add_argument("--sync", type=float, default=2.0)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--max-fetches", type=int, default=200)
    parser.add_argument("--early-every", type=int, default=0,
                        help="every so many kills, kill at the first log line (during recovery)")
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    spec = WebSpec(sites=args.sites, pages_per_site=args.pages, port=0, trap=False)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        requests = work / "requests.jsonl"
        with run_demo_process(spec, requests) as (web, _port, _proc):
            (work / "hosts").write_text(web.hosts_file())
            cfg = work / "archiver.toml"
            cfg.write_text(CONFIG.format(rest=args.rest, sync=args.sync))
            seeds = work / "seeds.txt"
            seeds.write_text("".join(o + "/\n" for o in web.origins()))
            runs, final = kill_and_restart(cfg, seeds, kills=args.kills,
                                           max_fetches=args.max_fetches,
                                           rng=random.Random(args.seed),
                                           early_every=args.early_every)
        if final.returncode != 0:
            raise SystemExit(f"the last run failed ({final.returncode}):\n{final.stderr[-2000:]}")
        costs = kill_costs(requests, runs)
    if not costs:
        raise SystemExit("the crawl ended before the first kill: nothing was measured")
    for number, cost in enumerate(costs, 1):
        print(f"kill {number}: {cost.active} sites active, {cost.pages} pages and "
              f"{cost.robots} robots.txt fetched again")
    print(f"{len(costs)} kills: {sum(c.pages for c in costs)} pages and "
          f"{sum(c.robots for c in costs)} robots.txt fetched again, "
          f"{sum(c.active for c in costs)} sites active at the kills")
    return 0


if __name__ == "__main__":
    sys.exit(main())
