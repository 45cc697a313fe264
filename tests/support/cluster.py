"""Configs for crawler processes that share one PostgreSQL store and one S3 bucket, and what
such a cluster archived (``archived``: the bucket's WARCs against the catalog)."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from archiver.config import Config
from archiver.store.catalog import Capture
from archiver.store.objectstore import S3Store, open_object
from archiver.store.pgcatalog import PgCatalog
from archiver.store.warcindex import index_stream
from tests.support.crawls import HasHosts, warcio_check, write_config
from tests.support.objectstore import S3Bucket


def shared_config(directory: Path, web: HasHosts, *, store_url: str, bucket: S3Bucket,
                  warc: dict[str, object] | None = None, **crawl: object) -> Path:
    """A config for one machine of a cluster: its own ``directory/archive``, the shared store and
    bucket. ``warc`` adds [warc] keys (max_age, sync_interval...)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = write_config(directory, web, **crawl)
    extra = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in (warc or {}).items())
    path.write_text(path.read_text() + (
        f'[store]\nurl = "{store_url}"\n'
        f'[warc]\nstore = "s3://{bucket.name}/crawl"\n{extra}'
        f'[s3]\nendpoint_url = "{bucket.endpoint}"\nregion = "us-east-1"\n'))
    return path


def requests(log: Path) -> list[dict]:
    try:
        lines = log.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.endswith("}")]


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` (the crawlers are other processes) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def overlapping(log: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of requests to the same site whose [start, end] intervals overlap: a site fetched by
    two holders at once (one holder fetches a site one request at a time, resting between)."""
    by_host = defaultdict(list)
    for entry in log:
        by_host[entry["host"]].append(entry)
    pairs = []
    for entries in by_host.values():
        entries.sort(key=lambda e: e["start"])
        for before, after in pairwise(entries):
            if after["start"] < before["end"]:
                pairs.append((before, after))
    return pairs


@dataclass(frozen=True)
class Archived:
    """A cluster's archive after a crawl: the catalog's entries and the records of the bucket's
    WARC bundles (each downloaded, ``valid`` if warcio checks every one)."""

    entries: list[Capture]
    records: set[tuple[str, int]]  # (bundle, offset) of each response and revisit record
    bundles: dict[str, bytes]
    valid: bool

    def missing(self, expected: set[str]) -> set[str]:
        """The URLs of ``expected`` with no catalog entry."""
        return expected - {c.url for c in self.entries}

    def duplicates(self) -> list[tuple[str, int]]:
        """Records with more than one catalog entry."""
        counts = Counter((c.filename, c.offset) for c in self.entries)
        return [record for record, n in counts.items() if n > 1]


def archived(config: Config, directory: Path) -> Archived:
    """The catalog and the bucket's bundles (downloaded into ``directory``) of ``config``'s cluster."""
    store = S3Store.from_config(config.warc.store, config.s3)
    bundles = {}
    records = set()
    directory.mkdir(parents=True, exist_ok=True)
    for name in store.list():
        if not name.endswith(".warc.gz"):
            continue
        with open_object(store, name) as f:
            bundles[name] = f.read()
        (directory / name).write_bytes(bundles[name])
        with open_object(store, name) as f:
            records |= {(c.filename, c.offset) for c in index_stream(f, name, name)}
    catalog = PgCatalog(config.store.url, config.catalog.shards, readonly=True)
    try:
        entries = list(catalog.iter_all())
    finally:
        catalog.close()
    valid = warcio_check(sorted(directory.iterdir())).returncode == 0 if bundles else True
    return Archived(entries, records, bundles, valid)
