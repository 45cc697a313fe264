"""An archive where one URL has very many captures, its catalog rows written straight in.

One WARC holds a response of ``URL`` and a revisit of it without WARC-Refers-To headers (as another
tool may write it); the catalog holds ``count`` captures of ``URL`` a minute apart from
``START`` on, every tenth the revisit, all pointing at those two records. A million rows take
about 15 s. For the replay memory test and ``tools/bench_replay_captures.py``.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.store.warcindex import index_warc

URL = "http://busy.test/page"
START = datetime(2020, 1, 1, tzinfo=UTC)
PAGE = b"<!DOCTYPE html><title>busy</title><p>One page captured again and again.</p>"
SHARDS = 1000


def stamp(n: int) -> str:
    """The timestamp of capture ``n``: a minute after capture ``n - 1``."""
    return f"{START + timedelta(minutes=n):%Y%m%d%H%M%S}"


def is_revisit(n: int) -> bool:
    return n % 10 == 9


def write_many_captures(archive: Path, count: int) -> None:
    """In the archive root ``archive`` (with ``SHARDS`` catalog shards): the WARC and ``count``
    catalog rows."""
    warcs = archive / "warcs"
    warcs.mkdir(parents=True)
    path = warcs / "busy.warc.gz"
    with path.open("wb") as out:
        writer = WARCWriter(out, gzip=True)
        head = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        response = writer.create_warc_record(URL, "response", payload=io.BytesIO(PAGE), http_headers=head,
                                             warc_headers_dict={"WARC-Date": "2020-01-01T00:00:00Z"})
        writer.write_record(response)
        digest = response.rec_headers.get_header("WARC-Payload-Digest")
        revisit = writer.create_revisit_record(URL, digest, "", "2020-01-01T00:00:00Z", http_headers=head)
        writer.write_record(revisit)
    response_row, revisit_row = list(index_warc(path))

    def rows() -> Iterator[Capture]:
        for n in range(count):
            yield dataclasses.replace(revisit_row if is_revisit(n) else response_row, timestamp=stamp(n))

    with Catalog(archive / "catalog", SHARDS) as catalog:
        catalog.add(rows())
