"""Benchmark the external-link batch: URLs per second through ``archiver links run`` on one core.

Generates spool files of external links (default 10 million over 100,000 sites, a third of them
repeats, as pages link the same popular URLs), then deduplicates their URLs the coreutils way
(``cut -f1 | LC_ALL=C sort -u``, the yardstick) and runs the batch once over them (what
``archiver links run --once`` does, in this process, with ``links.engine``), and reports both
times side by side, URLs/s (wall and CPU), where the time goes, the slices' size and the peak RSS.

    python -m tools.bench_links [--urls 10000000] [--sites 100000] [--slices 4]
        [--engine local | dask] [--workers 2] [--dir /tmp/bench-links]
        [--store sqlite | postgresql://... | postgres]
        [--warc-store FOLDER | s3] [--profile] [--rounds N]

``--rounds N`` then times the whole command, ``archiver links run --once`` in a process of its
own (interpreter, imports and all), N times over the same spool files restored afresh, each round
beside ``cut -f1 | LC_ALL=C sort -u`` again (both vary by a fifth from run to run on a shared VM),
and reports every round's ratio and their median.

``--engine dask`` runs it on a LocalCluster of ``--workers`` one-thread worker processes started
for the run (its start is timed too); the CPU figures then count this process only, so compare
wall times.

``--store`` runs the batch on the shared stores, as ``tools.bench_crawl`` does (``postgres``: a
throwaway local server with fsync on; ``--warc-store s3``: moto): the spool files are shipped to
the object store first (not timed), and the batch reads them there, keeps its state in
PostgreSQL, its bitmap in the object store, and feeds the shared site queue and inboxes.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from archiver import config
from archiver.links import quiet_blas
from archiver.queues.spool import OBJECT_PREFIX
from archiver.store.postgres.schema import init_schema
from archiver.store.shipping import ship_closed
from archiver.stores import open_stores
from tools.bench_crawl import shared_stores

LINES_PER_FILE = 100_000  # spool.max_lines


def generate(root: Path, urls: int, sites: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    spool = root / "spool"
    spool.mkdir(parents=True)
    distinct = max(1, urls * 2 // 3)
    written = serial = 0
    while written < urls:
        n = min(LINES_PER_FILE, urls - written)
        lines = []
        for _ in range(n):
            k = rng.randrange(distinct)
            target, source = k % sites, rng.randrange(sites)
            # As the crawler writes them: the linking site's hops, the link's priority.
            lines.append(f"http://www.site{target}.example/dir{k % 7}/page{k}.html"
                         f"\thttp://www.site{source}.example\t20261122000000"
                         f"\t{source % 5}\t{(k % 3) / 2!r}\n")
        serial += 1
        (spool / f"{serial % 4}-20261122{serial:06d}-{serial:05d}.tsv").write_text("".join(lines))
        written += n


def sort_unique(spool: Path) -> float:
    """Seconds ``cut -f1 | LC_ALL=C sort -u`` takes to deduplicate the URLs of the spool files."""
    files = sorted(str(p) for p in spool.glob("*.tsv"))
    started = time.monotonic()
    cut = subprocess.Popen(["cut", "-f1", *files], stdout=subprocess.PIPE)
    distinct = subprocess.run(["sort", "-u"], stdin=cut.stdout, env={**os.environ, "LC_ALL": "C"},
                              capture_output=True, check=True).stdout.count(b"\n")
    cut.wait()
    took = time.monotonic() - started
    print(f"cut -f1 | LC_ALL=C sort -u: {distinct:,} distinct URLs in {took:.2f} s")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=10_000_000)
    parser.add_argument("--sites", type=int, default=100_000)
    parser.add_argument("--slices", type=int, default=4, help="links.slices")
    parser.add_argument("--checkpoint-urls", type=int, default=config.LinksConfig.checkpoint_urls,
                        help="links.checkpoint_urls (default: the config's)")
    parser.add_argument("--engine", choices=("local", "dask"), default="local", help="links.engine")
    parser.add_argument("--workers", type=int, default=2, help="links.workers (with --engine dask)")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--profile", action="store_true", help="print the top functions by time")
    parser.add_argument("--store", default="sqlite",
                        help='"sqlite", a PostgreSQL URL (an empty database), or "postgres" (a local one)')
    parser.add_argument("--warc-store", default="", help='with --store: a folder, or "s3" (moto)')
    parser.add_argument("--rounds", type=int, default=0,
                        help="then time `archiver links run --once` this many times, each beside "
                             "sort -u (embedded store only)")
    args = parser.parse_args()
    if args.rounds and args.store != "sqlite":
        parser.error("--rounds restores the spool files and an empty archive: the embedded store only")
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-links-"))
    with contextlib.ExitStack() as stack:
        shared = ""
        if args.store != "sqlite":
            url, shared = stack.enter_context(shared_stores(work, args.store, args.warc_store))
            init_schema(url)
        bench(args, work, shared)
    if args.dir is None:
        shutil.rmtree(work)


def bench(args: argparse.Namespace, work: Path, shared: str) -> None:
    """One batch over generated spool files in ``work`` (its config gets the ``shared`` lines)."""
    quiet_blas()  # as `archiver links run` does, before numpy loads
    from archiver.links.batch import LinkBatch
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "archiver.toml").write_text(
        '[archive]\nroot = "archive"\n[crawl]\nprocesses = 4\n'
        # URLs plus (source, target) site pairs share the bitmap.
        f"[links]\nexpected_urls = {args.urls * 2}\ncheckpoint_urls = {args.checkpoint_urls}\n"
        f"slices = {args.slices}\nengine = \"{args.engine}\"\nworkers = {args.workers}\n"
        "[log]\nlevel = \"warning\"\n" + shared)
    cfg = config.load(work / "archiver.toml")
    started = time.monotonic()
    generate(cfg.root, args.urls, args.sites)
    print(f"generated {args.urls:,} links over {args.sites:,} sites in {time.monotonic() - started:.1f} s")
    pristine = work / "pristine"
    if args.rounds:
        shutil.copytree(cfg.root, pristine)
    coreutils = sort_unique(cfg.root / "spool")
    objects = open_stores(cfg).shared_objects()
    if objects is not None:
        started = time.monotonic()
        ship_closed(cfg.root / "spool", objects, pattern="*.tsv", under=OBJECT_PREFIX)
        print(f"shipped the spool files to the object store's {OBJECT_PREFIX} "
              f"in {time.monotonic() - started:.1f} s")

    profiler = cProfile.Profile() if args.profile else None
    wall, cpu = time.monotonic(), time.process_time()
    with LinkBatch(cfg, progress_interval=1e9) as batch:
        if profiler:
            profiler.enable()
        totals = batch.run(once=True)
        if profiler:
            profiler.disable()
        bitmap_mib = sum(batch.counts.bits) / 8 / 2**20
        fp = batch.counts.fp_now()
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{totals.lines:,} URLs read, {totals.new_urls:,} new, {totals.new_sites:,} new sites, "
          f"{totals.checkpoints} checkpoints")
    print(f"{totals.lines / wall:,.0f} URLs/s wall, {totals.lines / cpu:,.0f} URLs/s CPU "
          f"({cpu / totals.lines * 1e6:.2f} µs CPU per URL)")
    print(f"{totals.steps_seconds:.1f} s in the engine's steps (reading, testing and saving the "
          f"slices: {totals.lines / totals.steps_seconds:,.0f} URLs/s), {totals.checkpoint_seconds:.1f} s "
          f"in commits (inbox rows for {totals.new_sites:,} sites, the state, the site queues), "
          "each commit but the last beside the next checkpoint's steps")
    print(f"{args.slices} slices, {bitmap_mib:.1f} MiB in all, fp now {fp:.2e}; "
          f"peak RSS {rss:.0f} MiB")
    print(f"side by side: links run --once {wall:.2f} s, cut -f1 | LC_ALL=C sort -u "
          f"{coreutils:.2f} s: {wall / coreutils:.1f}x")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    if args.rounds:
        whole_command(work / "archiver.toml", cfg.root, pristine, args.rounds)


def whole_command(config_path: Path, root: Path, pristine: Path, rounds: int) -> None:
    """Time ``archiver links run --once`` in a process of its own, ``rounds`` times over the
    archive restored from ``pristine``, each beside ``sort -u`` over the same spool files."""
    ratios = []
    for n in range(1, rounds + 1):
        shutil.rmtree(root)
        shutil.copytree(pristine, root)
        os.sync()  # the copy's writes not in the timed run
        coreutils = sort_unique(root / "spool")
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "archiver", "links", "run", "--once", "--config",
                        str(config_path)], check=True, stdout=subprocess.DEVNULL)
        took = time.monotonic() - started
        ratios.append(took / coreutils)
        print(f"round {n}: archiver links run --once {took:.2f} s, cut -f1 | LC_ALL=C sort -u "
              f"{coreutils:.2f} s: {took / coreutils:.2f}x")
    print(f"whole command, {rounds} rounds: median {statistics.median(ratios):.2f}x "
          f"(from {min(ratios):.2f}x to {max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
