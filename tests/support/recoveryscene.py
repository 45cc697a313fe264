"""An archive for crash-recovery tests: a crawl queue, WARC pages written past its commit point,
and the state recovery leaves."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from archiver.config import Config, from_dict
from archiver.crawl.recovery import recover
from archiver.queues.models import Entry
from archiver.store.bundles import BundleWriter
from archiver.store.embedded.catalog import Catalog
from archiver.stores import open_stores

GET = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
SITE = "http://a.test"


def config_for(root: Path, **crawl: object) -> Config:
    return from_dict({"archive": {"root": str(root)}, "catalog": {"shards": 4},
                      "crawl": crawl})


def queue(config: Config, origin: str, entries: list[tuple[str, int]]) -> dict[str, Entry]:
    """A site's crawl queue holding ``entries`` (url, depth); its entries by URL."""
    with open_stores(config).crawl_queues().open(origin) as crawl_queue:
        for url, depth in entries:
            assert crawl_queue.add(url, depth)
        return {entry.url: entry for entry, _ in crawl_queue.pending_entries()}


def page(writer: BundleWriter, url: str, body: bytes = b"", *, status: int = 200,
         headers: str = "Content-Type: text/html\r\n", date: datetime | None = None) -> None:
    head = f"HTTP/1.1 {status} X\r\n{headers}\r\n".encode()
    writer.write_exchange(url=url, ip="127.0.0.1", date=date or datetime.now(UTC), request=GET,
                          response_head=head, response_body=body)


def run(config: Config) -> tuple[object, list[str]]:
    """Recover process 0; the result and the catalog's URLs."""
    with Catalog(config.root / "catalog", config.catalog.shards) as catalog:
        result = recover(config, open_stores(config), 0, catalog)
        return result, sorted(c.url for c in catalog.iter_all())


def state(config: Config, origin: str) -> tuple[int, int, int, list[str]]:
    """Cursor, pages, bytes, and the URLs the queue hands out next."""
    with open_stores(config).crawl_queues().open(origin) as crawl_queue:
        handed = []
        while (entry := crawl_queue.next()) is not None:
            handed.append(entry.url)
        return crawl_queue.cursor, crawl_queue.pages, crawl_queue.bytes, handed
