"""pywb replays an exported WACZ: a host of the demo web crawled at two dates, exported from the
second crawl's start (``archiver export --host --from -o FILE.wacz``), checked by ``wacz
validate``, loaded into a pywb collection by ``wb-manager add --unpack-wacz`` (pywb then reads the
package's own CDXJ index), and replayed by pywb's ``wayback`` on 127.0.0.1.

pywb runs from its own virtualenv, ``.pywb/venv``, which ``tools/install_pywb.sh`` (part of the
README's test command) installs.

Identical-payload-digest revisits (a 200 with an unchanged payload) are exported as stored and
pywb replays them with their originals' bodies. A server-not-modified revisit (the 304 our
crawler stores when a page answers its conditional request unchanged) pywb would replay as that
304, with no body: the export writes it whole, as a response made from its original, and the
tests here check that record (valid, its digests right, saying what it was made from), that
pywb replays it as the page at the revisit's date, and that ``archiver import`` of the package's
WARC into a fresh archive replays the same bodies."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trio
from warcio.archiveiterator import ArchiveIterator

from archiver.config import Config, load
from archiver.store.models import Capture
from archiver.store.warcindex import Stored, index_warc, read_record
from archiver.web.http import decode_body
from archiver.web.timestamps import from_datetime, parse_date
from demoweb import WebSpec
from tests.support.rawhttp import get
from tests.support.replayarchive import TwoDates, serving, two_date_archive
from tests.support.repo import ROOT, archiver_here

PYWB = ROOT / ".pywb" / "venv" / "bin"
COLLECTION = "exported"
SPEC = WebSpec(sites=1, pages_per_site=4, port=0, trap=False)
STARTUP = 60.0  # seconds pywb may take to answer its first request


@dataclass
class Exported:
    """The WACZ of the slice and what it holds, read from the package itself."""

    two: TwoDates
    host: str  # the slice's host
    since: str  # the slice's --from: the second crawl's first timestamp
    wacz: Path
    warcs: Path  # the package's WARC files, unpacked
    captures: list[Capture]  # their response and revisit records


@dataclass
class Wayback:
    """pywb's wayback, serving the collection that holds the WACZ."""

    port: int

    def get(self, timestamp: str, mode: str, url: str) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body of ``/<collection>/<timestamp><mode>/<url>``, no redirect
        followed. The request accepts gzip: pywb undoes an archived Content-Encoding for a
        client that does not."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("GET", f"/{COLLECTION}/{timestamp}{mode}/{url}",
                               headers={"Accept-Encoding": "gzip"})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Exported:
    directory = tmp_path_factory.mktemp("pywb")
    two = trio.run(two_date_archive, directory, SPEC)
    since = min(c.timestamp for c in two.second)
    wacz = directory / "slice.wacz"
    host = urlsplit(two.web0.origin(two.web0.normal_hosts[0])).netloc
    done = archiver_here("export", "--host", host, "--from", since, "-o", str(wacz),
                         "--config", str(two.config.path))
    assert done.returncode == 0, done.stderr.decode()
    warcs = directory / "unpacked"
    with zipfile.ZipFile(wacz) as package:
        names = [n for n in package.namelist() if n.startswith("archive/")]
        package.extractall(warcs, names)
    warcs = warcs / "archive"
    captures = [c for name in names for c in index_warc(warcs / Path(name).name)]
    return Exported(two, host, since, wacz, warcs, captures)


@pytest.fixture(scope="module")
def wayback(exported: Exported, tmp_path_factory) -> Iterator[Wayback]:
    if not list(PYWB.parent.glob("installed-pywb-*")):  # written once the install is complete
        pytest.fail(f"pywb is not installed in {PYWB.parent}: run `bash tools/install_pywb.sh` "
                    "(part of the README's test command)")
    home = tmp_path_factory.mktemp("wayback")
    for step in (["init", COLLECTION], ["add", "--unpack-wacz", COLLECTION, str(exported.wacz)]):
        done = subprocess.run([str(PYWB / "wb-manager"), *step], cwd=home, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, f"wb-manager {step[0]}: {done.stderr}"
    with socket.socket() as probe:  # a free port for wayback, which cannot be told to pick one
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (home / "wayback.log").open("wb")
    process = subprocess.Popen([str(PYWB / "wayback"), "-d", str(home), "-b", "127.0.0.1",
                                "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(process, port, home / "wayback.log")
        yield Wayback(port)
    finally:
        process.kill()
        process.wait(timeout=30)
        log.close()


def _wait_for(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Until ``port`` accepts a connection; a failure if the process exits or STARTUP passes."""
    deadline = time.monotonic() + STARTUP
    while True:
        if process.poll() is not None:
            pytest.fail(f"wayback exited ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"wayback did not listen on {port} in {STARTUP:.0f} s: "
                            f"{log.read_text()[-2000:]}")
            time.sleep(0.05)  # the next look at the port; no outcome rests on it


def _stored(exported: Exported, capture: Capture) -> Stored:
    return read_record(exported.warcs, capture.filename, capture.offset, capture.length)


def _title(stored: Stored) -> bytes:
    encoding = re.search(rb"(?im)^content-encoding:[ \t]*(.*?)\r?$", stored.http_head)
    body = decode_body(stored.payload, encoding and encoding[1].decode("latin-1"), 2**24)
    title = re.search(rb"(?is)<title>([^<]+)</title>", body)
    assert title, f"{stored.url}: the demo web's pages have a <title>"
    return title[1].strip()


def _memento(headers: dict[str, str]) -> str:
    """The 14-digit timestamp of a reply's Memento-Datetime."""
    return from_datetime(parsedate_to_datetime(headers["Memento-Datetime"]))


def _refers_to(stored: Stored) -> tuple[str, str]:
    headers = dict(stored.warc_headers)
    return headers["WARC-Refers-To-Target-URI"], parse_date(headers["WARC-Refers-To-Date"])


def test_the_wacz_passes_wacz_validate(exported: Exported):
    wacz = Path(sys.executable).parent / "wacz"
    checked = subprocess.run([str(wacz), "validate", "-f", str(exported.wacz)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "the passed WACZ is valid" in checked.stdout


def test_each_html_page_replays_byte_for_byte_and_rewritten(exported: Exported, wayback: Wayback):
    pages = [c for c in exported.captures
             if c.rectype == "response" and c.status == 200 and c.mime == "text/html"]
    assert len(pages) >= 10
    converted = {(c.url, c.timestamp) for c in _not_modified(exported) if c.url.endswith(".html")}
    assert converted <= {(c.url, c.timestamp) for c in pages}, "304 revisits, written whole"
    for page in pages:
        stored = _stored(exported, page)
        status, headers, body = wayback.get(page.timestamp, "id_", page.url)
        assert (status, body) == (200, stored.payload), f"id_ {page.timestamp} {page.url}"
        assert _memento(headers) == page.timestamp
        status, _, rewritten = wayback.get(page.timestamp, "mp_", page.url)
        assert status == 200 and _title(stored) in rewritten, f"mp_ {page.timestamp} {page.url}"


def test_a_revisit_replays_with_its_original_from_before_the_slice(exported: Exported,
                                                                   wayback: Wayback):
    revisits = [c for c in exported.captures if c.rectype == "revisit" and c.status == 200]
    assert revisits, "the second crawl stored unchanged stylesheets and scripts as revisits"
    responses = {(c.url, c.timestamp): c for c in exported.captures if c.rectype == "response"}
    for revisit in revisits:
        refers_to = _refers_to(_stored(exported, revisit))
        assert refers_to in responses, f"the original of {revisit.url} is in the package"
        original = responses[refers_to]
        assert original.timestamp < exported.since <= revisit.timestamp
        status, headers, body = wayback.get(revisit.timestamp, "id_", revisit.url)
        assert (status, body) == (200, _stored(exported, original).payload), revisit.url
        assert _memento(headers) == revisit.timestamp


def test_an_archived_url_outside_the_slice_is_not_found(exported: Exported, wayback: Wayback):
    inside = {c.url for c in exported.captures}
    outside = [c for c in exported.two.first + exported.two.second if c.url not in inside]
    assert outside, "the demo web's other hosts were crawled too"
    for capture in outside:
        status, _, _ = wayback.get(capture.timestamp, "id_", capture.url)
        assert status == 404, capture.url
    # ... while a page of the slice answers at that moment (pywb picks its closest capture).
    page = next(c for c in exported.captures if c.rectype == "response" and c.status == 200)
    status, _, _ = wayback.get(outside[0].timestamp, "id_", page.url)
    assert status == 200


def _not_modified(exported: Exported) -> list[Capture]:
    """The slice's server-not-modified revisits, as the source archive's catalog lists them."""
    found = [c for c in exported.two.second if c.rectype == "revisit" and c.status == 304
             and urlsplit(c.url).netloc == exported.host and c.timestamp >= exported.since]
    assert any(c.url.endswith(".html") for c in found), "unchanged pages answered 304"
    return found


def _source(exported: Exported, capture: Capture) -> Stored:
    """A record of the source archive."""
    return read_record(exported.two.root / "warcs", capture.filename, capture.offset, capture.length)


def _source_original(exported: Exported, revisit: Capture) -> Capture:
    """The response of the source archive a revisit of it stands for."""
    url, date = _refers_to(_source(exported, revisit))
    return next(c for c in exported.two.first + exported.two.second if c.rectype == "response"
                and (c.url, c.timestamp, c.digest) == (url, date, revisit.digest))


def test_a_server_not_modified_revisit_replays_as_its_original_at_its_own_date(exported: Exported,
                                                                               wayback: Wayback):
    for revisit in _not_modified(exported):
        original = _source(exported, _source_original(exported, revisit))
        status, headers, body = wayback.get(revisit.timestamp, "id_", revisit.url)
        assert (status, body) == (200, original.payload), revisit.url
        assert _memento(headers) == revisit.timestamp
    # The package's older responses are only those its identical-payload revisits stand for.
    kept = {_refers_to(_stored(exported, c)) for c in exported.captures if c.rectype == "revisit"}
    older = {(c.url, c.timestamp) for c in exported.captures if c.timestamp < exported.since}
    assert older == kept


def test_a_converted_revisit_is_a_valid_response_that_says_what_it_was_made_from(exported: Exported):
    warcio = Path(sys.executable).parent / "warcio"
    files = sorted(str(p) for p in exported.warcs.iterdir())
    checked = subprocess.run([str(warcio), "check", "-v", *files], capture_output=True, text=True,
                             timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "digest pass" in checked.stdout  # block and payload digests recomputed
    package = {(c.url, c.timestamp): c for c in exported.captures}
    for revisit in _not_modified(exported):
        made = package[(revisit.url, revisit.timestamp)]
        assert (made.rectype, made.status) == ("response", 200), revisit.url
        stored, fields = _stored(exported, made), dict(_stored(exported, made).warc_headers)
        of_revisit = dict(_source(exported, revisit).warc_headers)
        source_original = _source(exported, _source_original(exported, revisit))
        of_original = dict(source_original.warc_headers)
        assert fields["Archiver-Converted-From"] == of_revisit["WARC-Record-ID"]
        assert fields["Archiver-Original-Record-ID"] == of_original["WARC-Record-ID"]
        assert fields["Archiver-Original-Target-URI"] == of_original["WARC-Target-URI"]
        assert fields["Archiver-Original-Date"] == of_original["WARC-Date"]
        assert fields["WARC-Record-ID"] not in (of_revisit["WARC-Record-ID"],
                                                of_original["WARC-Record-ID"])
        for name in ("WARC-Date", "WARC-Target-URI", "WARC-IP-Address"):
            assert fields[name] == of_revisit[name], name
        assert fields["WARC-Payload-Digest"] == revisit.digest
        assert not {n for n in fields if n.startswith("WARC-Refers-To") or n == "WARC-Profile"}
        assert (stored.http_head, stored.payload) == (source_original.http_head,
                                                      source_original.payload)
    with open(files[0], "rb") as first:
        info = next(iter(ArchiveIterator(first)))
        description = info.content_stream().read().decode()
    assert info.rec_type == "warcinfo"
    assert f"{len(_not_modified(exported))} server-not-modified revisits" in description
    assert "Archiver-Converted-From" in description


def test_the_index_and_the_pages_list_show_the_slices_own_pages_at_their_dates(exported: Exported):
    with zipfile.ZipFile(exported.wacz) as package:
        index = gzip.decompress(package.read("indexes/index.cdx.gz")).decode().splitlines()
        pages = [json.loads(line) for line in package.read("pages/pages.jsonl").splitlines()[1:]]
    indexed = {}
    for line in index:
        _, timestamp, fields = line.split(" ", 2)
        entry = json.loads(fields)
        indexed[(entry["url"], timestamp)] = entry
    for revisit in _not_modified(exported):  # py-wacz indexed the records written whole
        entry = indexed[(revisit.url, revisit.timestamp)]
        assert (entry["status"], entry["digest"]) == ("200", revisit.digest), revisit.url
        assert entry["mime"] != "warc/revisit"
    held = {(c.url, c.timestamp): c for c in exported.captures}

    def replays_as_page(capture: Capture) -> bool:
        shown = held[_refers_to(_stored(exported, capture))] if capture.rectype == "revisit" else capture
        return capture.status == 200 and shown.mime == "text/html"

    own = {(c.url, c.timestamp) for c in exported.captures
           if c.timestamp >= exported.since and replays_as_page(c)}
    listed = {(page["url"], parse_date(page["ts"])) for page in pages}
    assert listed == own
    assert {(c.url, c.timestamp) for c in _not_modified(exported) if c.url.endswith(".html")} <= listed


async def _replayed(config: Config, captures: list[Capture]) -> list[tuple[int, bytes]]:
    """Status and body of each capture's identity replay by archiver over ``config``."""
    async with serving(config) as running:
        return [(status, body) for status, _, body in
                [await get(running.content_at, f"/web/{c.timestamp}id_/{c.url}") for c in captures]]


def test_the_packaged_warc_imported_into_a_fresh_archive_replays_the_same_bodies(
        exported: Exported, tmp_path):
    config_path = tmp_path / "fresh.toml"
    config_path.write_text(f'[archive]\nroot = "{tmp_path / "fresh"}"\n')
    files = sorted(str(p) for p in exported.warcs.iterdir())
    done = archiver_here("import", *files, "--config", str(config_path))
    assert done.returncode == 0, done.stderr.decode()
    revisits = [c for c in exported.two.second if c.rectype == "revisit"
                and urlsplit(c.url).netloc == exported.host and c.timestamp >= exported.since]
    assert {200, 304} <= {c.status for c in revisits}, "revisits of both profiles"
    # A server-not-modified revisit replays as its original, an identical-payload one with its
    # own status and the original's body.
    originals = [_source_original(exported, c) for c in revisits]
    expected = [(original.status if revisit.status == 304 else revisit.status,
                 _source(exported, original).payload)
                for revisit, original in zip(revisits, originals, strict=True)]
    assert trio.run(_replayed, load(config_path), revisits) == expected
