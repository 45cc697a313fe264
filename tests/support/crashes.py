"""Kill a crawler child with SIGKILL at random moments and count what each kill cost: the pages and
robots.txt fetched again (the crash tests and ``python -m tools.bench_crash``, which explains the
method)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.repo import ARCHIVER

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
    return subprocess.Popen([*ARCHIVER, "crawl", "run", "--config", str(cfg), "--until-idle", *extra],
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
    final = subprocess.run([*ARCHIVER, "crawl", "run", "--config", str(cfg), "--until-idle"],
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
