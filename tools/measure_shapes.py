"""Measure the per-shape budget (``crawl.max_per_shape``): what it saves and what it could cost.

For each budget, crawls a demo web with its traps on (the trap site's calendar and depths, and the
events calendar of a normal site) with ``max_depth`` at its default, and reports the fetches spent
in traps and the real pages lost (expected by the web's own truth but not captured). The default
is the smallest budget that loses no real page on the demo web at its largest page counts, with
a margin for sites whose leaves share a shape more than the demo's do.

    python -m tools.measure_shapes [--sites 12] [--pages 30] [--budgets 1,2,4,8,16,40,1000000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import trio

from demoweb import WebSpec
from tests.support.crawls import Crawled, captures


def measure(sites: int, pages: int, budget: int, work: Path) -> dict[str, int]:
    crawled = Crawled(work, WebSpec(sites=sites, pages_per_site=pages, port=0, trap=True),
                      min_rest=0.0, max_per_shape=budget, **{"max_depth": 100})
    trio.run(crawled.run)
    web, log = crawled.web, crawled.server.log
    caps = set(captures(crawled.root))
    lost = {u for u in web.expected("archiver") if u not in caps}
    return {
        "budget": budget, "fetches": len(log),
        "trap_fetches": sum(web.in_trap(web.origin(r.host) + r.target) for r in log),
        "real_pages_lost": len(lost),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sites", type=int, default=12)
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--budgets", default="1,2,4,8,16,40,1000000")
    args = parser.parse_args()
    print(f"demo web: {args.sites} sites x {args.pages} pages, traps on, max_depth 100")
    for budget in map(int, args.budgets.split(",")):
        with tempfile.TemporaryDirectory(prefix="archiver-shapes-") as tmp:
            row = measure(args.sites, args.pages, budget, Path(tmp))
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
