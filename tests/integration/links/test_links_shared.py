"""The external-link batch on several machines: spool files shipped to the bucket, its state in
PostgreSQL and the bucket, the shared site queue and inboxes fed; one batch per cluster; a batch
killed and run again; and the same queues as the embedded batch from the same spool."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
from functools import partial

import psycopg

from archiver.links.batch import LinkBatch
from archiver.store.s3.objectstore import S3Store
from tests.support.linkbatch import (
    batch_once,
    links_config,
    shared_links_config,
    shared_snapshot,
    ship_spool,
    snapshot,
    synthetic_spool,
    with_slices,
    write_spool,
)
from tests.support.postgres import store_database
from tests.support.repo import ARCHIVER

STAMP = "20261122000000"
GROUP = 3000  # lines per checkpoint: two synthetic spool files


def slices(generation: int) -> list[str]:
    """The keys of the 4 slices (links.slices) at ``generation``."""
    return [f"links/slice-{p}of4-{generation}.bloom" for p in range(4)]


def links_run(path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARCHIVER, "links", "run", "--once", "--config", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_batch_reads_the_bucket_and_feeds_the_shared_site_queue_and_inboxes(
        tmp_path, pg_store_url, s3_bucket):
    cfg = shared_links_config(tmp_path / "m1", store_url=pg_store_url, bucket=s3_bucket)
    objects = S3Store.from_config(cfg.warc.store, cfg.s3)
    first = [
        f"http://A.test/one\thttp://x.test\t{STAMP}",
        f"http://a.test/one\thttp://y.test\t{STAMP}",           # same URL once normalised
        f"http://a.test/two\thttp://x.test\t{STAMP}",           # x -> a again: one in-link
        f"http://b.test:80/\thttp://x.test\t{STAMP}",
        f"http://a.test/self\thttp://a.test\t{STAMP}",          # a site's link to itself
        "garbage",
    ]
    ship_spool(cfg, "0-20261122000000-00001.tsv", first)
    totals = batch_once(cfg)
    assert (totals.files, totals.lines, totals.new_urls, totals.new_sites, totals.bad) == (1, 6, 4, 2, 1)
    sites, inboxes = shared_snapshot(pg_store_url)
    assert sites == {"http://a.test": ("waiting", 2), "http://b.test": ("waiting", 1)}
    assert inboxes == {
        "http://a.test": [(0, "http://a.test/one", False), (0, "http://a.test/two", False),
                          (0, "http://a.test/self", False)],
        "http://b.test": [(0, "http://b.test/", False)]}
    # The spool file is done and moved to outlinks/done/; each of the 4 slices at generation 1.
    assert objects.list() == [*slices(1), "outlinks/done/0-20261122000000-00001.tsv"]
    with psycopg.connect(pg_store_url) as db:
        assert db.execute("SELECT name, generation, lines, new_urls, bad FROM links_ledger").fetchall() \
            == [("0-20261122000000-00001.tsv", 1, 6, 4, 1)]
        assert db.execute("SELECT generation FROM links_meta").fetchone() == (1,)
    # The same file shipped again (a crawler's retry): the ledger makes it a no-op, and it goes.
    ship_spool(cfg, "0-20261122000000-00001.tsv", first)
    assert batch_once(cfg).files == 0
    assert objects.list() == [*slices(1), "outlinks/done/0-20261122000000-00001.tsv"]
    # From another machine: a finished site with new URLs waits again; nothing known is queued twice.
    other = shared_links_config(tmp_path / "m2", store_url=pg_store_url, bucket=s3_bucket)
    with psycopg.connect(pg_store_url) as db:
        db.execute("UPDATE sites SET state = 'done' WHERE origin = 'http://b.test'")
    ship_spool(other, "1-20261122000100-00001.tsv", [
        f"http://b.test/new\thttp://z.test\t{STAMP}",
        f"http://a.test/one\thttp://z.test\t{STAMP}",
    ])
    totals = batch_once(other)
    assert (totals.files, totals.new_urls, totals.new_sites) == (1, 1, 0)
    sites, inboxes = shared_snapshot(pg_store_url)
    assert sites == {"http://a.test": ("waiting", 3), "http://b.test": ("waiting", 2)}
    assert inboxes["http://b.test"] == [(0, "http://b.test/", False), (0, "http://b.test/new", False)]
    assert len(inboxes["http://a.test"]) == 3
    assert objects.list() == [*slices(2), "outlinks/done/0-20261122000000-00001.tsv",
                              "outlinks/done/1-20261122000100-00001.tsv"]


def _queued(sites: dict, inboxes: dict) -> tuple[dict, dict]:
    """Shared tables as the embedded snapshot reads: (state, in-links) and each site's URLs, a URL
    added twice (a rerun after a kill) counted once, as the site's bitmap does when it merges."""
    return ({o: (state, inlinks) for o, (state, inlinks) in sites.items()},
            {o: list(dict.fromkeys(url for _, url, _ in rows)) for o, rows in inboxes.items()})


def _embedded(tmp_path) -> tuple[dict, dict]:
    cfg = links_config(tmp_path / "embedded", checkpoint=GROUP)
    synthetic_spool(partial(write_spool, cfg.root))
    assert batch_once(cfg).checkpoints > 3
    sites, queues = snapshot(cfg.root, 2)
    return {o: (state, inlinks) for o, (_, state, inlinks) in sites.items()}, queues


def test_a_shared_batch_queues_what_the_embedded_one_does(tmp_path, pg_store_url, s3_bucket):
    cfg = shared_links_config(tmp_path / "m1", store_url=pg_store_url, bucket=s3_bucket,
                              checkpoint=GROUP)
    synthetic_spool(partial(ship_spool, cfg))
    assert batch_once(cfg).checkpoints > 3
    sites, inboxes = shared_snapshot(pg_store_url)
    assert all(len(set(rows)) == len(rows) for rows in inboxes.values())   # nothing sent twice
    assert _queued(sites, inboxes) == _embedded(tmp_path)


def test_a_shared_batch_killed_halfway_then_rerun_equals_one_clean_run(tmp_path, pg_store_url, s3_bucket):
    cfg = shared_links_config(tmp_path / "m1", store_url=pg_store_url, bucket=s3_bucket,
                              checkpoint=GROUP)
    synthetic_spool(partial(ship_spool, cfg))
    proc = subprocess.Popen([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:                      # wait for a checkpoint, then kill mid-run
        if "links-checkpoint" in line and "generation=2" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with LinkBatch(cfg) as batch:                  # it really stopped halfway
        assert batch.generation > 0 and batch.pending_files()
    rerun = links_run(cfg.path)
    assert rerun.returncode == 0, rerun.stderr
    assert _queued(*shared_snapshot(pg_store_url)) == _embedded(tmp_path)
    objects = S3Store.from_config(cfg.warc.store, cfg.s3)
    with LinkBatch(cfg) as batch:
        assert objects.list("links/") == slices(batch.generation)


def test_one_links_batch_per_cluster(tmp_path, pg_store_url, s3_bucket):
    here = shared_links_config(tmp_path / "m1", store_url=pg_store_url, bucket=s3_bucket)
    there = shared_links_config(tmp_path / "m2", store_url=pg_store_url, bucket=s3_bucket)
    ship_spool(there, "0-20261122000000-00001.tsv", [f"http://a.test/\thttp://x.test\t{STAMP}"])
    with LinkBatch(here):
        done = links_run(there.path)               # another machine: its own flock is free
        assert done.returncode == 2
        assert "a links batch is already running in this cluster" in done.stderr
        assert f"archiver links run, {os.uname().nodename} pid {os.getpid()}" in done.stderr
    done = links_run(there.path)                   # released on exit
    assert done.returncode == 0, done.stderr
    assert "1 files, 1 URLs read, 1 new URLs, 1 new sites" in done.stdout


def test_a_shared_batch_reshards_from_the_files_done_in_the_bucket(tmp_path, pg_store_url, s3_bucket):
    cfg = shared_links_config(tmp_path / "m1", store_url=pg_store_url, bucket=s3_bucket)
    cfg = with_slices(cfg, 2)
    synthetic_spool(partial(ship_spool, cfg), files=3)
    batch_once(cfg)
    with LinkBatch(cfg) as batch:
        # What the Dask engine sends its workers pickles: the slices and the spool in the bucket.
        copy = pickle.loads(pickle.dumps(batch.slices))
        assert copy.load(1, batch.generations[1])._array == batch.slices.load(1, batch.generations[1])._array
        spool = pickle.loads(pickle.dumps(batch._work(batch.slices).spool))
        assert spool.files.history().closed() == batch.spool.history().closed()
        assert len(spool.files.history().closed()) == 3
        batch.reshard(3)
    objects = S3Store.from_config(cfg.warc.store, cfg.s3)
    assert [key.split("-")[1] for key in objects.list("links/")] == ["0of3", "1of3", "2of3"]
    cfg = with_slices(cfg, 3)
    synthetic_spool(partial(ship_spool, cfg), files=5, first=3)
    batch_once(cfg)
    fresh = links_config(tmp_path / "embedded", slices=3)
    synthetic_spool(partial(write_spool, fresh.root), files=5)
    batch_once(fresh)
    sites, queues = snapshot(fresh.root, 2)
    assert _queued(*shared_snapshot(pg_store_url)) == (
        {o: (state, inlinks) for o, (_, state, inlinks) in sites.items()}, queues)


def test_a_shared_batch_waits_out_a_database_crash_and_equals_one_clean_run(tmp_path, own_postgres,
                                                                             s3_bucket):
    url = store_database(own_postgres)
    cfg = shared_links_config(tmp_path / "m1", store_url=url, bucket=s3_bucket, checkpoint=GROUP)
    synthetic_spool(partial(ship_spool, cfg))
    proc = subprocess.Popen([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen, crashed = [], False
    try:
        for line in proc.stderr:  # the server crashes after a checkpoint, and starts again once
            seen.append(line)     # the batch has found it away
            if not crashed and "links-checkpoint" in line and "generation=2" in line:
                own_postgres.stop("immediate")
                crashed = True
            elif crashed and "event=store-unavailable" in line and not own_postgres.is_running():
                own_postgres.start()
    finally:
        proc.wait(timeout=60)
    err = "".join(seen)
    assert proc.returncode == 0, err[-3000:]
    assert err.count("event=store-unavailable") == err.count("event=store-recovered") == 1
    assert _queued(*shared_snapshot(url)) == _embedded(tmp_path)
