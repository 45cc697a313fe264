"""One archive in either mode, for the tests that must pass on both.

``mode_archive`` (parametrised: ``embedded``, ``shared``) writes a config for a fresh archive:
embedded is SQLite files and a WARC folder under the root; shared is a database at archiver's
schema on the test PostgreSQL server (``pg_store_url``) and bundles in a bucket of the test S3
server (``s3_bucket``, prefix ``warcs``). :func:`write_bundles` makes real bundles with
:class:`BundleWriter`, and :meth:`ModeArchive.keep` puts closed bundles where the mode keeps
them: moved into the WARC folder, or shipped (and verified) to the object store.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from archiver import config
from archiver.config import WarcConfig
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.store.bundles import BundleWriter
from archiver.store.models import Capture, Observation
from archiver.store.s3.objectstore import S3Store
from archiver.store.shipping import ship_closed
from archiver.store.warcindex import index_warc
from archiver.stores import Stores, open_stores

BASE = """\
[archive]
root = "archive"
[dns]
hosts_file = ""
nameservers = ["127.0.0.1:9"]
"""
DATE = datetime(2026, 11, 22, 3, 15, tzinfo=UTC)


@dataclass
class ModeArchive:
    """A config file naming an empty archive in one mode, and its stores."""

    mode: str
    path: Path
    config: config.Config
    stores: Stores

    def keep(self, bundles: list[Path]) -> None:
        """Put closed bundles where this mode's readers find them (they leave their folder)."""
        objects = self.stores.shared_objects()
        if objects is None:
            folder = self.stores.warc_directory()
            folder.mkdir(parents=True, exist_ok=True)
            for path in bundles:
                shutil.move(path, folder / path.name)
            return
        for source in {path.parent for path in bundles}:
            ship_closed(source, objects)

    def queue_sites(self, queued: dict[int, list[str]], done: list[str],
                    revisits: dict[str, float] | None = None) -> None:
        """Sites waiting in the site queues (embedded: in process N's queue), sites done
        (embedded: in a queue of their own, process 9's, where each is the one to claim), and
        finished sites waiting for a revisit due at the given times (process 9's queue too)."""
        revisits = revisits or {}
        if (cluster := self.stores.cluster) is not None:
            with psycopg.connect(cluster.url, autocommit=True) as conn:
                for origin in [o for origins in queued.values() for o in origins]:
                    conn.execute("INSERT INTO sites (origin, added) VALUES (%s, 0)", (origin,))
                for origin in done:
                    conn.execute("INSERT INTO sites (origin, state, added) VALUES (%s, 'done', 0)", (origin,))
                for origin, due in revisits.items():
                    conn.execute("INSERT INTO sites (origin, state, due, added)"
                                 " VALUES (%s, 'revisit', %s, 0)", (origin, due))
            return
        for process, origins in queued.items():
            with SiteQueue(queue_path(self.config.root, process)) as queue:
                for origin in origins:
                    queue.add(origin)
        with SiteQueue(queue_path(self.config.root, 9)) as queue:
            for origin in [*done, *revisits]:
                queue.add(origin)
                assert queue.claim(include_deferred=False) == origin
                queue.finish(origin)
        with sqlite3.connect(queue_path(self.config.root, 9)) as db:
            db.executemany("UPDATE sites SET state = 'revisit', due = ? WHERE origin = ?",
                           [(due, origin) for origin, due in revisits.items()])
        db.close()

    def overwrite(self, name: str, data: bytes) -> None:
        """Replace a kept bundle's bytes behind archiver's back, as another client would."""
        store = self.stores.shared_objects()
        if store is None:
            (self.stores.warc_directory() / name).write_bytes(data)
            return
        assert isinstance(store, S3Store)
        store.client.put_object(Bucket=store.bucket, Key=f"{store.prefix}/{name}", Body=data)


@pytest.fixture(params=["embedded", "shared"])
def mode_archive(request: pytest.FixtureRequest, tmp_path: Path) -> ModeArchive:
    text = BASE
    if request.param == "shared":
        url = request.getfixturevalue("pg_store_url")
        bucket = request.getfixturevalue("s3_bucket")
        text += (f'[store]\nurl = "{url}"\n[warc]\nstore = "s3://{bucket.name}/warcs"\n'
                 f'[s3]\nendpoint_url = "{bucket.endpoint}"\nregion = "us-east-1"\n')
    path = tmp_path / "archiver.toml"
    path.write_text(text)
    cfg = config.load(path)
    return ModeArchive(str(request.param), path, cfg, open_stores(cfg))


def write_bundles(directory: Path, pages: dict[str, bytes], *, max_size: int = 4000,
                  mime: str = "text/html") -> list[Path]:
    """One exchange per page, a second apart from DATE, in bundles rotated at ``max_size``
    bytes; the closed bundles, sorted."""
    with BundleWriter(directory, WarcConfig(max_size=max_size)) as writer:
        for i, (url, body) in enumerate(pages.items()):
            writer.write_exchange(
                url=url, ip="127.0.0.1", date=DATE + timedelta(seconds=i),
                request=b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n",
                response_head=b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\n\r\n" % mime.encode(),
                response_body=body)
    return sorted(directory.glob("*.warc.gz"))


def entries_of(bundles: list[Path]) -> list[Capture]:
    """The catalog entries of ``bundles``, in file order."""
    return [capture for path in bundles for capture in index_warc(path)]


LOOKED_UP = "http://example.org/doc"  # the one page of ``lookup_archive``


def lookup_archive(folder: Path) -> Path:
    """The config (in ``folder``) of an embedded archive with one capture of LOOKED_UP and one
    DNS answer for example.org (192.0.2.7), as the lookup commands read them."""
    path = folder / "archiver.toml"
    path.write_text(BASE.replace('root = "archive"', f'root = "{folder / "archive"}"'))
    stores = open_stores(config.load(path))
    bundles = write_bundles(stores.warc_directory(), {LOOKED_UP: b"hello"})
    with stores.catalog() as catalog:
        catalog.add(entries_of(bundles))
    history = stores.dns_history()
    try:
        history.record(Observation("example.org", "example.org", (), ("192.0.2.7",), 300.0),
                       DATE.timestamp(), next_check=DATE.timestamp() + 300)
    finally:
        history.close()
    return path
