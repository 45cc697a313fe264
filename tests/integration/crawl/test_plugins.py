"""Plugins in a real crawl of the demo web, from a test package installed through its entry points
(tests/support/plugins.py): the URLs its should_visit refuses are never requested and ``archiver
why`` names the plugin; its labels are in a WARC metadata record after each response, in the
catalog, in ``/cdx`` (a real replay server) and again after a catalog rebuild; its site priority
goes with each link spooled; a plugin whose
every hook raises on one site is logged once, disabled on that site only, and the crawl captures
everything."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from urllib.parse import quote

import trio
from warcio.archiveiterator import ArchiveIterator

from archiver import cli
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.queues.spool import parse_line
from archiver.store.embedded.catalog import Catalog
from archiver.web import urls
from demoweb import WebSpec, start_demo
from tests.support import plugins as test_plugins
from tests.support.crawls import captures, load, warc_files, write_config
from tests.support.rawhttp import get
from tests.support.replayarchive import serving

SPEC = WebSpec(sites=2, pages_per_site=4, port=0, trap=False)
AGENT = "archiver"


def run_cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        code = cli.main(list(argv))
    return code, printed.getvalue()


def labels_in_warcs(root) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """(labels by response URL, from the metadata records; the URL of each response record id),
    checking that each labels record follows the record it refers to in the same file."""
    labels: dict[str, dict[str, str]] = {}
    responses: dict[str, str] = {}
    for path in warc_files(root):
        seen: set[str] = set()
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                headers = record.rec_headers
                if record.rec_type == "response":
                    responses[headers.get_header("WARC-Record-ID")] = headers.get_header("WARC-Target-URI")
                    seen.add(headers.get_header("WARC-Record-ID"))
                elif record.rec_type == "metadata":
                    refers_to = headers.get_header("WARC-Refers-To")
                    assert refers_to in seen  # after its response, in the same bundle
                    assert headers.get_header("Content-Type") == "application/json"
                    assert headers.get_header("WARC-Target-URI") == responses[refers_to]
                    labels[responses[refers_to]] = json.loads(record.content_stream().read())["labels"]
    return labels, responses


async def test_plugins_steer_and_label_a_crawl_and_a_raising_one_is_isolated(tmp_path, monkeypatch,
                                                                              caplog):
    monkeypatch.syspath_prepend(str(test_plugins.install(tmp_path / "site-packages")))
    async with trio.open_nursery() as nursery:
        web, server = await start_demo(nursery, SPEC)
        good, bad = (web.origin(host) for host in web.normal_hosts[:2])
        path = write_config(tmp_path, web)
        with path.open("a") as f:
            f.write(f'[plugins]\nenable = ["broken", "labeller"]\n[plugins.labeller]\n'
                    f'refuse = "/img/"\npriority = 2.5\n[plugins.broken]\nsite = "{bad}"\n')
        config = load(path)
        enqueue_seeds(config, 0, [good + "/", bad + "/"])
        crawler = Crawler(config, until_idle=True)
        with caplog.at_level(logging.WARNING, logger="archiver.crawl.plugins"):
            await crawler.run()
        nursery.cancel_scope.cancel()

    # should_visit: no /img/ URL requested; everything else captured; `why` names the plugin.
    port = urls.origin_parts(good)[2]
    requested = {urls.normalize(f"http://{e.host}:{port}{e.target}") for e in server.log}
    expected = {u for u in web.expected(AGENT) if urls.origin(u) in (good, bad)}
    refused = {u for u in expected if "/img/" in u}
    assert refused and not requested & refused
    assert set(captures(config.root)) == expected - refused
    assert crawler.stats.skipped["plugin"] >= len(refused)
    code, out = run_cli("why", sorted(refused)[0], "--json", "--config", str(path))
    answer = json.loads(out)
    assert code == 1 and answer["kind"] == "plugin" and "by plugin labeller" in answer["reason"]

    # The raising plugin: one log line, for its site; disabled there only.
    failures = [r.fields for r in caplog.records if r.getMessage() == "plugin-failed"]
    assert [(f["plugin"], f["site"], f["hook"]) for f in failures] == [("broken", bad, "should_visit")]
    assert "broken on purpose" in failures[0]["error"]
    assert crawler.stats.errors["plugin"] == 1

    # Labels: a metadata record after every response, the same in the catalog.
    labels, responses = labels_in_warcs(config.root)
    assert set(labels) == set(responses.values())
    for url, given in labels.items():
        assert given["status"].isdigit() and given["kind"] in ("page", "file")
        assert given.get("checked") == ("yes" if urls.origin(url) == good else None), url
    pages = {url for url, given in labels.items() if given["kind"] == "page"}
    assert good + "/" in pages and bad + "/" in pages

    def catalogued() -> dict[tuple[str, str], dict[str, str]]:
        with Catalog(config.root / "catalog", config.catalog.shards, readonly=True) as catalog:
            return {(c.url, c.timestamp): c.label_map for origin in (good, bad)
                    for c in catalog.list(origin + "/", "host") if c.rectype == "response"}

    before = catalogued()
    assert {url: given for (url, _), given in before.items()} == labels

    # /cdx over HTTP: filter on a label, labels in JSON output.
    async with serving(config) as replay:
        async def cdx(query: str) -> list[dict[str, str]]:
            status, _, body = await get(replay.app_at, "/cdx?" + query)
            assert status == 200, body
            return [json.loads(line) for line in body.decode().splitlines()]

        for origin in (good, bad):
            host = quote(origin + "/", safe="")
            found = await cdx(f"url={host}&matchType=host&filter==label.kind:page&output=json")
            assert {row["url"] for row in found} == {u for u in pages if urls.origin(u) == origin}
            assert all(row["label.kind"] == "page" and row["mime"] == "text/html" for row in found)
            checked = await cdx(f"url={host}&matchType=host&filter==label.checked:yes&output=json"
                                "&fl=url,label.checked")
            own = {u for u in labels if urls.origin(u) == origin}
            assert {row["url"] for row in checked} == (own if origin == good else set())

    # site_priority: each external link spooled with the highest priority given, from the
    # labels of the page that links it.
    spooled = [parse_line(line) for spool in (config.root / "spool").glob("*.tsv")
               for line in spool.read_text().splitlines()]
    assert spooled and {(line.source, line.priority) for line in spooled} <= {(good, 2.5), (bad, 2.5)}

    # The catalog rebuilt from the WARC files alone has the same labels.
    assert run_cli("catalog", "reindex", "--config", str(path))[0] == 0
    assert catalogued() == before


def test_a_plugin_that_is_not_installed_stops_the_crawler_at_start(tmp_path, capsys):
    path = tmp_path / "archiver.toml"
    path.write_text('[archive]\nroot = "archive"\n[plugins]\nenable = ["nosuch"]\n')
    assert cli.main(["crawl", "run", "--config", str(path), "--until-idle"]) == 2
    assert "plugins.enable: no installed plugin 'nosuch'" in capsys.readouterr().err
