"""One crawler process on the shared stores: PostgreSQL for the queues and the catalog, S3 for
the bundles; what it fetched ends up in the bucket and the catalog, and nothing stays local."""

from __future__ import annotations

import os
import subprocess

from archiver.store.catalog_maintenance import ObjectWarcs
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.s3.objectstore import S3Store
from demoweb import WebSpec, run_demo_process
from tests.support.cluster import archivable, shared_config
from tests.support.crawls import load, write_seeds
from tests.support.postgres import PASSWORD, PASSWORD_ROLE
from tests.support.repo import ARCHIVER
from tests.support.secrets import assert_no_secret


def archiver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARCHIVER, *args], capture_output=True, text=True, timeout=300, check=False)


def test_a_crawl_on_the_shared_stores_ships_every_bundle_and_catalogues_it(tmp_path, pg_store_url, s3_bucket):
    spec = WebSpec(sites=3, pages_per_site=8, port=0, trap=False)
    with run_demo_process(spec) as (web, _port, _proc):
        cfg = shared_config(tmp_path / "m0", web, store_url=pg_store_url, bucket=s3_bucket)
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        done = archiver("crawl", "run", "--config", str(cfg), "--seeds", str(seeds), "--until-idle")
        assert done.returncode == 0, done.stderr[-3000:]
    config = load(cfg)
    assert not list((config.root / "bundles").glob("*.warc.gz*")), "a closed bundle stayed local"
    store = S3Store.from_config(config.warc.store, config.s3)
    names = store.list()
    assert names and all(n.endswith(".warc.gz") for n in names if not n.startswith("outlinks/"))
    catalog = PgCatalog(pg_store_url, config.catalog.shards, readonly=True)
    try:
        entries = list(catalog.iter_all())
        expected = archivable(web)
        assert {c.url for c in entries} >= expected
        reader = ObjectWarcs(store)
        for capture in entries:
            assert capture.filename in names
            stored = reader.read(capture.filename, capture.offset, capture.length)
            assert stored.url == capture.url
    finally:
        catalog.close()


def test_a_password_given_in_pgpassword_is_in_no_log_line_of_a_crawl(tmp_path, pg_store_url,
                                                                     postgres_server, s3_bucket):
    """A crawl and a links batch on the shared stores as a role with a password (in PGPASSWORD,
    the allowed way), logging at debug: the password is in no output, log line or state file."""
    url = postgres_server.url(pg_store_url.rsplit("/", 1)[1], user=PASSWORD_ROLE)
    env = {**os.environ, "PGPASSWORD": PASSWORD}
    with run_demo_process(WebSpec(sites=2, pages_per_site=4, port=0, trap=False)) as (web, _, _proc):
        cfg = shared_config(tmp_path / "m0", web, store_url=url, bucket=s3_bucket)
        seeds = write_seeds(tmp_path / "seeds.txt", [o + "/" for o in web.origins()])
        runs = [subprocess.run([*ARCHIVER, *verb, "--config", str(cfg)], capture_output=True, text=True,
                               timeout=300, check=False, env=env)
                for verb in (["crawl", "run", "--seeds", str(seeds), "--until-idle"],
                             ["links", "run", "--once"])]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    assert "event=site-done" in runs[0].stderr  # the crawl logged its work
    state = [p for p in (tmp_path / "m0").rglob("*") if p.is_file() and not p.name.endswith(".gz")]
    texts = [text for run in runs for text in (run.stdout, run.stderr)]
    assert assert_no_secret(PASSWORD, texts=texts, files=state) > 50
