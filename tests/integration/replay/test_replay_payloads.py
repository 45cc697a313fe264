"""Large payloads stream from their WARC record in both store modes: a small WARC whose record
holds a 1 GiB compressible payload (in the shared mode, 256 MiB in the S3 bucket) is replayed
whole and by range by ``archiver replay`` in a process of its own, whose peak memory stays flat
and whose ``Range: bytes=0-0`` answer is immediate (before, each request read the whole payload:
10 s and 2.1 GiB)."""

from __future__ import annotations

import re
import time
import uuid
import zlib
from pathlib import Path

import h11
import trio

from tests.support.replayprocess import replay_process
from tests.support.storemodes import ModeArchive, entries_of

URL = "http://media.test/film.mp4"
STAMP = "20260101000000"
MiB = 2**20
SIZES = {"embedded": 1024 * MiB, "shared": 256 * MiB}
# What the replay process may grow by while it serves them (a piece of the payload at a time,
# and the inflater's output of one 4 KiB block: zeros inflate to 1,032 times their size).
GROWTH = 64 * MiB


def zeros_warc(path: Path, size: int) -> None:
    """A WARC of one response whose payload is ``size`` zero bytes, written as it is compressed
    (one gzip member), never held whole."""
    http = b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\nContent-Length: %d\r\n\r\n" % size
    warc = (f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{uuid.uuid4()}>\r\n"
            f"WARC-Date: 2026-01-01T00:00:00Z\r\nWARC-Target-URI: {URL}\r\n"
            "Content-Type: application/http; msgtype=response\r\n"
            f"Content-Length: {len(http) + size}\r\n\r\n").encode()
    member = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = bytes(MiB)
    with path.open("wb") as out:
        out.write(member.compress(warc + http))
        for _ in range(size // MiB):
            out.write(member.compress(block))
        out.write(member.compress(bytes(size % MiB) + b"\r\n\r\n"))
        out.write(member.flush())


async def fetch(origin: str, path: str, **headers: str) -> tuple[int, dict[str, str], int, bytes]:
    """GET: status, headers, the body's length and first bytes (the rest counted, not kept);
    ValueError if a 2xx body holds anything but zeros."""
    host, port = origin.removeprefix("http://").rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        conn = h11.Connection(h11.CLIENT)
        fields = [("Host", f"{host}:{port}"), ("Connection", "close"), *headers.items()]
        await stream.send_all(conn.send(h11.Request(method="GET", target=path, headers=fields)))
        await stream.send_all(conn.send(h11.EndOfMessage()))
        response: h11.Response | None = None
        size, first = 0, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(1 << 20))
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                assert response is not None
                if response.status_code < 300 and event.data.count(0) != len(event.data):
                    raise ValueError(f"a byte other than zero near byte {size}")
                first = first or bytes(event.data[:16])
                size += len(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
    assert response is not None
    found = {name.decode().lower(): value.decode() for name, value in response.headers}
    return response.status_code, found, size, first


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


async def test_a_large_payload_streams_in_flat_memory(mode_archive: ModeArchive, tmp_path: Path) -> None:
    size = SIZES[mode_archive.mode]
    folder = tmp_path / "new"
    folder.mkdir()
    zeros_warc(folder / "big.warc.gz", size)
    assert (folder / "big.warc.gz").stat().st_size < 2 * MiB
    entries = entries_of([folder / "big.warc.gz"])
    mode_archive.keep([folder / "big.warc.gz"])
    with mode_archive.stores.catalog() as catalog:
        catalog.add(entries)
    config_path = mode_archive.path.with_name("replay.toml")  # beside it: the same archive root
    config_path.write_text(mode_archive.path.read_text()
                           + '[replay]\nlisten = "127.0.0.1:0"\ncontent_listen = "127.0.0.1:0"\n')
    path = f"/web/{STAMP}id_/{URL}"
    async with replay_process(config_path) as replay:
        content, pid = replay.content, replay.pid
        status, headers, length, _ = await fetch(content, f"/web/{STAMP}id_/http://media.test/none")
        assert status == 404
        before = peak_rss(pid)

        started = time.monotonic()
        status, headers, length, first = await fetch(content, path, Range="bytes=0-0")
        ranged = time.monotonic() - started
        assert (status, headers["content-range"], length, first) == (206, f"bytes 0-0/{size}", 1, b"\0")
        status, headers, length, _ = await fetch(content, path, Range=f"bytes={size - 10}-")
        assert (status, headers["content-range"], length) == (206, f"bytes {size - 10}-{size - 1}/{size}", 10)
        status, headers, length, _ = await fetch(content, path)
        assert (status, headers["content-length"], length) == (200, str(size), size)
        assert headers["content-type"] == "video/mp4"
        status, headers, length, _ = await fetch(content, path, Range=f"bytes={size}-")
        assert (status, headers["content-range"], length) == (416, f"bytes */{size}", 0)
        grown = peak_rss(pid) - before
    # Whole payload reads took 10 s and 2.1 GiB per request (1 GiB); a piece at a time, these
    # stay far below.
    assert ranged < 2.0, ranged
    assert grown < GROWTH, (grown // MiB, "MiB")
