"""The external-link batch's test setting: a config with a [links] section (embedded, or one
machine of a cluster), spool files (on disk, or shipped to the bucket), and a snapshot of what the
batch queued (site queues and crawl queues, or the shared tables)."""

from __future__ import annotations

import random
import re
import sqlite3
from collections import defaultdict
from collections.abc import Collection, Mapping
from contextlib import closing
from pathlib import Path

import numpy as np
import psycopg

from archiver import config
from archiver.links.batch import LinkBatch
from archiver.queues.embedded.sitequeue import queue_path
from archiver.queues.sitechanges import SiteChanges
from archiver.queues.spool import OBJECT_PREFIX
from archiver.store.s3.objectstore import S3Store
from archiver.store.shipping import ship_closed
from tests.support.crawlqueues import embedded_queues
from tests.support.objectstore import S3Bucket

LINKS = "\n[links]\nexpected_urls = 200000\nbits_per_url = 16\ncheckpoint_urls = {checkpoint}\n"


def site_changes(inlinks: Mapping[str, int], woken: Collection[str] = (),
                 marks: Mapping[str, tuple[int, float]] | None = None) -> SiteChanges:
    """A checkpoint's site changes given as maps: in-links gained, the sites with new URLs, and
    the (hops, priority) of the sites linked to; a site that gained in-links or new URLs without
    marks reads as hops 0, priority 0 (as ``steps.site_changes`` gives it)."""
    marks, woken = marks or {}, set(woken)
    origins = sorted(inlinks.keys() | woken | marks.keys())
    return SiteChanges(
        origins=np.array(origins, dtype=object),
        inlinks=np.array([inlinks.get(o, 0) for o in origins], dtype=np.int64),
        woken=np.array([o in woken for o in origins], dtype=bool),
        hops=np.array([marks.get(o, (0, 0.0))[0] for o in origins], dtype=np.int64),
        priority=np.array([marks.get(o, (0, 0.0))[1] for o in origins], dtype=np.float64))


def as_maps(changes: SiteChanges) -> tuple[dict[str, int], set[str], dict[str, tuple[int, float]]]:
    """A checkpoint's site changes as maps: the in-links of the sites that gained any, the sites
    with new URLs, and every site's (hops, priority)."""
    origins = changes.origins.tolist()
    return ({o: n for o, n in zip(origins, changes.inlinks.tolist(), strict=True) if n},
            {o for o, w in zip(origins, changes.woken.tolist(), strict=True) if w},
            dict(zip(origins, zip(changes.hops.tolist(), changes.priority.tolist(), strict=True),
                     strict=True)))


def links_config(directory: Path, *, processes: int = 2, checkpoint: int = 1000,
                 slices: int = 4) -> config.Config:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "archiver.toml"
    path.write_text(f'[archive]\nroot = "archive"\n[crawl]\nprocesses = {processes}\n'
                    'allowed_networks = ["127.0.0.0/8"]\n'
                    + LINKS.format(checkpoint=checkpoint) + f"slices = {slices}\n")
    return config.load(path)


def with_slices(cfg: config.Config, slices: int) -> config.Config:
    """The same config with another links.slices."""
    text = cfg.path.read_text()
    cfg.path.write_text(re.sub(r"(?m)^slices = \d+$", f"slices = {slices}", text))
    return config.load(cfg.path)


def write_spool(root: Path, name: str, lines: list[str]) -> Path:
    path = root / "spool" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def snapshot(root: Path, processes: int, *, marks: bool = False) -> tuple[dict, dict]:
    """The site queues (origin -> process, state, in-links; with ``marks`` hops and priority too)
    and each site's crawl queue, inbox merged."""
    sites = {}
    columns = "origin, state, inlinks" + (", hops, priority" if marks else "")
    for p in range(processes):
        path = queue_path(root, p)
        if path.exists():
            db = sqlite3.connect(path)
            sites.update({o: (p, *rest) for o, *rest in db.execute(
                f"SELECT {columns} FROM sites")})
            db.close()
    queues = {}
    with closing(embedded_queues(root)) as crawl_queues:
        for origin in sites:
            with crawl_queues.open(origin) as crawl_queue:
                queues[origin] = [e.url for e in iter(crawl_queue.next, None)]
    return sites, queues


def batch_once(cfg: config.Config, *, progress_interval: float = 5.0):
    with LinkBatch(cfg, progress_interval=progress_interval) as batch:
        return batch.run(once=True)


def shared_links_config(directory: Path, *, store_url: str, bucket: S3Bucket, processes: int = 2,
                        checkpoint: int = 1000) -> config.Config:
    """``links_config`` for one machine of a cluster: the shared PostgreSQL store and bucket."""
    cfg = links_config(directory, processes=processes, checkpoint=checkpoint)
    cfg.path.write_text(cfg.path.read_text() + (
        f'[store]\nurl = "{store_url}"\n[warc]\nstore = "s3://{bucket.name}/crawl"\n'
        f'[s3]\nendpoint_url = "{bucket.endpoint}"\nregion = "us-east-1"\n'))
    return config.load(cfg.path)


def ship_spool(cfg: config.Config, name: str, lines: list[str]) -> None:
    """A spool file closed on a crawler machine and shipped to the bucket, as the crawler does."""
    write_spool(cfg.root, name, lines)
    shipped = ship_closed(cfg.root / "spool", S3Store.from_config(cfg.warc.store, cfg.s3),
                          pattern="*.tsv", under=OBJECT_PREFIX)
    assert [s.name for s in shipped] == [name]


def shared_snapshot(store_url: str, *, marks: bool = False) -> tuple[dict, dict]:
    """The shared site queue (origin -> state, in-links; with ``marks`` hops and priority too)
    and each site's inbox: (depth, url, refetch) rows in the order they were added."""
    columns = "origin, state, inlinks" + (", hops, priority" if marks else "")
    with psycopg.connect(store_url) as db:
        sites = {o: tuple(rest) for o, *rest in db.execute(f"SELECT {columns} FROM sites")}
        inboxes: dict[str, list] = defaultdict(list)
        for origin, depth, url, refetch in db.execute(
                "SELECT origin, depth, url, refetch FROM crawl_inbox ORDER BY id"):
            inboxes[origin].append((depth, url, refetch))
    return sites, dict(inboxes)


def synthetic_spool(write, *, files: int = 12, per_file: int = 1500, sites: int = 150,
                    first: int = 0) -> None:
    """Spool files of random links among ``sites`` sites, written by ``write(name, lines)`` (those
    from the ``first``)."""
    rng = random.Random(7)
    # Hops and priorities (a site's hops mostly 1 + target % 3, its priority target % 3 + 0.5);
    # half the lines to sites of hops 1 are old ones, of three fields.
    marks = random.Random(11)
    for n in range(files):
        lines = []
        for _ in range(per_file):
            source, target = rng.randrange(sites), rng.randrange(sites)
            page = rng.randrange(60)
            line = f"http://S{target}.test/p/{page}.html\thttp://s{source}.test\t20261122000000"
            if target % 3 or marks.random() < 0.5:
                line += f"\t{target % 3 + source % 4}\t{target % 3 + marks.choice([0.0, 0.5])!r}"
            lines.append(line)
        if n >= first:
            write(f"{n % 2}-2026112200{n:04d}-{n:05d}.tsv", lines)
