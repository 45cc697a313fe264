"""Focused-crawl benchmark: the harvest rate of a crawl with ``crawl.focus`` and without.

A topical demo web (``WebSpec.topical``: a third of the sites about astronomy, the others about
cooking, astronomy sites linked mostly from astronomy pages) is crawled twice from the same seeds (sites 0
and 1: one cooking, one astronomy), once unfocused and once with a relevance model trained on
example documents
that are not the web's pages (``demoweb.examples``). The harvest rate is the share of relevant
pages (ground truth: ``DemoWeb.page_topic``, not the model's opinion) among the first N pages
the server answered. Both crawls run the same way: one crawler process with a few site slots,
and the links batch run again and again beside it, as in production, so that the site queue
holds a choice of sites and its order matters.

    python -m tools.bench_focus [--sites 40] [--pages 6] [--first 120] [--slots 2] [--rest 0.05]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from archiver import config
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.crawl.focustrain import read_examples, train
from archiver.links.batch import LinkBatch
from archiver.web.relevance import model_bytes
from demoweb import DemoWeb, WebSpec, start_demo
from demoweb.examples import write_examples
from demoweb.model import RELEVANT_TOPIC
from tests.support.crawls import write_config

# Quick group commits and spool rotation, so that the batch sees links within a fraction of a
# second; a small links bitmap (the web is small).
_QUICK = (
    "\n[warc]\nsync_interval = 0.1\n[spool]\nmax_age = 0.1\n"
    "[links]\nexpected_urls = 100000\ncheckpoint_urls = 100000\n"
)
_LIMIT = 120.0  # seconds: a run that takes longer has gone wrong


@dataclass(frozen=True)
class Harvest:
    """One crawl's first pages (URLs in the order the server answered them) and their truth."""

    focused: bool
    pages: list[str]
    relevant: int
    seconds: float
    root: Path  # the crawl's archive

    @property
    def rate(self) -> float:
        return self.relevant / len(self.pages)


def train_model(work: Path, examples: int = 20) -> Path:
    """A relevance model trained on example documents written for the topical web."""
    trained = train(read_examples(write_examples(work / "examples", count=examples)))
    path = work / "topic.model"
    path.write_bytes(model_bytes(trained.model))
    return path


async def harvest(work: Path, spec: WebSpec, first: int, *, model: Path | None,
                  slots: int = 2, rest: float = 0.05) -> Harvest:
    """Crawl ``spec``'s web from its seed until the server has answered ``first`` pages."""
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, spec)
        path = write_config(work, web, sites_per_process=slots, status_interval=0.1, min_rest=rest,
                            poll_interval=0.05, focus=str(model) if model else "")
        path.write_text(path.read_text() + _QUICK)
        cfg = config.load(path)
        enqueue_seeds(cfg, 0, seeds(web))
        crawler = Crawler(cfg)
        nursery.start_soon(crawler.run)
        with LinkBatch(cfg) as batch:
            while len(_pages(web, server.log)) < first:
                if time.monotonic() - started > _LIMIT:
                    raise RuntimeError(f"{len(_pages(web, server.log))} pages after {_LIMIT} s")
                await trio.to_thread.run_sync(lambda: batch.run(once=True))
                await trio.sleep(0.02)
        crawler.service.stop("enough pages")
        seconds = time.monotonic() - started
        pages = _pages(web, server.log)[:first]
        nursery.cancel_scope.cancel()
    relevant = sum(web.page_topic(url) == RELEVANT_TOPIC for url in pages)
    return Harvest(model is not None, pages, relevant, seconds, cfg.root)


def seeds(web: DemoWeb) -> list[str]:
    """The seeds of both crawls: the first two sites, one on each topic."""
    return [web.origin(host) + "/" for host in web.normal_hosts[:2]]


def _pages(web: DemoWeb, log: list) -> list[str]:
    """The numbered pages the server answered, in order (a URL once)."""
    port = f":{web.spec.port}" if web.spec.port != 80 else ""
    seen: dict[str, None] = {}
    for request in sorted(log, key=lambda r: r.start):
        url = f"http://{request.host}{port}{request.target}"
        if request.status == 200 and web.page_topic(url) is not None:
            seen.setdefault(url)
    return list(seen)


async def compare(work: Path, spec: WebSpec, first: int, slots: int, rest: float
                  ) -> tuple[Harvest, Harvest]:
    """The unfocused and the focused harvest of the same web from the same seeds."""
    model = train_model(work)
    unfocused = await harvest(work / "unfocused", spec, first, model=None, slots=slots, rest=rest)
    focused = await harvest(work / "focused", spec, first, model=model, slots=slots, rest=rest)
    return unfocused, focused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_focus", description=__doc__)
    parser.add_argument("--sites", type=int, default=40)
    parser.add_argument("--pages", type=int, default=6, help="pages per site")
    parser.add_argument("--first", type=int, default=120, help="N: the pages the rate counts")
    parser.add_argument("--slots", type=int, default=2, help="crawl.sites_per_process")
    parser.add_argument("--rest", type=float, default=0.05, help="crawl.min_rest, seconds")
    args = parser.parse_args(argv)
    spec = WebSpec(sites=args.sites, pages_per_site=args.pages, port=0, trap=False, topical=True)
    with tempfile.TemporaryDirectory() as work:
        unfocused, focused = trio.run(compare, Path(work), spec, args.first, args.slots,
                                       args.rest)
    print(f"topical demo web: {args.sites} sites x {args.pages} pages, a third on {RELEVANT_TOPIC}; "
          f"seeds site-0 and site-1 (one of each topic); {args.slots} site slots, "
          f"{args.rest} s rests")
    for run in (unfocused, focused):
        name = "focused" if run.focused else "unfocused"
        print(f"{name:>9}: harvest rate {run.rate:.2f} ({run.relevant} relevant of the first "
              f"{len(run.pages)} pages), {run.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
