"""DNS history benchmark: build a table of ~1,000,000 rows through record(), then time at() lookups.

Each of H hosts (default 205,000, for a million rows) is first seen, at a random date of a
30-year span, through ``www.hostN.test``, a CNAME to ``hostN.test`` with two addresses (4 rows);
then 0 to 2 changes follow at later dates, each one of: the first address replaced, an address
added, or www retargeted to one of 1,000 CDN hosts (about 1 row each). All observations are
recorded in date order, one transaction each, as the resolver service does. Then "address of
NAME at time T" is timed on random names (www or bare) and random dates of the span and the year
before it (about 1 in 30 asks before any row), after a warm-up pass, and again for "current
address of NAME".

    python -m tools.bench_dns [--hosts 205000] [--lookups 100000] [--dir PATH]

Prints one JSON object. Without --dir the table goes to a temporary directory, deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from archiver.store.embedded.dnshistory import AT_QUERY, DnsHistory
from archiver.store.models import Observation

START = 820_454_400.0  # 1996-01-01
SPAN = 30 * 365 * 86_400.0
CDN_HOSTS = 1_000


def _address(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return f"2001:db8:{rng.randrange(65536):x}::{rng.randrange(1, 65536):x}"
    return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"


def observations(hosts: int, rng: random.Random) -> list[tuple[float, Observation]]:
    """Every host's first sighting and later changes, in date order."""
    events: list[tuple[float, Observation]] = []
    for i in range(hosts):
        www, bare = f"www.host{i}.test", f"host{i}.test"
        addresses = [_address(rng), _address(rng)]
        when = START + rng.random() * SPAN * 0.7
        events.append((when, Observation(www, bare, (www,), tuple(addresses), 300.0)))
        for _ in range(rng.randrange(3)):
            when += rng.random() * (START + SPAN - when)
            kind = rng.randrange(3)
            if kind == 0:
                addresses[0] = _address(rng)
            elif kind == 1:
                addresses.append(_address(rng))
            else:
                n = rng.randrange(CDN_HOSTS)
                cdn_address = f"172.16.{n // 250}.{n % 250 + 1}"
                events.append((when, Observation(www, f"edge{n}.cdn.test", (www,), (cdn_address,), 300.0)))
                break
            events.append((when, Observation(www, bare, (www,), tuple(addresses), 300.0)))
    events.sort(key=lambda e: e[0])
    return events


def _time(call: Callable[[str, float], object], queries: list[tuple[str, float]]) -> dict[str, float]:
    micros = []
    found = 0
    clock = time.perf_counter_ns
    start = clock()
    for name, when in queries:
        t = clock()
        found += call(name, when) is not None
        micros.append((clock() - t) / 1000)
    total = (clock() - start) / 1e9
    cuts = statistics.quantiles(micros, n=100)
    return {
        "lookups": len(queries),
        "found": found,
        "lookups_per_s": round(len(queries) / total),
        "p50_us": round(cuts[49], 1),
        "p99_us": round(cuts[98], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=205_000)
    parser.add_argument("--lookups", type=int, default=100_000)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    rng = random.Random(1996)
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-dns-"))
    root.mkdir(parents=True, exist_ok=True)
    path = root / "dns.sqlite"
    try:
        events = observations(args.hosts, rng)
        with DnsHistory(path) as history:
            start = time.perf_counter()
            changed = sum(history.record(o, when, next_check=when + 300) for when, o in events)
            build = time.perf_counter() - start
            # Re-checks that find nothing new, the resolver's usual case: the state changes, no row.
            latest = list({o.name: o for _, o in events}.values())
            again = rng.sample(latest, min(20_000, len(latest)))
            start = time.perf_counter()
            unchanged = sum(not history.record(o, START + SPAN, next_check=0) for o in again)
            recheck = time.perf_counter() - start

            def query() -> tuple[str, float]:
                name = f"{rng.choice(('www.', ''))}host{rng.randrange(args.hosts)}.test"
                return name, START - 365 * 86_400 + rng.random() * (SPAN + 365 * 86_400)

            warm = [query() for _ in range(args.lookups // 5)]
            queries = [query() for _ in range(args.lookups)]
            for name, when in warm:
                history.at(name, when)
                history.current(name)
            at = _time(history.at, queries)
            current = _time(lambda name, _when: history.current(name), queries)
        db = sqlite3.connect(path)
        rows = db.execute("SELECT count(*) FROM dns").fetchone()[0]
        current_rows = db.execute("SELECT count(*) FROM dns WHERE superseded IS NULL").fetchone()[0]
        plan = [d for *_, d in db.execute(f"EXPLAIN QUERY PLAN {AT_QUERY}",
                                          {"name": "host1.test", "when": START})]
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        result = {
            "rows": rows,
            "current_rows": current_rows,
            "hosts": args.hosts,
            "observations": len(events),
            "changed": changed,
            "build_s": round(build, 1),
            "records_per_s": round(len(events) / build),
            "rechecks": len(again),
            "rechecks_unchanged": unchanged,
            "rechecks_per_s": round(len(again) / recheck),
            "db_mb": round(path.stat().st_size / 2**20, 1),
            "at": at,
            "current": current,
            "at_plan": plan,
        }
        print(json.dumps(result, indent=1))
    finally:
        if args.dir is None:
            shutil.rmtree(root)


if __name__ == "__main__":
    main()
