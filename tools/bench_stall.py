"""Event-loop stall benchmark: how long a crawler's event loop is held while other processes write.

Serves a demo web from a child process and runs, for ``--seconds``, a crawler process (a daemon, 64
slots, short rests) together with the writers that share its archive: ``archiver links run`` (merges
in-link counts and new sites into the site queue every poll), ``archiver seeds --recrawl`` in a loop
(the demo sites plus ``--extra-seeds`` unresolvable ones: thousands of small site-queue writes per
run, and recrawls that restart finished sites) and ``archiver dns run`` (DNS history writes every
second; the crawler's inline resolutions of the unresolvable seeds write failures there too). With
``--hold S``, the tool itself also takes the write lock of the site queue and of the DNS history for S
seconds every ``--every`` seconds, as a links batch merging a million new sites or a slow disk would.

The crawler child times every task step with :class:`archiver.crawl.loopwatch.LoopWatch` from the loop's
start until SIGTERM (not the drain and final flush), runs a heartbeat task (how late a 10 ms sleep
wakes up: blocking steps plus the CPU the other tasks and processes took), and a sampler thread
records where the main thread was during any step longer than 50 ms. It prints, as JSON, the longest
step, the heartbeat's worst lateness, the long steps, and the stacks of the worst few. It measures
whichever ``archiver`` it imports: run it from an older checkout (with this file and
``archiver/crawl/loopwatch.py`` copied in) for a before-and-after comparison.

    python -m tools.bench_stall [--sites 60] [--pages 40] [--seconds 60] [--extra-seeds 3000]
                                [--hold 0] [--every 3]
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import trio

from archiver import config, logs
from archiver.crawl.crawler import Crawler
from archiver.crawl.loopwatch import LoopWatch
from demoweb import WebSpec, run_demo_process

CONFIG = """\
[archive]
root = "archive"
[crawl]
connections_per_address = 64
allowed_networks = ["127.0.0.0/8"]
sites_per_process = 64
min_rest = 0.02
max_rest = 0.5
rest_factor = 0.0
status_interval = 1.0
poll_interval = 0.2
retry_delay = 0.5
site_retries = 1
[dns]
hosts_file = "hosts"
nameservers = ["127.0.0.1:9"]
timeout = 0.5
refresh_interval = 1.0
retry_base = 1.0
retry_max = 2.0
[spool]
max_age = 1.0
[links]
poll_interval = 0.5
[log]
level = "warning"
"""

SAMPLE_AFTER = 0.05  # a step longer than this has its main-thread stack sampled
HEARTBEAT = 0.01


class SampledWatch(LoopWatch):
    """A LoopWatch that also keeps every step of SAMPLE_AFTER or longer and, from a sampler thread,
    the main thread's stack during it."""

    def __init__(self) -> None:
        super().__init__()
        self.in_step = False
        self.long: list[tuple[float, float, str]] = []  # (started, took, task name)
        self.stacks: dict[float, list[str]] = {}  # step start -> the first stack sampled in it

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        super().before_task_step(task)
        self.in_step = True

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        super().after_task_step(task)
        self.in_step = False
        took = time.perf_counter() - self.step_started
        if took >= SAMPLE_AFTER:
            self.long.append((self.step_started, took, task.name))

    def sample(self, main: int, stop: threading.Event) -> None:
        while not stop.wait(0.005):
            started = self.step_started
            if self.in_step and time.perf_counter() - started >= SAMPLE_AFTER:
                frame = sys._current_frames().get(main)
                if frame is not None and started not in self.stacks:  # where it first stuck
                    self.stacks[started] = [
                        f"{Path(f.filename).name}:{f.lineno} {f.name}"
                        for f in traceback.extract_stack(frame)[-8:]]


def child(config_path: Path) -> int:
    """The crawler process: crawl until SIGTERM, then print the loop figures of the crawl (from the
    loop's start to SIGTERM: the drain and the final flush are not measured)."""
    cfg = config.load(config_path)
    logs.setup(cfg.log.level)
    crawler = Crawler(cfg)  # before the loop starts, as ``archiver crawl`` does
    watch = SampledWatch()
    stop = threading.Event()
    sampler = threading.Thread(target=watch.sample, args=(threading.get_ident(), stop), daemon=True)
    late = [0.0]

    async def heartbeat() -> None:
        trio.lowlevel.add_instrument(watch)
        while not crawler.ctx.draining.is_set():
            before = trio.current_time()
            await trio.sleep(HEARTBEAT)
            late[0] = max(late[0], trio.current_time() - before - HEARTBEAT)
        trio.lowlevel.remove_instrument(watch)

    async def main() -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(heartbeat)
            await crawler.run()
        return crawler.stats.pages

    sampler.start()
    pages = trio.run(main)
    stop.set()
    sampler.join()
    worst = sorted(watch.long, key=lambda step: -step[1])
    print(json.dumps({
        "pages": pages,
        "longest_step_ms": round(watch.longest * 1000, 1),
        "longest_step_task": watch.longest_task,
        "steps_over_100ms": watch.long_steps,
        "steps_over_50ms": len(watch.long),
        "heartbeat_late_max_ms": round(late[0] * 1000, 1),
        "worst": [{"ms": round(took * 1000, 1), "task": name, "stack": watch.stacks.get(started, [])}
                  for started, took, name in worst[:5]],
    }))
    return 0


def _archiver(*args: str) -> list[str]:
    return [sys.executable, "-m", "archiver", *args]


def hammer_seeds(cfg: Path, files: list[Path], stop: threading.Event, runs: list[int]) -> None:
    """``archiver seeds --recrawl`` over each file, again and again until ``stop``."""
    while not stop.is_set():
        for path in files:
            subprocess.run(_archiver("seeds", str(path), "--config", str(cfg), "--recrawl"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            runs[0] += 1


def hold_locks(paths: list[Path], hold: float, every: float, stop: threading.Event,
               held: list[int]) -> None:
    """Hold the write lock of each SQLite file in ``paths`` for ``hold`` seconds every ``every``."""
    while not stop.wait(every):
        for path in paths:
            db = sqlite3.connect(path, timeout=60, isolation_level=None)
            try:
                db.execute("BEGIN IMMEDIATE")
                stop.wait(hold)
                db.execute("ROLLBACK")
                held[0] += 1
            finally:
                db.close()


def run(sites: int, pages: int, seconds: float, extra: int, hold: float, every: float,
        work: Path) -> dict[str, object]:
    spec = WebSpec(sites=sites, pages_per_site=pages, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = work / "archiver.toml"
        (work / "hosts").write_text(web.hosts_file())
        cfg.write_text(CONFIG)
        demo = work / "demo-seeds.txt"
        demo.write_text("".join(f"{o}/\n" for o in web.origins()))
        unresolvable = work / "extra-seeds.txt"
        unresolvable.write_text("".join(f"http://h{i}.stall.invalid/\n" for i in range(extra)))
        for path in (demo, unresolvable):
            subprocess.run(_archiver("seeds", str(path), "--config", str(cfg)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        with (work / "crawler.log").open("w") as log:
            crawler = subprocess.Popen([sys.executable, "-m", "tools.bench_stall", "--child", str(cfg)],
                                       stdout=subprocess.PIPE, stderr=log, text=True)
        others = [subprocess.Popen(_archiver(*verb, "--config", str(cfg)), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                  for verb in (("links", "run"), ("dns", "run"))]
        stop, runs, held = threading.Event(), [0], [0]
        helpers = [threading.Thread(target=hammer_seeds, args=(cfg, [demo, unresolvable], stop, runs))]
        if hold > 0:
            databases = [work / "archive" / "sites" / "0.sqlite", work / "archive" / "dns.sqlite"]
            helpers.append(threading.Thread(target=hold_locks, args=(databases, hold, every, stop, held)))
        for thread in helpers:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in helpers:
            thread.join()
        crawler.send_signal(signal.SIGTERM)
        out, _ = crawler.communicate(timeout=120)
        for proc in others:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    if crawler.returncode != 0:
        tail = (work / "crawler.log").read_text().splitlines()[-20:]
        raise SystemExit("\n".join([*tail, f"crawler failed with exit code {crawler.returncode}"]))
    result = json.loads(out.strip().splitlines()[-1])
    return {"sites": sites, "pages_per_site": pages, "extra_seeds": extra, "seconds": seconds,
            "hold_s": hold, "every_s": every, "seeds_runs": runs[0], "locks_held": held[0], **result}


def main() -> int:
    parser = argparse.ArgumentParser(description="archiver event-loop stall benchmark")
    parser.add_argument("--sites", type=int, default=60)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--extra-seeds", type=int, default=3000)
    parser.add_argument("--hold", type=float, default=0.0,
                        help="also hold each database's write lock this long (seconds)...")
    parser.add_argument("--every", type=float, default=3.0, help="...every this many seconds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(Path(args.child))
    with tempfile.TemporaryDirectory(prefix="archiver-stall-") as tmp:
        result = run(args.sites, args.pages, args.seconds, args.extra_seeds, args.hold, args.every,
                     Path(tmp))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
