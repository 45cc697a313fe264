"""Chaos benchmark: crawler machines crawl a demo web while faults strike at random, over rounds.

Each round builds its own cluster on loopback: a PostgreSQL primary with a streaming standby,
reached through one multi-host URL (``target_session_attrs=read-write``); a moto S3 server behind
an endpoint that can be stopped (``tools.s3server.StoppableEndpoint``); a demo web; and
``--machines`` crawler processes, each with its own directory, database role and User-Agent
(``tests.support.cluster.Cluster``), all ``--until-idle``. While they crawl, faults strike at
random times, each of a random kind:

- ``kill``: a machine is SIGKILLed and its directory deleted; a new machine with its number
  starts after a random pause (1-2 times ``--lease-ttl``: a number is refused while its
  heartbeat is younger).
- ``freeze``: a machine is SIGSTOPped for 1.5-3 times ``--lease-ttl``, then continued.
- ``pg-restart``: the primary is restarted ``pg_ctl restart -m immediate`` (a crash).
- ``pg-failover``: the primary is stopped and the standby promoted; the old primary then
  becomes the new one's standby, so that the next failover goes back.
- ``s3-away``: the object store's endpoint is stopped for 5-60 s (the issue's 60 s at most).

At the end of a round (every machine exited by itself), what the crawl left is read back: every
WARC in the bucket checked, every catalog entry. One line per round says the faults of each
kind; the URLs the web serves that are missing (lost) and the records the catalog names twice
(both must be 0); the URLs captured twice (fetched again after a loss, their first capture
shipped) and the duplicate fetches (requests for the same URL beyond the first, robots.txt
aside) per fault; pairs of requests to one host at once and requests made without the site's
lease (both must be 0); whether the WARCs are valid; and the fault events the crawlers logged.
The exit status is 1 if any round lost or broke anything.

    python -m tools.bench_chaos [--rounds 3] [--sites 16] [--pages 60] [--machines 3]
                                [--rest 0.4] [--lease-ttl 4] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from archiver.store.s3.objectstore import s3_client
from demoweb import WebSpec, run_demo_process
from tests.support.cluster import (
    AGENT,
    Cluster,
    archivable,
    check_archive,
    install_write_log,
    lease_breaches,
    overlapping,
    requests,
)
from tests.support.crawls import load
from tests.support.objectstore import S3Bucket
from tools.pgserver import (
    FAULT_SETTINGS,
    PostgresServer,
    multi_host_url,
    running_postgres,
    running_standby,
    store_database,
    switch_over,
)
from tools.s3server import CREDENTIALS, REGION, StoppableEndpoint, running_moto

KINDS = ("kill", "freeze", "pg-restart", "pg-failover", "s3-away")
# The crawlers' log events of faults and recoveries (docs/cluster.md, "Faults at a glance").
EVENT = re.compile(r"event=(bundle-lost|bundle-recovered|bundle-reopened|bundle-waiting|lease-lost"
                   r"|fenced-write|store-unavailable|store-recovered|local-limit|disk-full)\b")
WARC = {"max_age": 2.0, "sync_interval": 0.5}  # bundles ship every 2 s: faults meet them in flight
ROUND_TIMEOUT = 900.0  # seconds a round may take before it counts as stuck


@dataclass
class Round:
    """What one round did and what its crawl left."""

    number: int
    seconds: float
    faults: Counter[str] = field(default_factory=Counter)
    expected: int = 0
    lost: int = 0
    catalogued_twice: int = 0  # records the catalog names more than once (must be 0)
    captured_twice: int = 0  # URLs with two captures or more (fetched again after a loss)
    duplicate_fetches: int = 0
    overlaps: int = 0
    lease_breaches: int = 0
    warcs: int = 0
    warcs_valid: bool = False
    uncatalogued: int = 0  # records in the bucket the catalog lacks (must be 0)
    unserved: int = 0  # catalog entries naming no record in the bucket (must be 0)
    missing: list[str] = field(default_factory=list)  # a few of the URLs lost, to look into
    events: Counter[str] = field(default_factory=Counter)  # the crawlers' fault events, logged

    @property
    def sound(self) -> bool:
        return (not self.lost and not self.catalogued_twice and not self.overlaps
                and not self.lease_breaches and self.warcs_valid and not self.uncatalogued
                and not self.unserved)

    def line(self) -> str:
        total = sum(self.faults.values())
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.faults.items())) or "none"
        per_fault = self.duplicate_fetches / total if total else 0.0
        return (f"round {self.number}: {total} faults ({kinds}) in {self.seconds:.0f} s;"
                f" {self.expected} URLs expected, lost {self.lost}, records catalogued twice"
                f" {self.catalogued_twice}, URLs captured twice {self.captured_twice};"
                f" duplicate fetches {self.duplicate_fetches} ({per_fault:.1f} per fault);"
                f" overlaps {self.overlaps}, lease breaches {self.lease_breaches};"
                f" {self.warcs} WARCs {'valid' if self.warcs_valid else 'INVALID'}, records"
                f" uncatalogued {self.uncatalogued}, entries unserved {self.unserved};"
                f" events logged: {', '.join(f'{k} {n}' for k, n in sorted(self.events.items()))}")


class Database:
    """The primary and standby of a round, and which is which after failovers."""

    def __init__(self, primary: PostgresServer, standby: PostgresServer) -> None:
        self.primary, self.standby = primary, standby

    def restart(self) -> None:
        self.primary.restart("immediate")

    def fail_over(self) -> None:
        self.primary, self.standby = switch_over(self.primary, self.standby)


@contextmanager
def cluster_world() -> Iterator[tuple[Database, str, S3Bucket, StoppableEndpoint]]:
    """A primary with its standby (and the multi-host URL of the store database), and a bucket
    behind a stoppable endpoint, for one round."""
    with ExitStack() as stack:
        primary = stack.enter_context(running_postgres(settings=FAULT_SETTINGS))
        store_database(primary)
        standby = stack.enter_context(running_standby(primary))
        moto = stack.enter_context(running_moto())
        endpoint = StoppableEndpoint(moto)
        stack.callback(endpoint.close)
        name = f"chaos-{uuid.uuid4().hex[:8]}"
        s3_client(moto, REGION).create_bucket(Bucket=name)
        bucket = S3Bucket(endpoint=endpoint.url, name=name, client=s3_client(endpoint.url, REGION))
        yield Database(primary, standby), multi_host_url([primary, standby], "archive"), bucket, endpoint


def run_round(number: int, args: argparse.Namespace, rng: random.Random, directory: Path) -> Round:
    spec = WebSpec(sites=args.sites, pages_per_site=args.pages, port=0, trap=False)
    log = directory / "requests.jsonl"
    started = time.monotonic()
    result = Round(number, 0.0)
    with cluster_world() as (database, store_url, bucket, endpoint), \
            run_demo_process(spec, log_path=log) as (web, _port, _proc):
        install_write_log(store_url)
        cluster = Cluster(directory, web, store_url=store_url, bucket=bucket)

        try:
            for n in range(args.machines):
                cluster.configure(n, warc=WARC, lease_ttl=args.lease_ttl, min_rest=args.rest)
            cluster.seed([origin + "/" for origin in web.origins()])
            for n in range(args.machines):
                cluster.start(n, "--until-idle")
            result.faults = strike(cluster, database, endpoint, args, rng)
            for n in range(args.machines):
                cluster.wait(n, timeout=max(1.0, ROUND_TIMEOUT - (time.monotonic() - started)))
        finally:
            cluster.close()
        result.seconds = time.monotonic() - started
        entries = requests(log)
        expected = archivable(web)
        check = check_archive(load(cluster.configs[0]), store_url, expected, directory / "bucket")
        roles = {AGENT.format(n): cluster.role(n) for n in range(args.machines)}
        result.expected, result.lost = len(expected), len(check.missing)
        result.catalogued_twice, result.captured_twice = len(check.duplicates), len(check.twice)
        fetched = Counter((e["host"], e["target"]) for e in entries if not e["target"].startswith("/robots"))
        result.duplicate_fetches = sum(n - 1 for n in fetched.values())
        result.overlaps = len(overlapping(entries))
        breaches = lease_breaches(store_url, entries, roles)
        result.lease_breaches = len(breaches.writes) + len(breaches.fetches)
        result.warcs, result.warcs_valid = check.warcs, check.warcs_valid
        result.uncatalogued, result.unserved = len(check.uncatalogued), len(check.unserved)
        result.missing = sorted(check.missing)[:10]
        for n in range(args.machines):  # a machine's log runs on across its restarts
            result.events.update(EVENT.findall(cluster.log(n)))
    return result


def strike(cluster: Cluster, database: Database, endpoint: StoppableEndpoint,
           args: argparse.Namespace, rng: random.Random) -> Counter[str]:
    """Strike faults at random times until every machine has exited; what was struck, by kind.
    Undoing a fault (a thaw, the store back, a new machine) is scheduled, so faults overlap."""
    struck: Counter[str] = Counter()
    later: list[tuple[float, int, Callable[[], None]]] = []  # (when, order, action)
    order = itertools.count()
    down: set[int] = set()  # machines killed or frozen: not struck again until they are back
    store_away = False
    next_fault = time.monotonic() + rng.uniform(*args.gap)

    def schedule(delay: float, action: Callable[[], None]) -> None:
        heapq.heappush(later, (time.monotonic() + delay, next(order), action))

    def running() -> list[int]:
        return [n for n, proc in cluster.procs.items() if proc.poll() is None and n not in down]

    def back(n: int, action: Callable[[int], object]) -> Callable[[], None]:
        """Machine ``n`` back: ``action(n)``, then it may be struck again."""
        def undo() -> None:
            action(n)
            down.discard(n)
        return undo

    def restart(n: int) -> None:  # a new machine with the number, its disk empty
        cluster.start(n, "--until-idle")

    def store_back() -> None:
        nonlocal store_away
        endpoint.start()
        store_away = False

    while later or any(proc.poll() is None for proc in cluster.procs.values()):
        now = time.monotonic()
        while later and later[0][0] <= now:
            heapq.heappop(later)[2]()
        alive = running()
        if now >= next_fault and alive:
            kind = rng.choice(KINDS)
            if kind == "kill" and len(alive) > 1:
                n = rng.choice(alive)
                cluster.kill(n)
                down.add(n)
                # Its number is refused while its heartbeat is younger than the TTL.
                schedule(rng.uniform(1, 2) * args.lease_ttl, back(n, restart))
            elif kind == "freeze" and len(alive) > 1:
                n = rng.choice(alive)
                cluster.freeze(n)
                down.add(n)
                schedule(rng.uniform(1.5, 3) * args.lease_ttl, back(n, cluster.thaw))
            elif kind == "pg-restart":
                database.restart()
            elif kind == "pg-failover":
                database.fail_over()
            elif kind == "s3-away" and not store_away:
                endpoint.stop()
                store_away = True
                schedule(rng.uniform(5, 60), store_back)
            else:
                kind = ""
            if kind:
                struck[kind] += 1
                print(f"  {time.strftime('%H:%M:%S')} {kind}", file=sys.stderr, flush=True)
            next_fault = time.monotonic() + rng.uniform(*args.gap)
        time.sleep(0.2)  # the crawlers are other processes: polled
    return struck


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sites", type=int, default=16)
    parser.add_argument("--pages", type=int, default=60, help="pages per site")
    parser.add_argument("--machines", type=int, default=3)
    parser.add_argument("--rest", type=float, default=0.4, help="crawl.min_rest: a site's rest, s")
    parser.add_argument("--lease-ttl", type=float, default=4.0, help="crawl.lease_ttl, s")
    parser.add_argument("--gap", type=float, nargs=2, default=(3.0, 9.0), metavar=("MIN", "MAX"),
                        help="seconds between faults, drawn uniformly")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    os.environ.update(CREDENTIALS)  # the crawlers' S3 client reads them, as any AWS client
    rounds = []
    for number in range(1, args.rounds + 1):
        directory = Path(tempfile.mkdtemp(prefix="archiver-chaos-"))
        result = run_round(number, args, rng, directory)
        rounds.append(result)
        print(json.dumps(asdict(result)) if args.json else result.line(), flush=True)
        if result.sound:
            shutil.rmtree(directory)
        else:  # what a fault broke, to look into: the machines' logs, the bucket's WARCs
            print(f"  kept {directory} (lost: {', '.join(result.missing) or 'none'})", flush=True)
    faults = sum((r.faults for r in rounds), Counter())
    total = sum(faults.values())
    dupes = sum(r.duplicate_fetches for r in rounds)
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(faults.items()))
    print(f"{len(rounds)} rounds, {total} faults ({kinds}),"
          f" URLs lost {sum(r.lost for r in rounds)}, duplicate fetches per fault"
          f" {dupes / total if total else 0:.1f}", flush=True)
    return 0 if all(r.sound for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
