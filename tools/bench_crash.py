"""What a ``kill -9`` costs: crawl a demo web, kill the crawler at random moments, count refetches.

The demo web runs in its own process and logs every request it answers; the crawler is a real
``archiver crawl run --until-idle`` child, sent SIGKILL after a random number of fetches and started
again, then left to finish. A refetch is a request for a URL that an earlier run (one ended by a
kill) had already requested. For each kill it reports the sites active at the kill (from the
crawler's own log: visits started and not ended) and the refetches it caused: pages (URLs
requested before the kill and again later) and robots.txt (sites whose robots.txt was requested
before the kill and again later: every interrupted visit starts over with its robots.txt).

    python -m tools.bench_crash [--sites 25] [--pages 30] [--rest 0.1] [--sync 2.0] [--kills 6]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from demoweb import WebSpec, run_demo_process
from tests.support.crashes import kill_and_restart, kill_costs

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
