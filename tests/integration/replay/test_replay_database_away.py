"""The replay service on the shared stores while PostgreSQL is away (stopped, crashed, failing
over): each request that needs the database answers 503 with Retry-After, never a 404 or a 500,
and once the server is back the service answers again by itself, within that wait."""

from __future__ import annotations

from pathlib import Path

import psycopg
import trio

from archiver import config
from archiver.stores import open_shared
from tests.support.httpclient import get
from tests.support.postgres import PostgresServer, store_database
from tests.support.replayarchive import serving
from tests.support.storemodes import BASE, ModeArchive, entries_of, write_bundles

PAGES = {"http://example.org/": b"<!doctype html><title>home</title>" * 20,
         "http://example.org/a": b"<!doctype html><title>a</title>" * 20}


async def test_replay_answers_503_while_the_database_is_away_and_recovers_by_itself(
        tmp_path: Path, own_postgres: PostgresServer, s3_bucket) -> None:
    url = store_database(own_postgres)
    path = tmp_path / "archiver.toml"
    path.write_text(BASE + f'[store]\nurl = "{url}"\n[warc]\nstore = "s3://{s3_bucket.name}/warcs"\n'
                    f'[s3]\nendpoint_url = "{s3_bucket.endpoint}"\nregion = "us-east-1"\n')
    cfg = config.load(path)
    stores = open_shared(cfg)
    archive = ModeArchive("shared", path, cfg, stores)
    bundles = write_bundles(tmp_path / "new", PAGES)
    entries = entries_of(bundles)
    archive.keep(bundles)
    with stores.catalog() as catalog:
        catalog.add(entries)
    with psycopg.connect(url, autocommit=True) as conn:  # on disk, as a shipped bundle's commit
        conn.execute("CHECKPOINT")                      # leaves them (catalog adds are async)
    page = f"/web/{entries[0].timestamp}id_/{entries[0].url}"

    async with serving(cfg) as running:
        assert (await get(running.content, page)).status == 200
        own_postgres.stop("immediate")
        try:
            away = [await get(running.content, page), await get(running.app, "/cdx?url=example.org/*"),
                    await get(running.content, page)]
            for answer in away:
                assert answer.status == 503, (answer.status, answer.body[:300])
                assert int(answer.header("Retry-After") or 0) >= 1
                assert b"PostgreSQL store is away" in answer.body
        finally:
            own_postgres.start()
        await trio.sleep(int(away[-1].header("Retry-After") or 0))  # as a client is told to
        back = await get(running.content, page)
        assert back.status == 200 and back.body == PAGES[entries[0].url]
        assert (await get(running.app, "/cdx?url=example.org/*")).status == 200
