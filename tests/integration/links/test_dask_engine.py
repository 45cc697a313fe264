"""The links batch on a Dask cluster: the same queues as the local engine (from a two-process crawl
of the demo web, and over several checkpoints), a worker killed mid-run, the client killed with its
LocalCluster, and the shared stores (spool files and slices in the bucket, read by the workers)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import trio

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.links.batch import LinkBatch
from archiver.links.dask_engine import DaskEngine
from archiver.queues.sites import process_for
from archiver.web import urls
from demoweb import WebSpec, start_demo
from tests.support.crawls import write_config
from tests.support.daskcluster import (
    HoldOnce,
    kill_and_wait,
    local_cluster,
    removing_semaphores_of_the_killed,
    wait_for_marker,
    worker_pids,
)
from tests.support.linkbatch import (
    batch_once,
    links_config,
    shared_links_config,
    shared_snapshot,
    ship_spool,
    snapshot,
    synthetic_spool,
    write_spool,
)
from tests.support.repo import ARCHIVER

_DEADLINE = 60.0


def with_links(path: Path, **keys: object) -> config.Config:
    """The config at ``path`` with these [links] keys set (a section added if it has none)."""
    text = "".join(line for line in path.read_text().splitlines(keepends=True)
                   if line.partition(" = ")[0] not in keys)
    lines = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in keys.items())
    text = text.replace("[links]\n", "[links]\n" + lines) if "[links]\n" in text \
        else text + "\n[links]\n" + lines
    path.write_text(text)
    return config.load(path)


def dask(path: Path, scheduler: str = "", **keys: object) -> config.Config:
    return with_links(path, engine="dask", scheduler=scheduler, workers=2, slices=4, **keys)


async def test_both_engines_queue_the_same_from_a_two_process_crawl_of_the_demo_web(
        tmp_path, caplog):
    for attempt in range(10):  # a port where both processes own sites that link out (most)
        crawled = tmp_path / f"crawl-{attempt}"
        crawled.mkdir()
        async with trio.open_nursery() as nursery:
            web, _ = await start_demo(nursery, WebSpec(sites=8, pages_per_site=6, port=0,
                                                       trap=False))
            seeds = [web.origin(host) + "/" for host in web.hosts]
            cfg = config.load(write_config(crawled, web, processes=2))
            if {process_for(urls.origin(seed), 2) for seed in seeds} == {0, 1}:
                enqueue_seeds(cfg, 0, seeds)
                async with trio.open_nursery() as crawlers:
                    for process in range(2):
                        crawlers.start_soon(Crawler(cfg, process=process, until_idle=True).run)
            nursery.cancel_scope.cancel()
        spooled = sorted((cfg.root / "spool").glob("*.tsv"))
        if {p.name.split("-")[0] for p in spooled} == {"0", "1"}:
            break
    assert {p.name.split("-")[0] for p in spooled} == {"0", "1"}   # both processes spooled links
    for engine in ("local", "dask"):
        shutil.copytree(crawled, tmp_path / engine)
    # A checkpoint per spool file: as many as the files, two at least.
    local = with_links(tmp_path / "local" / "archiver.toml", slices=4, checkpoint_urls=1)
    on_dask = dask(tmp_path / "dask" / "archiver.toml", checkpoint_urls=1)
    local_totals = await trio.to_thread.run_sync(batch_once, local)
    with caplog.at_level(logging.INFO, logger="archiver.links"):
        dask_totals = await trio.to_thread.run_sync(batch_once, on_dask)
    assert local_totals.new_urls > 0 and local_totals.checkpoints > 1
    assert (dask_totals.files, dask_totals.lines, dask_totals.new_urls, dask_totals.new_sites,
            dask_totals.checkpoints) == (local_totals.files, local_totals.lines,
                                         local_totals.new_urls, local_totals.new_sites,
                                         local_totals.checkpoints)
    assert snapshot(on_dask.root, 2, marks=True) == snapshot(local.root, 2, marks=True)
    started = [r.fields for r in caplog.records if r.getMessage() == "dask-local-cluster"]
    assert len(started) == 1 and started[0]["dashboard"].startswith("http://127.0.0.1:")


def spooled(directory: Path, *, scheduler: str | None = None) -> config.Config:
    """A config with 4 slices and checkpoints of 3,000 lines, for the Dask engine if a
    ``scheduler`` is given ("": a LocalCluster), and the synthetic spool: 12 files of 1,500 lines,
    so 6 checkpoints."""
    cfg = links_config(directory, checkpoint=3000)
    cfg = with_links(cfg.path, slices=4) if scheduler is None else dask(cfg.path, scheduler)
    synthetic_spool(partial(write_spool, cfg.root))
    return cfg


def test_both_engines_queue_the_same_over_many_checkpoints(tmp_path, caplog):
    local, remote = spooled(tmp_path / "local"), spooled(tmp_path / "dask", scheduler="")
    expected = batch_once(local)
    with caplog.at_level(logging.INFO, logger="archiver.links.batch"):
        got = batch_once(remote, progress_interval=0)
    assert got.checkpoints == expected.checkpoints > 3
    assert (got.new_urls, got.new_sites, got.new_pairs) == \
        (expected.new_urls, expected.new_sites, expected.new_pairs)
    assert snapshot(remote.root, 2, marks=True) == snapshot(local.root, 2, marks=True)
    # Progress as with the local engine: each checkpoint's files read, then its slices done.
    progress = [r.fields["checkpoint"] for r in caplog.records
                if r.getMessage() == "links-progress"]
    assert progress.count("2 files, 3000 URLs read, 4/4 slices done") == got.checkpoints
    assert progress[0] == "1 files, 1500 URLs read, 0/4 slices done"
    assert all("URLs/s" in r.fields["summary"] for r in caplog.records
               if r.getMessage() == "links-progress")


def test_the_local_clusters_workers_keep_glibcs_own_malloc_thresholds(tmp_path):
    cfg = dask(links_config(tmp_path).path)
    with LinkBatch(cfg) as batch:
        assert isinstance(batch.engine, DaskEngine)
        environments = batch.engine.client.run(
            lambda: (os.environ.get("MALLOC_TRIM_THRESHOLD_"), os.environ.get("OMP_NUM_THREADS")))
    # Dask's own default, 65536, would map every array of a read afresh; its threads rule stays.
    assert list(environments.values()) == [(None, "1"), (None, "1")]


def test_a_worker_killed_mid_run_leaves_the_same_queues_as_a_clean_run(tmp_path):
    clean = spooled(tmp_path / "clean")
    batch_once(clean)
    with local_cluster() as client:
        cfg = spooled(tmp_path / "killed", scheduler=client.scheduler.address)
        # The worker that starts reading the sixth file (the third checkpoint's, after two
        # commits) is held there and killed: mid-run, mid-task, its cached slices gone with it.
        sixth = sorted((cfg.root / "spool").glob("*.tsv"))[5].name
        marker = tmp_path / "held"
        client.register_plugin(HoldOnce(f"links-read-{sixth}-", marker))
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(batch_once, cfg)
            held = wait_for_marker(marker)
            assert not running.done()
            kill_and_wait(held)
            totals = running.result(timeout=120)
        assert held not in worker_pids(client)              # the worker was replaced
    assert totals.files == 12
    assert snapshot(cfg.root, 2, marks=True) == snapshot(clean.root, 2, marks=True)


def test_the_client_killed_with_its_local_cluster_then_rerun_equals_one_clean_run(tmp_path):
    clean = spooled(tmp_path / "clean")
    batch_once(clean)
    cfg = spooled(tmp_path / "killed", scheduler="")
    # Its own session, so that its LocalCluster's workers die with it, as on a machine that stops.
    with removing_semaphores_of_the_killed():
        proc = subprocess.Popen([*ARCHIVER, "links", "run", "--once", "--config", str(cfg.path)],
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                if "links-checkpoint" in line and "generation=2" in line:
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
        finally:
            proc.wait(timeout=_DEADLINE)
    assert proc.returncode == -signal.SIGKILL
    with_links(cfg.path, engine="local")
    rerun = batch_once(config.load(cfg.path))
    assert 0 < rerun.files < 12                       # it really stopped halfway
    assert snapshot(cfg.root, 2, marks=True) == snapshot(clean.root, 2, marks=True)


def test_on_the_shared_stores_the_workers_read_the_bucket(tmp_path, pg_store_url, s3_bucket):
    embedded = links_config(tmp_path / "embedded")
    embedded = with_links(embedded.path, slices=4)
    synthetic_spool(partial(write_spool, embedded.root), files=4)
    batch_once(embedded)
    cfg = shared_links_config(tmp_path / "m1", store_url=pg_store_url, bucket=s3_bucket)
    cfg = dask(cfg.path)
    synthetic_spool(partial(ship_spool, cfg), files=4)
    shutil.rmtree(cfg.root / "spool")             # only the bucket has the spool files now
    assert batch_once(cfg).files == 4
    sites, inboxes = shared_snapshot(pg_store_url, marks=True)
    want_sites, want_queues = snapshot(embedded.root, 2, marks=True)
    assert {o: marks for o, (_, *marks) in sites.items()} == \
        {o: marks for o, (_, _, *marks) in want_sites.items()}            # in-links, hops, priority
    assert {hops for _, _, _, hops, _ in want_sites.values()} >= {1, 2, 3}
    assert {priority for *_, priority in want_sites.values()} == {0.5, 1.5, 2.5}
    assert {o: [url for _, url, _ in rows] for o, rows in inboxes.items()} == want_queues
