"""One crawler process on the shared stores: PostgreSQL for the queues and the catalog, S3 for
the bundles; what it fetched ends up in the bucket and the catalog, and nothing stays local."""

from __future__ import annotations

import subprocess

from archiver.store.catalog_maintenance import ObjectWarcs
from archiver.store.objectstore import S3Store
from archiver.store.pgcatalog import PgCatalog
from demoweb import WebSpec, run_demo_process
from tests.support.cluster import shared_config
from tests.support.crawls import load, write_seeds
from tests.support.repo import ARCHIVER


def archiver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARCHIVER, *args], capture_output=True, text=True, timeout=300, check=False)


def test_a_crawl_on_the_shared_stores_ships_every_bundle_and_catalogues_it(tmp_path, pg_store_url, s3_bucket):
    spec = WebSpec(sites=3, pages_per_site=8, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = shared_config(tmp_path / "m0", web, store_url=pg_store_url, bucket=s3_bucket)
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        done = archiver("crawl", "--config", str(cfg), "--seeds", str(seeds), "--until-idle")
        assert done.returncode == 0, done.stderr[-3000:]
    config = load(cfg)
    assert not list((config.root / "bundles").glob("*.warc.gz*")), "a closed bundle stayed local"
    store = S3Store.from_config(config.warc.store, config.s3)
    names = store.list()
    assert names and all(n.endswith(".warc.gz") for n in names if not n.startswith("outlinks/"))
    catalog = PgCatalog(pg_store_url, config.catalog.shards, readonly=True)
    try:
        entries = list(catalog.iter_all())
        expected = {u for u in web.expected("archiver") if "robots500" not in u}
        assert {c.url for c in entries} >= expected
        reader = ObjectWarcs(store)
        for capture in entries:
            assert capture.filename in names
            stored = reader.read(capture.filename, capture.offset, capture.length)
            assert stored.url == capture.url
    finally:
        catalog.close()
