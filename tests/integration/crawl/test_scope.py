"""Scope rules in a real crawl of the demo web: the server's request log holds no out-of-scope
request (links, redirect targets, seeds, URLs queued before the rules), the crawl counts what it
skipped, and ``archiver why`` and ``archiver scope test`` name the deciding rule."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

import pytest
import trio

from archiver import cli
from archiver.crawl.crawler import Crawler, SeedError, enqueue_seeds
from archiver.web import urls
from demoweb import WebSpec, start_demo
from tests.support.crawls import load, write_config
from tests.support.repo import ARCHIVER, archiver_here

SPEC = WebSpec(sites=3, pages_per_site=6, port=0, trap=False)


def run_cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = cli.main(list(argv))
    return code, printed.getvalue()


def add_scope(path: Path, include: list[str], exclude: list[str]) -> None:
    with path.open("a") as f:
        f.write(f"[scope]\ninclude = {json.dumps(include)}\nexclude = {json.dumps(exclude)}\n")


async def test_a_crawl_never_requests_a_url_out_of_scope(tmp_path):
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, SPEC)
        a, b, c = web.normal_hosts[:3]
        home_a, home_b, home_c = (web.origin(h) for h in (a, b, c))
        port = urls.origin_parts(home_a)[2]
        path = write_config(tmp_path, web)
        # Queued while no rule applied; the rules below exclude legacy.html afterwards.
        enqueue_seeds(load(path), 0, [home_a + "/", home_b + "/legacy.html"])
        site_a = f"demo,{a.removesuffix('.demo')}:{port})"
        include = [f"domain:{a}", f"host:{b}"]
        exclude = [f"{site_a}/moved/", "re:.*/img/.*", "re:.*/legacy\\.html"]
        add_scope(path, include, exclude)
        config = load(path)
        with pytest.raises(SeedError, match="no seed is in scope"):
            enqueue_seeds(config, 0, [home_c + "/"])
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{home_c}/\n{home_a}/\n")
        # The refused seed is counted as such, not as queued (site a was queued before).
        assert run_cli("seeds", str(seeds), "--config", str(path)) == (
            0, "seeds: 1 queued, 1 refused (see the warnings), 0 sites new to the queues\n")
        crawler = Crawler(config, until_idle=True)
        await crawler.run()
        nursery.cancel_scope.cancel()

    scope = config.scope.rules()
    requested = {urls.normalize(f"http://{entry.host}:{port}{entry.target}") for entry in server.log}
    assert {u for u in requested if not u.endswith("/robots.txt") and not scope.allows(u)} == set()
    assert {urls.origin(u) for u in requested} == {home_a, home_b}  # nothing of site c
    assert home_a + "/old" in requested  # whose redirect to /moved/ is out of scope
    linked = {u for u in web.expected(config.crawl.agent)
              if urls.origin(u) in (home_a, home_b)}
    refused = {u for u in linked if not scope.allows(u)}
    assert home_a + "/moved/" in refused and any("/img/" in u for u in refused)
    assert requested & refused == set()
    assert len(requested & linked) > 10
    assert crawler.stats.skipped["scope"] >= len(refused)

    # archiver why: the rule logged with the decision, or the rules in force.
    def why(url: str) -> dict:
        code, out = run_cli("why", url, "--json", "--config", str(path))
        assert code == 1
        return json.loads(out)

    moved = why(home_a + "/moved/")
    assert moved["kind"] == "scope" and moved["decision"]["kind"] == "scope"
    assert f"rule {site_a}/moved/" in moved["reason"] and home_a + "/old" in moved["reason"]
    legacy = why(home_b + "/legacy.html")
    assert legacy["kind"] == "scope" and "queued before the rule" in legacy["reason"]
    other = why(home_c + "/")
    assert other["kind"] == "scope" and other["scope_rule"] is None

    # archiver scope test: exit status 0 in, 1 out, 2 for a bad URL.
    assert run_cli("scope", "test", home_a + "/", "--config", str(path)) == (
        0, f"in\t{home_a}/\tdomain:{a}\n")
    code, out = run_cli("scope", "test", home_a + "/img/logo.png", "--json", "--config", str(path))
    assert code == 1
    assert json.loads(out) == {"url": home_a + "/img/logo.png", "decision": "out",
                               "rule": "re:.*/img/.*"}
    done = subprocess.run([*ARCHIVER, "scope", "test", home_c + "/x", "--json", "--config",
                           str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"url": home_c + "/x", "decision": "out", "rule": None}
    assert run_cli("scope", "test", "http://example.org:99999/", "--config", str(path))[0] == 2


def test_a_broken_rule_stops_the_verb_with_the_rule_named(tmp_path):
    path = tmp_path / "archiver.toml"
    path.write_text('[scope]\nexclude = ["re:(unclosed"]\n')
    done = archiver_here("scope", "test", "http://example.org/", "--config", str(path))
    assert done.returncode == 2
    assert "scope.exclude: scope rule 're:(unclosed': bad regular expression" in done.stderr.decode()
