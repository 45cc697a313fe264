"""Object-store benchmark: ship WARC bundles to S3 (moto on 127.0.0.1), then read records back.

Writes --mib MiB of real bundles with BundleWriter (random, incompressible bodies of 2-60 KiB,
rotated at --bundle-mib), ships them with ``ship_closed`` (upload, verify, delete locally) and
reports MB/s; then reads --reads random response records back through ``ObjectWarcs.read`` (one
range request each) and reports reads/s and latency percentiles. moto keeps objects in its own
memory, so the figures measure the client path and moto's HTTP server, not a disk or a network.

    python -m tools.bench_objectstore [--mib 100] [--bundle-mib 16] [--reads 1000] [--part-mib 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter
from archiver.store.catalog_maintenance import ObjectWarcs
from archiver.store.s3.objectstore import S3Store, s3_client
from archiver.store.shipping import ship_closed
from archiver.store.warcindex import index_warc
from tools.s3server import CREDENTIALS, REGION, running_moto

DATE = datetime(2026, 11, 22, 3, 15, tzinfo=UTC)
GET = b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"


def write_bundles(directory: Path, total: int, bundle_size: int, rng: random.Random) -> None:
    with BundleWriter(directory, WarcConfig(max_size=bundle_size)) as writer:
        i = 0
        while writer.bytes_written < total:
            writer.write_exchange(url=f"http://example.org/page/{i}", ip="127.0.0.1", date=DATE,
                                  request=GET, response_head=b"HTTP/1.1 200 OK\r\n\r\n",
                                  response_body=rng.randbytes(rng.randrange(2048, 60 * 1024)))
            i += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--bundle-mib", type=int, default=16)
    parser.add_argument("--part-mib", type=int, default=8)
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.environ.update(CREDENTIALS)
    with tempfile.TemporaryDirectory() as tmp, running_moto() as endpoint:
        local = Path(tmp)
        write_bundles(local, args.mib * 2**20, args.bundle_mib * 2**20, rng)
        bundles = sorted(local.glob("*.warc.gz"))
        size = sum(p.stat().st_size for p in bundles)
        captures = [c for p in bundles for c in index_warc(p)]
        client = s3_client(endpoint, REGION)
        client.create_bucket(Bucket="bench")
        store = S3Store(client, "bench", "warcs", part_size=args.part_mib * 2**20)
        started = time.perf_counter()
        shipped = ship_closed(local, store)
        ship_seconds = time.perf_counter() - started
        assert len(shipped) == len(bundles) and not list(local.glob("*.warc.gz"))

        warcs = ObjectWarcs(store)
        picks = [rng.choice(captures) for _ in range(args.reads)]
        latencies = []
        started = time.perf_counter()
        for capture in picks:
            t = time.perf_counter()
            stored = warcs.read(capture.filename, capture.offset, capture.length)
            latencies.append(time.perf_counter() - t)
            assert stored.url == capture.url
        read_seconds = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100)
    print(json.dumps({
        "bundles": len(bundles), "bytes": size, "records": len(captures),
        "ship_seconds": round(ship_seconds, 2), "ship_MB_per_s": round(size / 1e6 / ship_seconds, 1),
        "ship_MiB_per_s": round(size / 2**20 / ship_seconds, 1),
        "reads": args.reads, "reads_per_s": round(args.reads / read_seconds, 1),
        "read_ms_p50": round(cuts[49] * 1000, 2), "read_ms_p99": round(cuts[98] * 1000, 2),
    }, indent=2))


if __name__ == "__main__":
    main()
