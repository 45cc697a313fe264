"""Revisit benchmark: what a revisit of a changed web costs against a full recrawl.

Crawls a demo web (version 0) into a fresh archive, changes it (version 1: a third of the pages
edited, one page per site removed, one added, the rest unchanged), then visits every site again
(``--recrawl``, as a scheduled revisit does), once per ``crawl.dedupe`` mode: ``off`` (every URL
fetched and stored whole: a full recrawl), ``url`` (conditional requests, unchanged payloads as
revisit records) and ``digest`` (also payloads another URL already has). For the second visit it
reports requests, bytes received, 304 answers, revisit records, WARC bytes written, and the bytes
the crawler counted as saved. Everything runs in this process on 127.0.0.1.

    python -m tools.bench_revisit [--sites 20] [--pages 60]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import trio

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from demoweb import DemoWeb, WebSpec, start_demo
from tools.benchconfig import demo_config


@dataclasses.dataclass
class Visit:
    """What one crawl of the web cost and wrote."""

    requests: int
    received: int
    not_modified: int
    revisits: int
    warc_bytes: int
    saved: int


def warc_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "warcs").glob("*.warc.gz*"))


async def crawl(cfg: config.Config, web: DemoWeb, *, recrawl: bool) -> Visit:
    """Crawl (or recrawl) every site of ``web`` until idle; what it cost."""
    before_warcs = warc_bytes(cfg.root) if (cfg.root / "warcs").exists() else 0
    enqueue_seeds(cfg, 0, [origin + "/" for origin in web.origins()], recrawl=recrawl)
    crawler = Crawler(cfg, until_idle=True)
    await crawler.run()
    stats = crawler.stats
    return Visit(requests=stats.pages, received=stats.bytes,
                 not_modified=stats.not_modified, revisits=stats.revisits,
                 warc_bytes=warc_bytes(cfg.root) - before_warcs, saved=stats.bytes_saved)


async def bench(args: argparse.Namespace) -> None:
    spec = WebSpec(sites=args.sites, pages_per_site=args.pages, port=0, trap=False)
    rows = {}
    async with trio.open_nursery() as nursery:
        web0, server = await start_demo(nursery, spec)
        web1 = DemoWeb(dataclasses.replace(web0.spec, version=1))
        for dedupe in ("off", "url", "digest"):
            work = Path(tempfile.mkdtemp(prefix=f"bench-revisit-{dedupe}-"))
            (work / "hosts").write_text(web0.hosts_file())
            (work / "archiver.toml").write_text(demo_config(dedupe=dedupe))
            cfg = config.load(work / "archiver.toml")
            server.change(web0)
            first = await crawl(cfg, web0, recrawl=False)
            server.change(web1)
            rows[dedupe] = (first, await crawl(cfg, web1, recrawl=True))
        nursery.cancel_scope.cancel()
    first = rows["off"][0]
    print(f"demo web: {args.sites} sites x {args.pages} pages; first visit: {first.requests} requests, "
          f"{first.received / 2**20:.1f} MiB received, {first.warc_bytes / 2**20:.1f} MiB of WARC")
    print("second visit after the web changed:")
    print("| crawl.dedupe | requests | MiB received | 304 answers | revisit records | "
          "MiB of WARC written | MiB counted saved |")
    print("|---|---|---|---|---|---|---|")
    for dedupe, (_, second) in rows.items():
        print(f"| {dedupe} | {second.requests} | {second.received / 2**20:.2f} | "
              f"{second.not_modified} | {second.revisits} | {second.warc_bytes / 2**20:.2f} | "
              f"{second.saved / 2**20:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sites", type=int, default=20)
    parser.add_argument("--pages", type=int, default=60)
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
