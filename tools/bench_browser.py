"""Browser-capture benchmark: pages/s, CPU per rendered page and peak RSS of a crawl with
``crawl.capture = "browser"``, against plain Chromium loading the same pages with no archiving.

The web: ``--webs`` demo webs (``WebSpec(modern=True)``, domains ``web0``, ``web1``...), each
served by a process of its own on 127.0.0.1, so that there are that many modern sites and up to
``tabs`` pages render at once (one site renders one page at a time). The pages: the nine pages of
each modern site that build their content with scripts (``DemoWeb.modern_pages``) and its home
page (where a crawl starts a site), seeded, with ``crawl.max_depth = 0`` so that the crawl renders
those and no other page (the benchmark says if it rendered another number).

- **plain** (the floor): the distribution's ``chromium`` with archiver's ``QUIET_FLAGS`` and
  ``--host-resolver-rules`` sending the demo names to 127.0.0.1, driven by a child process of
  this tool over DevTools: ``tabs`` pages at once, each in a fresh tab opened as archiver opens
  one (``archiver.browser.page.tab``), with the HTTP cache off,
  with archiver's behaviours and settle rule (``archiver.browser.render``: viewport 1280x900,
  ``<details>`` opened, lazy images eager, media played, a viewport-high scroll step then a wait
  for ``quiet`` seconds of network idle (bounded), until the end, and idle again at the top).
  Nothing is archived; ``--plain-collect`` also takes the screenshot and the rendered text.
- **archiver**: ``archiver crawl run --until-idle`` as a child process, ``browser.tabs`` = 4
  then 8, ``min_rest`` 0 and ``browser.embed_rest`` 0.01: the cost is measured, not politeness.

CPU is the whole process tree's: this tool is the child subreaper of its children
(``PR_SET_CHILD_SUBREAPER``), reaps the browser processes orphaned when the browser stops, and
takes user + system time of everything reaped (``RUSAGE_CHILDREN``) while the demo servers still
run. The table also gives the CPU of the command's own process (the crawler, or plain's driver),
read from ``/proc/<pid>/stat`` once it has exited and before it is reaped; the rest is the
browser's. Peak RSS is the tree's, summed over its processes
(``archiver.browser.chromium.tree_memory``, as ``browser.memory_limit`` counts it), sampled every
0.2 s. The overhead is archiver's CPU per page over plain's, minus 1 (the issue's bound: 30 %).
``--profile`` runs the archiver crawl under cProfile and prints its heaviest functions.

    python -m tools.bench_browser [--rounds 3] [--webs 12] [--tabs 4 8] [--quick]
        [--plain-collect] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import trio
from warcio.archiveiterator import ArchiveIterator

from archiver.browser import behaviours
from archiver.browser.chromium import QUIET_FLAGS, tree_memory
from archiver.browser.devtools import CommandError, DevTools, Event, connect
from archiver.browser.page import Traffic, evaluate, navigate, tab
from archiver.browser.render import STEP_WAIT, RenderSettings
from demoweb import DemoWeb, WebSpec, run_demo_process
from tools.benchconfig import demo_config

EMBED_REST = 0.01  # browser.embed_rest of the archiver crawl (min_rest is 0)
SAMPLE = 0.2  # seconds between two RSS samples
_PR_SET_CHILD_SUBREAPER = 36


# -- plain Chromium (the driver runs in a child process: ``--plain-driver``) ---------------------

class NetworkTraffic(Traffic):
    """:class:`Traffic` fed by the Network domain's events (no request is intercepted)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: set[str] = set()

    def seen(self, method: str, request: str) -> None:
        if method == "Network.requestWillBeSent":
            if request not in self.requests:  # a redirect keeps its request's id
                self.requests.add(request)
                self.begin()
        elif request in self.requests:
            self.requests.discard(request)
            self.end()


async def _follow(devtools: DevTools, session: str, traffic: NetworkTraffic,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    methods = ("Network.requestWillBeSent", "Network.loadingFinished", "Network.loadingFailed")
    async with contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(devtools.events(method, session)) for method in methods]
        task_status.started()
        async with trio.open_nursery() as nursery:
            for stream in streams:
                nursery.start_soon(_feed, stream, traffic)


async def _feed(stream: trio.MemoryReceiveChannel[Event], traffic: NetworkTraffic) -> None:
    async for event in stream:
        traffic.seen(event.method, event.params["requestId"])


async def _behave(devtools: DevTools, session: str, traffic: Traffic, settings: RenderSettings) -> None:
    """archiver.browser.render's behaviours and settle rule, step for step."""
    step_wait = max(STEP_WAIT, 4 * settings.quiet)
    scrolls = 0
    try:
        await evaluate(devtools, session, behaviours.PREPARE)
        while scrolls < settings.max_scrolls:
            before = await evaluate(devtools, session, behaviours.SCROLL)
            scrolls += 1
            with trio.move_on_after(step_wait):
                await traffic.idle(settings.quiet)
            height = await evaluate(devtools, session, behaviours.HEIGHT)
            if before["end"] and height <= before["height"]:
                break
        await evaluate(devtools, session, behaviours.PREPARE)
        await evaluate(devtools, session, behaviours.TOP)
    except CommandError:
        pass


async def plain_load(devtools: DevTools, url: str, settings: RenderSettings, collect: bool) -> None:
    """Load ``url`` in a fresh tab as archiver renders a page, with nothing intercepted."""
    traffic = NetworkTraffic()
    width, height = settings.viewport
    async with tab(devtools) as session, trio.open_nursery() as nursery:
        await devtools.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        await nursery.start(_follow, devtools, session, traffic)
        await devtools.send("Network.enable", None, session)
        await devtools.send("Network.setCacheDisabled", {"cacheDisabled": True}, session)
        with trio.move_on_after(settings.page_timeout):
            await navigate(devtools, session, url)
            await _behave(devtools, session, traffic, settings)
            await traffic.idle(settings.quiet)
        if collect:
            await evaluate(devtools, session, f"{behaviours.COLLECT}(10000, {1 << 20})")
            await devtools.send("Page.captureScreenshot", {"format": settings.screenshot_format}, session)
        nursery.cancel_scope.cancel()


async def plain_run(urls: list[str], rules: str, tabs: int, collect: bool) -> None:
    """Start Chromium, load ``urls`` ``tabs`` at a time, stop it."""
    folder = Path(tempfile.mkdtemp(prefix="bench-chromium-"))
    command = ["chromium", *QUIET_FLAGS, f"--host-resolver-rules={rules}",
               f"--user-data-dir={folder / 'profile'}", "--remote-debugging-port=0", "about:blank"]
    env = {**os.environ, "XDG_CONFIG_HOME": str(folder / "config"), "XDG_CACHE_HOME": str(folder / "cache")}
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        active = folder / "profile" / "DevToolsActivePort"
        while not active.exists() or len(active.read_text().split("\n")) < 2:
            if process.poll() is not None:
                raise SystemExit(f"chromium exited with {process.returncode}")
            await trio.sleep(0.02)
        port, path = active.read_text().split("\n")[:2]
        settings = RenderSettings()
        todo = iter(urls)
        async with connect(f"ws://127.0.0.1:{port}{path}") as devtools:
            async def worker() -> None:
                for url in todo:
                    await plain_load(devtools, url, settings, collect)

            async with trio.open_nursery() as nursery:
                for _ in range(tabs):
                    nursery.start_soon(worker)
            with contextlib.suppress(CommandError):
                await devtools.send("Browser.close")
        process.wait(timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


# -- measuring a child process tree -------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    seconds: float
    cpu: float  # user + system seconds of the whole process tree
    own_cpu: float  # of the command's process alone (the crawler, or plain's driver)
    peak_rss: int  # bytes


def own_cpu(pid: int) -> float:
    """User + system seconds of process ``pid`` alone, its children not counted (from
    ``/proc/<pid>/stat``, which keeps them while the process is a zombie)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(keep: set[int]) -> set[int]:
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            found.update(int(pid) for pid in (task / "children").read_text().split())
    return found - keep


def measure(command: list[str], keep: set[int]) -> Run:
    """Run ``command`` to its end and every process it left behind; time, CPU and peak RSS of the
    tree. ``keep`` are children of ours (the demo servers) that are not part of it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(SAMPLE):
            peak[0] = max(peak[0], tree_memory(proc.pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not yet reaped
        seconds = time.monotonic() - started
        own = own_cpu(proc.pid)
        proc.wait()
    finally:
        stop.set()
        sampler.join()
    while orphans := _children(keep):  # the browser's processes, reparented to us
        for pid in orphans:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    if proc.returncode != 0:
        raise SystemExit(f"{command[:4]} failed with exit code {proc.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(seconds, cpu, own, peak[0])


# -- the benchmark ------------------------------------------------------------------------------

@contextlib.contextmanager
def demo_webs(count: int) -> Iterator[tuple[list[DemoWeb], set[int]]]:
    """``count`` demo webs with a modern site each, each served by a child process."""
    with contextlib.ExitStack() as stack:
        served = [stack.enter_context(run_demo_process(WebSpec(
            sites=1, pages_per_site=2, port=0, trap=False, modern=True, domain=f"web{n}")))
            for n in range(count)]
        yield [web for web, _, _ in served], {proc.pid for _, _, proc in served}


def pages(web: DemoWeb) -> list[str]:
    """What the crawl renders of a web: its modern site's home page (a crawl starts a site
    there) and the pages that build their content with scripts."""
    return [web.origin(web.special_hosts["modern"]) + "/", *web.modern_pages()]


def resolver_rules(webs: list[DemoWeb]) -> str:
    return ", ".join([*(f"MAP *.{web.spec.domain} 127.0.0.1" for web in webs), "MAP * ~NOTFOUND",
                      "EXCLUDE 127.0.0.1"])


def rendered(root: Path) -> int:
    """Screenshots in the crawl's WARCs: pages rendered."""
    count = 0
    for path in (root / "archive" / "warcs").glob("*.warc.gz"):
        with path.open("rb") as stream:
            uris = (record.rec_headers.get_header("WARC-Target-URI") or ""
                    for record in ArchiveIterator(stream))
            count += sum(1 for uri in uris if uri.startswith("urn:screenshot:"))
    return count


def archiver_crawl(work: Path, webs: list[DemoWeb], urls: list[str], tabs: int, keep: set[int],
                   profile: Path | None) -> tuple[Run, int]:
    """A browser crawl of ``urls``: its run and the pages it rendered."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "hosts").write_text("".join(web.hosts_file() for web in webs))
    (work / "seeds.txt").write_text("".join(f"{url}\n" for url in urls))
    config = work / "archiver.toml"
    config.write_text(demo_config(sites_per_process=len(webs) * 2, max_depth=0, capture="browser")
                      + f"[browser]\ntabs = {tabs}\nembed_rest = {EMBED_REST}\n")
    python = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile else [sys.executable]
    with contextlib.chdir(work):
        run = measure([*python, "-m", "archiver", "crawl", "run", "--config", str(config),
                       "--seeds", str(work / "seeds.txt"), "--until-idle"], keep)
    return run, rendered(work)


def plain(work: Path, webs: list[DemoWeb], urls: list[str], tabs: int, keep: set[int],
          collect: bool) -> Run:
    (work / "plain.json").write_text(json.dumps({"urls": urls, "rules": resolver_rules(webs),
                                                 "tabs": tabs, "collect": collect}))
    return measure([sys.executable, "-m", "tools.bench_browser", "--plain-driver",
                    str(work / "plain.json")], keep)


@dataclass(frozen=True)
class Row:
    """One side's runs at one number of tabs: per run, pages/s, CPU ms per page (all, and the
    command's own process), peak RSS MiB."""

    what: str
    pages_per_s: list[float]
    cpu_ms_per_page: list[float]
    own_ms_per_page: list[float]
    peak_rss_mib: list[float]

    @classmethod
    def of(cls, what: str, runs: list[Run], counts: list[int]) -> Row:
        return cls(what, [n / r.seconds for r, n in zip(runs, counts, strict=True)],
                   [1000 * r.cpu / n for r, n in zip(runs, counts, strict=True)],
                   [1000 * r.own_cpu / n for r, n in zip(runs, counts, strict=True)],
                   [r.peak_rss / 2**20 for r in runs])


def spread(values: list[float], digits: int = 0) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def main() -> int:
    parser = argparse.ArgumentParser(description="archiver browser-capture benchmark")
    parser.add_argument("--webs", type=int, default=12, help="demo webs, one modern site each (10 pages)")
    parser.add_argument("--tabs", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="4 webs, 4 tabs, 1 round")
    parser.add_argument("--plain-collect", action="store_true",
                        help="plain Chromium also takes each page's screenshot and text")
    parser.add_argument("--profile", help="write the archiver crawls' cProfile data to this folder")
    parser.add_argument("--keep", help="folder to work in (default: a temporary one)")
    parser.add_argument("--plain-driver", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_driver:
        job = json.loads(Path(args.plain_driver).read_text())
        trio.run(plain_run, job["urls"], job["rules"], job["tabs"], job["collect"])
        return 0
    if args.quick:
        args.webs, args.tabs, args.rounds = 4, [4], 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("cannot become the browsers' subreaper: their CPU would go uncounted")
    with contextlib.ExitStack() as stack:
        work = Path(args.keep) if args.keep else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="archiver-bench-")))
        work.mkdir(parents=True, exist_ok=True)
        webs, keep = stack.enter_context(demo_webs(args.webs))
        urls = [url for web in webs for url in pages(web)]
        table = []
        for tabs in args.tabs:
            plains: list[Run] = []
            crawls: list[tuple[Run, int]] = []
            for round_ in range(args.rounds):
                plains.append(plain(work, webs, urls, tabs, keep, args.plain_collect))
                profile = Path(args.profile) / f"crawl-{tabs}-{round_}.prof" if args.profile else None
                if profile:
                    profile.parent.mkdir(parents=True, exist_ok=True)
                crawls.append(archiver_crawl(work / "crawl", webs, urls, tabs, keep, profile))
                print(json.dumps({"tabs": tabs, "round": round_, "plain": plains[-1].__dict__,
                                  "archiver": crawls[-1][0].__dict__, "rendered": crawls[-1][1]}),
                      file=sys.stderr)
            overhead = [100 * ((c.cpu / n) / (p.cpu / len(urls)) - 1)
                        for (c, n), p in zip(crawls, plains, strict=True)]
            counts = [n for _, n in crawls]
            if counts != [len(urls)] * len(crawls):
                print(f"{tabs} tabs: archiver rendered {counts} pages, not {len(urls)}", file=sys.stderr)
            table.append((tabs, Row.of("plain", plains, [len(urls)] * len(plains)),
                          Row.of("archiver", [c for c, _ in crawls], counts), overhead))
    print(f"{len(urls)} pages ({args.webs} modern sites x 10), {args.rounds} rounds: median (min-max)")
    print(f"{'tabs':>4}  {'what':<9} {'pages/s':>18}  {'CPU ms/page':>18}  {'of it, own process':>18}  "
          f"{'peak RSS MiB':>18}")
    for tabs, floor, crawl, overhead in table:
        for entry in (floor, crawl):
            print(f"{tabs:>4}  {entry.what:<9} {spread(entry.pages_per_s, 2):>18}  "
                  f"{spread(entry.cpu_ms_per_page):>18}  {spread(entry.own_ms_per_page):>18}  "
                  f"{spread(entry.peak_rss_mib):>18}")
        print(f"{tabs:>4}  overhead  archiver CPU per page / plain's - 1: {spread(overhead)} %")
    if args.profile:
        stats = pstats.Stats(*(str(p) for p in sorted(Path(args.profile).glob("crawl-*.prof"))))
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
