"""An archive of the demo web crawled at two dates, for the replay tests.

The first crawl sees version 0 of the web, the second (a recrawl of every site, at least one
second later) version 1, where a third of the pages changed and /news/v1.html appeared. Unchanged
payloads of the second crawl are stored as revisit records.
"""

from __future__ import annotations

import dataclasses
import io
import math
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import trio
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.config import Config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.replay.app import create_apps
from archiver.replay.serve import listeners, serve_apps
from archiver.store.catalog_maintenance import WarcFiles, reindex
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.web.timestamps import to_iso
from demoweb import DemoWeb, WebSpec, start_demo
from tests.support.crawls import load, write_config

SPEC = WebSpec(sites=3, pages_per_site=8, port=0, trap=False)


@dataclass
class TwoDates:
    """The archive after both crawls, and what each crawl put in the catalog."""

    root: Path
    config: Config
    web0: DemoWeb
    web1: DemoWeb
    first: list[Capture]
    second: list[Capture]


async def _crawl(config_dir: Path, spec: WebSpec, *, recrawl: bool) -> tuple[DemoWeb, Config]:
    async with trio.open_nursery() as nursery:
        web, _server = await start_demo(nursery, spec)
        config = load(write_config(config_dir, web))
        enqueue_seeds(config, 0, [o + "/" for o in web.origins()], recrawl=recrawl)
        await Crawler(config, until_idle=True).run()
        nursery.cancel_scope.cancel()
    return web, config


def _all(config: Config) -> list[Capture]:
    with Catalog(config.root / "catalog", config.catalog.shards, readonly=True) as catalog:
        return list(catalog.iter_all())


async def two_date_archive(directory: Path, spec: WebSpec = SPEC) -> TwoDates:
    """Crawl ``spec`` (version 0), then recrawl it as version 1 on the same port."""
    web0, config = await _crawl(directory, spec, recrawl=False)
    first = _all(config)
    # The catalog's dates have whole seconds: start the second crawl in a later second.
    await trio.sleep(math.floor(time.time()) + 1.01 - time.time())
    spec1 = dataclasses.replace(spec, port=web0.spec.port, version=1)
    web1, config = await _crawl(directory, spec1, recrawl=True)
    seen = {(c.filename, c.offset) for c in first}
    second = [c for c in _all(config) if (c.filename, c.offset) not in seen]
    return TwoDates(root=config.root, config=config, web0=web0, web1=web1, first=first,
                    second=second)


@pytest.fixture(scope="session")
def two_dates_crawled(tmp_path_factory: pytest.TempPathFactory) -> TwoDates:
    """The two-date archive, crawled once for the whole run (seven seconds of crawling, most of
    them politeness rests): a module takes a copy of its own (``copy_of``), never changes this."""
    return trio.run(two_date_archive, tmp_path_factory.mktemp("two-dates"))


def copy_of(two: TwoDates, directory: Path) -> TwoDates:
    """``two`` copied into ``directory`` (config, hosts file and archive, which holds no absolute
    path): the same captures, in an archive of its own."""
    shutil.copytree(two.config.path.parent, directory, dirs_exist_ok=True)
    config = load(directory / two.config.path.name)
    return dataclasses.replace(two, root=config.root, config=config)


@dataclass
class Served:
    """A running replay service: the public URLs of its own pages and of archived content, and
    where their listeners are (the same unless the config names other public URLs)."""

    app: str
    content: str
    config: Config
    app_at: str
    content_at: str


@asynccontextmanager
async def serving(config: Config, **replay: object) -> AsyncIterator[Served]:
    """The replay service over ``config``'s archive on two free loopback ports (``replay``:
    other [replay] settings), stopped on exit."""
    loopback = {"listen": "127.0.0.1:0", "content_listen": "127.0.0.1:0"}
    settings = dataclasses.replace(config.replay, **{**loopback, **replay})
    binds = listeners(dataclasses.replace(config, replay=settings))
    apps = create_apps(binds.config)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        app_at, content_at = await nursery.start(partial(serve_apps, apps, binds, stop.wait))
        public = binds.config.replay
        try:
            yield Served(public.base_url, public.content_origin, binds.config, app_at[0], content_at[0])
        finally:
            stop.set()


def write_archive(config: Config, timestamp: str, pages: dict[str, bytes | tuple[bytes, str]]) -> None:
    """A WARC of one 200 response per URL, all at ``timestamp``, written as another tool would,
    and its catalog. A URL maps to its body (HTML) or to its body and Content-Type."""
    warcs = config.root / "warcs"
    warcs.mkdir(parents=True)
    with (warcs / "written.warc.gz").open("wb") as out:
        writer = WARCWriter(out, gzip=True)
        for url, page in pages.items():
            body, kind = page if isinstance(page, tuple) else (page, "text/html")
            head = StatusAndHeaders("200 OK", [("Content-Type", kind)], protocol="HTTP/1.1")
            record = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=head,
                warc_headers_dict={"WARC-Date": to_iso(timestamp)},
            )  # fmt: skip
            writer.write_record(record)
    reader = WarcFiles(warcs)
    reindex(config.root, config.catalog.shards, reader, reader.names())
