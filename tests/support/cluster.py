"""Configs for crawler processes that share one PostgreSQL store and one S3 bucket."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from tests.support.crawls import HasHosts, write_config
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
