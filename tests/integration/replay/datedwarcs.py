"""Archives written record by record, each at its own date, as another tool would write them: for
the capture calendar and temporal coherence tests, which need captures years or days apart."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.config import Config, load
from archiver.store.catalog_maintenance import WarcFiles, reindex
from archiver.web.timestamps import to_iso


@dataclass(frozen=True)
class Record:
    """One response: its URL, 14-digit timestamp, body, Content-Type, status line and Location."""

    url: str
    timestamp: str
    body: bytes = b""
    content_type: str = "text/html"
    status: str = "200 OK"
    location: str | None = None


def minimal_config(directory: Path) -> Config:
    (directory / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    return load(directory / "archiver.toml")


def write_dated_archive(config: Config, records: list[Record]) -> None:
    """One WARC of ``records`` in the archive of ``config`` (which has none yet), and its catalog."""
    warcs = config.root / "warcs"
    warcs.mkdir(parents=True)
    with (warcs / "dated.warc.gz").open("wb") as out:
        writer = WARCWriter(out, gzip=True)
        for one in records:
            headers = [("Content-Type", one.content_type)]
            if one.location is not None:
                headers.append(("Location", one.location))
            head = StatusAndHeaders(one.status, headers, protocol="HTTP/1.1")
            record = writer.create_warc_record(
                one.url, "response", payload=io.BytesIO(one.body), http_headers=head,
                warc_headers_dict={"WARC-Date": to_iso(one.timestamp)},
            )  # fmt: skip
            writer.write_record(record)
    reader = WarcFiles(warcs)
    reindex(config.root, config.catalog.shards, reader, reader.names())
