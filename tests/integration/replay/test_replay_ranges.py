"""Replay answers Range requests for archived media, so a video can be seeked: 206 with the
bytes asked, 416 past the end, the whole body without a Range; pages rewritten for replay are
always sent whole."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.config import load
from archiver.store.imports import import_file
from archiver.store.objectstore import FolderStore
from archiver.stores import EmbeddedStores
from tests.support.rawhttp import get
from tests.support.replayarchive import serving

VIDEO = bytes(range(256)) * 40  # 10,240 bytes
STAMP = "20250101120000"


def archive_with_video(tmp_path: Path):
    path = tmp_path / "archiver.toml"
    path.write_text('[archive]\nroot = "archive"\n')
    config = load(path)
    source = tmp_path / "media.warc.gz"
    with source.open("wb") as out:
        writer = WARCWriter(out, gzip=True)
        for url, kind, body in [("http://example.org/clip.mp4", "video/mp4", VIDEO),
                                ("http://example.org/", "text/html", b"<video src=clip.mp4></video>")]:
            head = StatusAndHeaders("200 OK", [("Content-Type", kind)], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=head,
                warc_headers_dict={"WARC-Date": "2025-01-01T12:00:00Z"}))
    stores = EmbeddedStores(config)
    with contextlib.closing(stores.catalog()) as catalog:
        import_file(source, warcs=FolderStore(stores.warc_directory()), catalog=catalog,
                    in_place=False)
    return config


async def test_media_is_served_by_range(tmp_path):
    config = archive_with_video(tmp_path)
    async with serving(config) as running:
        clip = f"/web/{STAMP}id_/http://example.org/clip.mp4"
        status, headers, body = await get(running.content_at, clip)
        assert (status, body, headers["accept-ranges"]) == (200, VIDEO, "bytes")
        status, headers, body = await get(running.content_at, clip, Range="bytes=100-199")
        assert (status, body) == (206, VIDEO[100:200])
        assert headers["content-range"] == f"bytes 100-199/{len(VIDEO)}"
        status, headers, body = await get(running.content_at, clip, Range="bytes=-16")
        assert (status, body) == (206, VIDEO[-16:])
        status, headers, _ = await get(running.content_at, clip, Range=f"bytes={len(VIDEO)}-")
        assert status == 416 and headers["content-range"] == f"bytes */{len(VIDEO)}"
        # Without id_ the clip is not rewritten: ranges apply there too.
        status, _, body = await get(running.content_at, f"/web/{STAMP}/http://example.org/clip.mp4",
                                    Range="bytes=0-9")
        assert (status, body) == (206, VIDEO[:10])
        # A rewritten page is sent whole, whatever the Range.
        status, headers, body = await get(running.content_at, f"/web/{STAMP}/http://example.org/",
                                          Range="bytes=0-3")
        assert status == 200 and "content-range" not in headers and len(body) > 4
