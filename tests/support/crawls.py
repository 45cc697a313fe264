"""Helpers shared by the crawl tests: a config for a demo web, and readers of what a crawl wrote."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Protocol

import trio
from warcio.archiveiterator import ArchiveIterator
from warcio.cli import main as warcio_main

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.web.netpolicy import parse_networks
from demoweb import WebSpec, start_demo

# The networks the tests' crawlers and HTTP clients may reach: their servers live on loopback.
LOOPBACK = parse_networks(["127.0.0.0/8", "::1/128"])

FAST = {
    "min_rest": 0.01, "max_rest": 2.0, "rest_factor": 0.0, "retry_delay": 0.2,
    "site_retries": 2, "status_interval": 0.5, "poll_interval": 0.2,
    # Every demo site lives on 127.0.0.1: per-address politeness would crawl them one at a time.
    "connections_per_address": 64,
    "allowed_networks": ["127.0.0.0/8"],
    # Off here, so that tests counting a site's requests see only the pages they serve: the
    # tests of sitemaps (tests/integration/crawl/test_sessions.py) turn them on.
    "sitemaps": False,
}


class HasHosts(Protocol):
    def hosts_file(self) -> str: ...


def write_config(directory: Path, web: HasHosts, *, dns_port: int | None = None,
                 **crawl: object) -> Path:
    """A config for crawling ``web`` into ``directory/archive``.

    Names resolve from a hosts file, or, with ``dns_port``, from the test DNS server on that port
    (no hosts file). An unused loopback port stands in for DNS otherwise, so nothing leaves the host.
    """
    values = {**FAST, **crawl}
    lines = [f"{k} = {v!r}".replace("'", '"').replace("True", "true").replace("False", "false")
             for k, v in values.items()]
    if dns_port is None:
        (directory / "hosts").write_text(web.hosts_file())
        dns = ['hosts_file = "hosts"', 'nameservers = ["127.0.0.1:9"]']
    else:
        dns = ['hosts_file = ""', f'nameservers = ["127.0.0.1:{dns_port}"]', "timeout = 0.5",
               "retry_base = 0.2", "retry_max = 1.0"]
    path = directory / "archiver.toml"
    path.write_text("\n".join([
        '[archive]', 'root = "archive"', '[crawl]', *lines, '[dns]', *dns,
        '[log]', 'level = "debug"', ""]))
    return path


def write_seeds(path: Path, lines: list[str]) -> Path:
    path.write_text("# seeds\n\n" + "\n".join(lines) + "\n")
    return path


def load(path: Path) -> config.Config:
    return config.load(path)


def warc_files(root: Path) -> list[Path]:
    return sorted((root / "warcs").glob("*.warc.gz*"))


def records(root: Path, rec_type: str = "response"):
    """Every record of ``rec_type`` in the archive, with its payload read."""
    for path in warc_files(root):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == rec_type:
                    yield record, record.raw_stream.read()  # as stored: no decoding


def captures(root: Path) -> Counter[str]:
    return Counter(r.rec_headers.get_header("WARC-Target-URI") for r, _ in records(root))


def warcio_check(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    """``warcio check PATHS``, run by warcio's command in this process (no child's start-up): exit
    status 0 if every record reads and its digests match, and what it printed."""
    args = ["check", *map(str, paths)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            warcio_main(args)
            code = 0
        except SystemExit as e:  # how warcio's checker ends, whatever it found
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(["warcio", *args], code, out.getvalue(), "")


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


class Crawled:
    """What one crawl left: the web, the server's request log, the config, the time it took."""

    def __init__(self, tmp_path, spec: WebSpec, **crawl: object) -> None:
        self.tmp_path = tmp_path
        self.spec = spec
        self.crawl = crawl

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self.web, self.server = await start_demo(nursery, self.spec)
            self.config = load(write_config(self.tmp_path, self.web, **self.crawl))
            enqueue_seeds(self.config, 0, [o + "/" for o in self.web.origins()])
            started = time.monotonic()
            await Crawler(self.config, until_idle=True).run()
            self.elapsed = time.monotonic() - started
            nursery.cancel_scope.cancel()
        self.root = self.config.root
