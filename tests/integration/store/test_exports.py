"""``archiver export``: a slice of an archive crawled at two dates (its second crawl full of
revisit records) as a WARC file whose revisits carry their originals, byte for byte, that another
archive imports and replays on its own; and as a WACZ package that ``wacz validate`` accepts."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from archiver.config import Config, load
from archiver.store.catalog_maintenance import WarcFiles
from archiver.store.embedded.catalog import Catalog
from archiver.stores import EmbeddedStores
from tests.support.rawhttp import get
from tests.support.replayarchive import TwoDates, copy_of, serving
from tests.support.repo import ARCHIVER, archiver_here


@pytest.fixture(scope="module")
def two(two_dates_crawled: TwoDates, tmp_path_factory) -> TwoDates:
    return copy_of(two_dates_crawled, tmp_path_factory.mktemp("export"))


def archiver(config: Config | Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = config.path if isinstance(config, Config) else config
    return subprocess.run([*ARCHIVER, *args, "--config", str(path)], capture_output=True,
                          text=True, timeout=120, check=False)


def here(config: Config | Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The verb run in this process (``archiver_here``): the same code without a child's start-up."""
    return archiver_here(*args, "--config", str(config.path if isinstance(config, Config) else config))


def records(path: Path) -> list[tuple[str, dict[str, str], int, int]]:
    """(type, WARC headers, offset, length) of every record of a WARC file."""
    out = []
    with path.open("rb") as f:
        it = ArchiveIterator(f)
        for record in it:
            headers = dict(record.rec_headers.headers)
            it.read_to_end(record)
            out.append((record.rec_type, headers, it.get_record_offset(), it.get_record_length()))
    return out


def stamp(date: str) -> str:
    """The 14-digit timestamp of a WARC-Date."""
    return "".join(ch for ch in date if ch.isdigit())[:14]


def test_a_host_without_its_port_is_every_capture_of_the_host(two: TwoDates, tmp_path):
    """The demo web runs on a port of its own: --host with the name alone finds its captures,
    as --host name:port does."""
    netloc = urlsplit(two.second[0].url).netloc
    name = netloc.partition(":")[0]
    assert name != netloc
    slices = {}
    for host in (netloc, name):
        out = tmp_path / f"{host.replace(':', '_')}.warc.gz"
        done = archiver(two.config, "export", "--host", host, "-o", str(out))
        assert done.returncode == 0, done.stderr
        slices[host] = sorted((h["WARC-Target-URI"], h["WARC-Date"]) for kind, h, _, _ in records(out)
                              if kind != "warcinfo")
    assert slices[name] == slices[netloc] and slices[name]


def test_a_host_since_a_date_carries_the_originals_of_its_revisits(two: TwoDates, tmp_path):
    host = urlsplit(two.second[0].url).netloc
    since = min(c.timestamp for c in two.second)
    out = tmp_path / "slice.warc.gz"
    done = archiver(two.config, "export", "--host", host, "--from", since, "-o", str(out))
    assert done.returncode == 0, done.stderr
    chosen = [c for c in two.second if urlsplit(c.url).netloc == host]
    revisits = [c for c in chosen if c.rectype == "revisit"]
    assert revisits, "the second crawl stored unchanged pages as revisits"
    written = records(out)
    assert written[0][0] == "warcinfo"
    assert f"{len(chosen)} captures" in done.stdout
    # Every revisit's original response is in the file; so are the slice's own captures.
    responses = {(h["WARC-Target-URI"], stamp(h["WARC-Date"]), h.get("WARC-Payload-Digest"))
                 for kind, h, _, _ in written if kind == "response"}
    for kind, headers, _, _ in written:
        if kind == "revisit":
            original = (headers["WARC-Refers-To-Target-URI"],
                        stamp(headers["WARC-Refers-To-Date"]), headers["WARC-Payload-Digest"])
            assert original in responses, original
    assert len(written) - 1 == len(chosen) + int(done.stdout.split(" and ")[1].split()[0])
    not_modified = sum((c.rectype, c.status) == ("revisit", 304) for c in chosen)
    assert not_modified, "the second crawl had 304 answers"
    converted = re.search(r"(\d+) server-not-modified revisits? written whole", done.stdout)
    assert converted is not None and int(converted[1]) == not_modified
    # Byte for byte: each record is the store's, digests and record ids untouched, but for the
    # server-not-modified revisits, written whole (tests/integration/store/test_exports_pywb.py).
    warcs = WarcFiles(two.root / "warcs")
    stored = {(c.url, c.timestamp): c for c in chosen if (c.rectype, c.status) != ("revisit", 304)}
    data = out.read_bytes()
    compared = 0
    for _, headers, offset, length in written[1:]:
        capture = stored.get((headers["WARC-Target-URI"], stamp(headers["WARC-Date"])))
        if capture is not None:
            compared += 1
            assert data[offset:offset + length] == warcs.raw(capture.filename, capture.offset,
                                                             capture.length)
    assert compared == len(stored)


async def test_the_slice_replays_on_its_own_once_imported_elsewhere(two: TwoDates, tmp_path):
    page = next(c for c in two.second if c.rectype == "revisit" and c.url.endswith(".html"))
    out = tmp_path / "one.warc.gz"
    # In this process (the first test runs `archiver export` as a child, test_imports `import`).
    done = here(two.config, "export", "--url", page.url, "-o", str(out))
    assert done.returncode == 0, done.stderr
    config_path = tmp_path / "elsewhere.toml"
    config_path.write_text(f'[archive]\nroot = "{tmp_path / "elsewhere"}"\n')
    imported = here(config_path, "import", str(out))
    assert imported.returncode == 0, imported.stderr
    elsewhere = load(config_path)
    with contextlib.closing(EmbeddedStores(elsewhere).catalog(readonly=True)) as catalog:
        assert {c.timestamp for c in catalog.captures(page.url)} >= {page.timestamp}
    with Catalog(two.root / "catalog", two.config.catalog.shards, readonly=True) as source:
        original = [c for c in source.captures(page.url, to=page.timestamp)
                    if c.rectype == "response" and c.digest == page.digest][-1]
    body = WarcFiles(two.root / "warcs").read(original.filename, original.offset,
                                              original.length).payload
    async with serving(elsewhere) as running:
        status, _, got = await get(running.content_at, f"/web/{page.timestamp}id_/{page.url}")
    assert (status, got) == (200, body)


def test_a_wacz_package_passes_wacz_validate(two: TwoDates, tmp_path):
    site = two.web0.origin(two.web0.normal_hosts[0])
    out = tmp_path / "site.wacz"
    # A child: importing py-wacz adds warcinfo to cdxj_indexer's default records for the whole
    # process (test_catalog_crawl compares with cdxj_indexer's defaults).
    done = archiver(two.config, "export", "--prefix", site + "/", "-o", str(out))
    assert done.returncode == 0, done.stderr
    names = zipfile.ZipFile(out).namelist()
    assert {"datapackage.json", "datapackage-digest.json", "pages/pages.jsonl"} <= set(names)
    assert any(n.startswith("archive/") and n.endswith(".warc.gz") for n in names)
    assert any(n.startswith("indexes/") for n in names)
    wacz = Path(sys.executable).parent / "wacz"
    checked = subprocess.run([str(wacz), "validate", "-f", str(out)], capture_output=True,
                             text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "the passed WACZ is valid" in checked.stdout
    pages = zipfile.ZipFile(out).read("pages/pages.jsonl").decode().splitlines()
    assert json.loads(pages[1])["url"].startswith(site + "/") and len(pages) > 5
    assert done.stdout.startswith(f"{out}: ")  # py-wacz's own lines go to stderr


def test_nothing_matching_writes_nothing(two: TwoDates, tmp_path):
    """Run in this process (``archiver_here``): the other tests run the verb as a child."""
    out = tmp_path / "none.warc.gz"
    config = str(two.config.path)
    done = archiver_here("export", "--url", "http://nowhere.example/", "-o", str(out), "--config", config)
    assert done.returncode == 2 and b"no capture matches" in done.stderr
    assert not out.exists() and not list(tmp_path.iterdir())
    bad = archiver_here("export", "--host", "x.example", "--from", "yesterday", "-o", str(out),
                        "--config", config)
    assert bad.returncode == 2 and not out.exists()
