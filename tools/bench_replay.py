"""Replay under hostile captures and visitors, measured from outside: how long the replay's own
home page takes to answer while hostile documents are served, what a large payload costs, and
how replay of an unrelated capture fares while many full-text searches run.

Builds a temporary archive (written as another tool would: warcio records, then ``catalog
reindex``'s functions), starts ``archiver replay run`` in a child process, and measures with
http.client from threads of this one:

- ``stall``: each hostile document (a page dense with links, a script the lexer must read
  through, a stylesheet of ``url()``s, all just under 16 MiB, and a 24 KB gzip bomb of 16 MiB of
  markup) asked ``--concurrent`` times at once while the home page is asked again and again: the
  documents' answer time, the home page's worst and median answer time, the replay's peak RSS
  (its worker processes apart: ``--children`` adds them);
- ``payload``: a 1 MB WARC holding a ``--payload-mib`` MiB compressible payload: the time of
  ``Range: bytes=0-0`` and of the whole GET, and the replay's peak RSS growth;
- ``search``: ``--searches`` searches at once for a word on every page of a ``--pages``-page
  full-text index while an unrelated capture is replayed again and again: its worst answer time
  and how many searches got a 503.

It measures whichever ``archiver`` it imports: run it with ``PYTHONPATH`` at an older checkout
(this file copied in) for a before-and-after comparison. Prints JSON.

    python -m tools.bench_replay [--only stall,payload,search] [--concurrent 1]
                                 [--payload-mib 1024] [--pages 20000] [--searches 100]
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import io
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.config import Config, load
from archiver.store.catalog_maintenance import WarcFiles, reindex
from archiver.store.embedded.fulltext import FtsIndex
from archiver.store.models import IndexedCapture
from archiver.web.pagetext import PageText

STAMP = "20260101000000"
MiB = 2**20
SIZE = 16 * MiB - 4096  # just under the default replay.max_rewrite_size
SMALL = "http://small.test/"


def repeated(unit: bytes, size: int) -> bytes:
    lines: list[bytes] = []
    total = 0
    while total < size:
        lines.append(unit % ((len(lines),) * unit.count(b"%d")))
        total += len(lines[-1])
    return b"".join(lines)


LINKS = b'<p><a href="/p/%d">a</a> <img src="/i/%d.png"></p>\n'
SCRIPT = b'w%d.postMessage("m" + \'%d\', "*"); if (a / b) { c = /r%d/g.test(`t${d}`); }\n'
MARKUP = b"<p>x</p>" * ((SIZE - 30) // 8)
HOSTILE = {  # what -> (path asked, archived URL, its body as stored, its headers)
    "page": (f"/web/{STAMP}/http://big.test/page.html", "http://big.test/page.html",
             lambda: b"<!DOCTYPE html><body>" + repeated(LINKS, SIZE), [("Content-Type", "text/html")]),
    "script": (f"/web/{STAMP}js_/http://big.test/app.js", "http://big.test/app.js",
               lambda: repeated(SCRIPT, SIZE), [("Content-Type", "application/javascript")]),
    "stylesheet": (f"/web/{STAMP}cs_/http://big.test/style.css", "http://big.test/style.css",
                   lambda: repeated(b".c%d { background: url(/i/%d.png); color: red }\n", SIZE),
                   [("Content-Type", "text/css")]),
    "gzip bomb": (f"/web/{STAMP}/http://bomb.test/", "http://bomb.test/",
                  lambda: gzip.compress(b"<html><body>" + MARKUP + b"</body></html>", 9),
                  [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]),
}


def config_in(folder: Path) -> Config:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "archiver.toml").write_text(
        '[archive]\nroot = "archive"\n[replay]\nlisten = "127.0.0.1:0"\ncontent_listen = "127.0.0.1:0"\n'
        '[log]\nlevel = "warning"\n')
    return load(folder / "archiver.toml")


def write_records(config: Config, responses: dict[str, tuple[bytes, list[tuple[str, str]]]]) -> None:
    warcs = config.root / "warcs"
    warcs.mkdir(parents=True, exist_ok=True)
    with (warcs / "bench.warc.gz").open("wb") as out:
        writer = WARCWriter(out, gzip=True)
        for url, (body, headers) in responses.items():
            record = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body),
                http_headers=StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1"),
                warc_headers_dict={"WARC-Date": "2026-01-01T00:00:00Z"})
            writer.write_record(record)


def zeros_warc(path: Path, url: str, size: int) -> None:
    http = b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\n\r\n"
    warc = (f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{uuid.uuid4()}>\r\n"
            f"WARC-Date: 2026-01-01T00:00:00Z\r\nWARC-Target-URI: {url}\r\n"
            "Content-Type: application/http; msgtype=response\r\n"
            f"Content-Length: {len(http) + size}\r\n\r\n")
    member = zlib.compressobj(6, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        out.write(member.compress(warc.encode() + http))
        for _ in range(size // MiB):
            out.write(member.compress(bytes(MiB)))
        out.write(member.compress(bytes(size % MiB) + b"\r\n\r\n") + member.flush())


def indexed(config: Config) -> None:
    reader = WarcFiles(config.root / "warcs")
    reindex(config.root, config.catalog.shards, reader, reader.names())


class Replay:
    """``archiver replay run`` over ``config`` in a child process."""

    def __init__(self, config: Config) -> None:
        command = [sys.executable, "-m", "archiver", "replay", "run", "--config", str(config.path)]
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        seen = b""
        while len(found := re.findall(rb"Running on (http://127\.0\.0\.1:\d+)", seen)) < 2:
            chunk = self.process.stderr.read1(4096)  # type: ignore[union-attr]
            if not chunk:
                raise RuntimeError(f"archiver replay did not start: {seen.decode(errors='replace')}")
            seen += chunk
        threading.Thread(target=self._drain, daemon=True).start()
        self.app, self.content = found[0].decode(), found[1].decode()

    def _drain(self) -> None:
        while self.process.stderr.read1(65536):  # type: ignore[union-attr]
            pass

    def peak_rss(self, children: bool = False) -> int:
        """Peak RSS in MiB (children: the current RSS of its child processes added)."""
        def field(pid: int, name: str) -> int:
            status = Path(f"/proc/{pid}/status").read_text()
            return int(re.search(rf"{name}:\s+(\d+) kB", status).group(1)) // 1024  # type: ignore[union-attr]
        total = field(self.process.pid, "VmHWM")
        if children:
            found = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True)
            total += sum(field(int(pid), "VmRSS") for pid in found.stdout.split())
        return total

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


def get(origin: str, path: str, **headers: str) -> tuple[int, int, float]:
    """(status, body bytes, seconds) of one GET on a connection of its own."""
    host, port = origin.removeprefix("http://").rsplit(":", 1)
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        size = 0
        while piece := response.read(MiB):
            size += len(piece)
    except (ConnectionError, http.client.HTTPException):
        return 0, 0, time.perf_counter() - started
    finally:
        connection.close()
    return response.status, size, time.perf_counter() - started


def while_running(jobs: list[threading.Thread], probe: Callable[[], float]) -> list[float]:
    """``probe()`` again and again while the jobs run: the seconds each took."""
    for job in jobs:
        job.start()
    taken = []
    while any(job.is_alive() for job in jobs):
        taken.append(probe())
    for job in jobs:
        job.join()
    return taken


def summary(taken: list[float]) -> dict[str, object]:
    return {"answers": len(taken), "worst_s": round(max(taken), 3),
            "median_s": round(statistics.median(taken), 4)}


def stall(work: Path, args: argparse.Namespace) -> dict[str, object]:
    config = config_in(work / "stall")
    small = (b"<title>small</title><p>ordinary</p>", [("Content-Type", "text/html")])
    hostile = {url: (make(), headers) for _, url, make, headers in HOSTILE.values()}
    write_records(config, {**hostile, SMALL: small})
    indexed(config)
    replay = Replay(config)
    results: dict[str, object] = {}
    try:
        get(replay.app, "/")
        for name, (path, *_) in HOSTILE.items():
            answers: list[tuple[int, int, float]] = []
            jobs = [threading.Thread(target=lambda p=path, a=answers: a.append(get(replay.content, p)))
                    for _ in range(args.concurrent)]
            home = while_running(jobs, lambda: get(replay.app, "/")[2])
            results[name] = {"statuses": sorted(status for status, _, _ in answers),
                             "answered_in_s": round(max(seconds for _, _, seconds in answers), 2),
                             "home_page": summary(home), "peak_rss_mib": replay.peak_rss(args.children)}
    finally:
        replay.stop()
    return results


def payload(work: Path, args: argparse.Namespace) -> dict[str, object]:
    config = config_in(work / "payload")
    (config.root / "warcs").mkdir(parents=True)
    size = args.payload_mib * MiB
    url = "http://media.test/film.mp4"
    zeros_warc(config.root / "warcs" / "big.warc.gz", url, size)
    indexed(config)
    replay = Replay(config)
    try:
        get(replay.content, f"/web/{STAMP}id_/http://media.test/none")
        before = replay.peak_rss()
        path = f"/web/{STAMP}id_/{url}"
        first = get(replay.content, path, Range="bytes=0-0")
        whole = get(replay.content, path)
        grown = replay.peak_rss() - before
    finally:
        replay.stop()
    warc = (config.root / "warcs" / "big.warc.gz").stat().st_size
    return {"warc_bytes": warc, "payload_mib": args.payload_mib,
            "range_0_0": {"status": first[0], "seconds": round(first[2], 3)},
            "whole": {"status": whole[0], "bytes": whole[1], "seconds": round(whole[2], 2)},
            "rss_growth_mib": grown}


def search(work: Path, args: argparse.Namespace) -> dict[str, object]:
    config = config_in(work / "search")
    write_records(config, {SMALL: (b"<title>small</title><p>ordinary</p>", [("Content-Type", "text/html")])})
    indexed(config)
    words = ["river", "museum", "garden", "winter", "quiet", "morning", "island", "forest", "meadow"]
    rnd = random.Random(7)
    documents, captures = {}, []
    for n in range(args.pages):
        key = (f"http://s{n % 97}.test/p{n}", f"sha1:{n:032d}")
        body = " ".join(rnd.choice(words) for _ in range(150)) + " harbour"
        documents[key] = PageText(f"Page {n}", "", body)
        captures.append(IndexedCapture("elsewhere.warc.gz", n, STAMP, key))
    with FtsIndex(config.root / "search" / "fulltext.sqlite") as index:
        index.add(documents, captures)
    replay = Replay(config)
    try:
        get(replay.content, f"/web/{STAMP}/{SMALL}")
        statuses: list[int] = []
        jobs = [threading.Thread(target=lambda: statuses.append(get(replay.app, "/fulltext?q=harbour")[0]))
                for _ in range(args.searches)]
        taken = while_running(jobs, lambda: get(replay.content, f"/web/{STAMP}/{SMALL}")[2])
    finally:
        replay.stop()
    return {"pages": args.pages, "searches": args.searches, "answered": statuses.count(200),
            "busy_503": statuses.count(503), "other_capture": summary(taken)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="stall,payload,search")
    parser.add_argument("--concurrent", type=int, default=1)
    parser.add_argument("--children", action="store_true", help="count the worker processes' RSS too")
    parser.add_argument("--payload-mib", type=int, default=1024)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--searches", type=int, default=100)
    args = parser.parse_args()
    benches = {"stall": stall, "payload": payload, "search": search}
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as name:
        out = {what: benches[what](Path(name), args) for what in args.only.split(",")}
    print(json.dumps({**out, "cpus": os.cpu_count(), "load": os.getloadavg()[0]}, indent=2))


if __name__ == "__main__":
    main()
