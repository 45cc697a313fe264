"""``archiver import``: WARC files written by other tools (wget against the demo web, warcio
directly) checked whole, stored in the WARC store of either mode, catalogued and replayed; a
truncated or non-WARC file refused with nothing changed."""

from __future__ import annotations

import contextlib
import gzip
import io
import subprocess
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.config import load
from archiver.store.catalog import Catalog
from archiver.store.catalog_maintenance import WarcFiles
from archiver.store.imports import ImportRefused, import_file
from archiver.store.objectstore import FolderStore, ObjectStore
from archiver.stores import EmbeddedStores, SharedStores
from demoweb import WebSpec, run_demo_process
from tests.support.rawhttp import get
from tests.support.replayarchive import serving
from tests.support.repo import ARCHIVER, archiver_here
from tests.support.storemodes import ModeArchive

PAGE = b"<html><title>Imported</title><p>a page another tool archived</p></html>"


@pytest.fixture(scope="module")
def wget_warc(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """A WARC that wget wrote crawling one demo site (the demo server as its proxy, since the
    system resolver does not know the demo names), and the bodies the site serves."""
    work = tmp_path_factory.mktemp("wget")
    with run_demo_process(WebSpec(sites=1, pages_per_site=4, port=0, trap=False)) as (web, port, _):
        origin = web.origin(web.normal_hosts[0])
        done = subprocess.run(
            ["wget", "--quiet", "--recursive", "--level=1", f"--warc-file={work / 'site'}",
             "--execute=use_proxy=yes", f"--execute=http_proxy=http://127.0.0.1:{port}",
             f"--directory-prefix={work / 'files'}", origin + "/"],
            capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode in (0, 8), done.stderr  # 8: some links answered 404
        bodies = {url: web.respond(web.normal_hosts[0], url[len(origin):]).body
                  for url in (origin + "/", origin + "/robots.txt")}
    return work / "site.warc.gz", bodies


def warc_store(archive: ModeArchive) -> ObjectStore:
    stores = archive.stores
    return stores.objects() if isinstance(stores, SharedStores) else FolderStore(stores.warc_directory())


def test_a_wget_warc_is_stored_catalogued_and_read_back_in_either_mode(mode_archive, wget_warc):
    path, bodies = wget_warc
    done = subprocess.run([*ARCHIVER, "import", str(path), "--config", str(mode_archive.path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "catalog entries added, 0 already in the catalog; stored as" in done.stdout
    assert "not catalogued:" in done.stdout and "request" in done.stdout  # wget's requests, log
    stores = mode_archive.stores
    warcs = stores.warcs()
    with contextlib.closing(stores.catalog(readonly=True)) as catalog:
        for url, body in bodies.items():
            (capture,) = catalog.captures(url)
            assert capture.filename == "site.warc.gz" and capture.status == 200
            assert warcs.read(capture.filename, capture.offset, capture.length).payload == body
    # Stored byte for byte: wget gzips each record on its own, as replay needs.
    stored = warc_store(mode_archive)
    assert stored.stored("site.warc.gz") == stored.fingerprint(path)

    again = archiver_here("import", str(path), "--config", str(mode_archive.path))  # in this process
    assert again.returncode == 0, again.stderr
    assert b" 0 catalog entries added, " in again.stdout
    assert b"already in the store as site.warc.gz" in again.stdout


def warcio_records(out: io.BufferedIOBase | io.BytesIO, *, gzip_records: bool) -> None:
    """A response, a revisit of it and a resource record, as a warcio user writes them."""
    writer = WARCWriter(out, gzip=gzip_records)
    head = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    response = writer.create_warc_record("http://example.org/page", "response",
                                         payload=io.BytesIO(PAGE), http_headers=head,
                                         warc_headers_dict={"WARC-Date": "2020-05-01T10:00:00Z"})
    writer.write_record(response)
    revisit = writer.create_revisit_record(
        "http://example.org/page", response.rec_headers.get_header("WARC-Payload-Digest"),
        "http://example.org/page", "2020-05-01T10:00:00Z", http_headers=head)
    revisit.rec_headers.replace_header("WARC-Date", "2021-05-01T10:00:00Z")
    writer.write_record(revisit)
    shot = writer.create_warc_record("http://example.org/shot.png", "resource",
                                     payload=io.BytesIO(b"\x89PNG fake"),
                                     warc_content_type="image/png",
                                     warc_headers_dict={"WARC-Date": "2020-05-01T10:00:01Z"})
    writer.write_record(shot)
    dns = writer.create_warc_record("dns:example.org", "response", payload=io.BytesIO(b"x"),
                                    warc_content_type="text/dns")
    writer.write_record(dns)  # Heritrix writes these: no web capture


@pytest.mark.parametrize("form", ["plain", "whole-gzip"])
def test_a_warc_not_gzipped_record_by_record_is_rewritten_so_replay_can_seek(tmp_path, form):
    archive = tmp_path / "warcs"
    source = tmp_path / ("made.warc" if form == "plain" else "made.warc.gz")
    raw = io.BytesIO()
    warcio_records(raw, gzip_records=False)
    source.write_bytes(raw.getvalue() if form == "plain" else gzip.compress(raw.getvalue()))
    with catalog_at(tmp_path) as catalog:
        done = import_file(source, warcs=FolderStore(archive), catalog=catalog, in_place=False)
        assert done.rewritten and done.name == "made.warc.gz" and done.records == 4
        assert (done.entries, done.added) == (3, 3)
        assert done.skipped == {"response": 1}  # the dns: record
        page = catalog.captures("http://example.org/page")
        assert [(c.timestamp, c.rectype) for c in page] == [("20200501100000", "response"),
                                                            ("20210501100000", "revisit")]
        (shot,) = catalog.captures("http://example.org/shot.png")
        assert (shot.status, shot.mime, shot.rectype) == (200, "image/png", "response")
    warcs = WarcFiles(archive)
    assert warcs.read("made.warc.gz", page[0].offset, page[0].length).payload == PAGE
    assert warcs.read("made.warc.gz", shot.offset, shot.length).payload == b"\x89PNG fake"


def test_a_truncated_or_foreign_file_changes_nothing(tmp_path):
    archive = tmp_path / "warcs"
    good = tmp_path / "good.warc.gz"
    with good.open("wb") as out:
        warcio_records(out, gzip_records=True)
    data = good.read_bytes()
    cut_member = tmp_path / "cut.warc.gz"
    cut_member.write_bytes(data[: len(data) - 40])
    plain = io.BytesIO()
    warcio_records(plain, gzip_records=False)
    cut_record = tmp_path / "cut.warc"
    cut_record.write_bytes(plain.getvalue()[:300])
    html = tmp_path / "page.warc.gz"
    html.write_bytes(PAGE)
    empty = tmp_path / "empty.warc"
    empty.write_bytes(b"")
    with catalog_at(tmp_path) as catalog:
        for path, why in [(cut_member, "truncated"), (cut_record, "cut short"),
                          (html, "not a WARC or ARC file"), (empty, "is empty"),
                          (tmp_path / "absent.warc.gz", "no such file")]:
            with pytest.raises(ImportRefused, match=why):
                import_file(path, warcs=FolderStore(archive), catalog=catalog, in_place=False)
        assert catalog.count() == 0
    assert not archive.exists() or not list(archive.iterdir())


def test_in_place_indexes_only_a_seekable_file_inside_the_warc_folder(tmp_path):
    archive = tmp_path / "warcs"
    archive.mkdir()
    inside = archive / "theirs.warc.gz"
    with inside.open("wb") as out:
        warcio_records(out, gzip_records=True)
    outside = tmp_path / "elsewhere.warc.gz"
    outside.write_bytes(inside.read_bytes())
    plain = archive / "plain.warc"
    raw = io.BytesIO()
    warcio_records(raw, gzip_records=False)
    plain.write_bytes(raw.getvalue())
    with catalog_at(tmp_path) as catalog:
        with pytest.raises(ImportRefused, match="inside the WARC store"):
            import_file(outside, warcs=FolderStore(archive), catalog=catalog, in_place=True)
        with pytest.raises(ImportRefused, match="gzipped record by record"):
            import_file(plain, warcs=FolderStore(archive), catalog=catalog, in_place=True)
        done = import_file(inside, warcs=FolderStore(archive), catalog=catalog, in_place=True)
        assert (done.added, done.stored, done.name) == (3, False, "theirs.warc.gz")
        # The same bytes under another name: every entry is a duplicate, none added twice.
        twin = import_file(outside, warcs=FolderStore(archive), catalog=catalog, in_place=False)
        assert (twin.added, twin.duplicates) == (0, 3)
        assert catalog.count() == 3


def test_a_name_the_store_holds_with_other_bytes_is_refused(tmp_path):
    archive = tmp_path / "warcs"
    first, second = tmp_path / "a" / "same.warc.gz", tmp_path / "b" / "same.warc.gz"
    for path, gzip_records in ((first, True), (second, True)):
        path.parent.mkdir()
        with path.open("wb") as out:
            warcio_records(out, gzip_records=gzip_records)  # new record ids: other bytes
    with catalog_at(tmp_path) as catalog:
        import_file(first, warcs=FolderStore(archive), catalog=catalog, in_place=False)
        with pytest.raises(ImportRefused, match=r"holds another file named same\.warc\.gz"):
            import_file(second, warcs=FolderStore(archive), catalog=catalog, in_place=False)
    assert (archive / "same.warc.gz").read_bytes() == first.read_bytes()


def test_an_arc_file_is_converted_to_warc(tmp_path):
    http = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE
    header_body = b"1 0 archiver test\nURL IP-address Archive-date Content-type Archive-length\n"
    filedesc = (b"filedesc://old.arc 0.0.0.0 20010101000000 text/plain %d\n" % len(header_body)
                + header_body + b"\n")
    record = (b"http://example.org/old 192.0.2.1 20010203040506 text/html %d\n" % len(http)
              + http + b"\n")
    source = tmp_path / "old.arc.gz"
    source.write_bytes(gzip.compress(filedesc) + gzip.compress(record))
    with catalog_at(tmp_path) as catalog:
        done = import_file(source, warcs=FolderStore(tmp_path / "warcs"), catalog=catalog,
                           in_place=False)
        assert done.rewritten and done.name == "old.warc.gz" and done.added == 1
        (capture,) = catalog.captures("http://example.org/old")
    assert capture.timestamp == "20010203040506" and capture.status == 200
    assert WarcFiles(tmp_path / "warcs").read("old.warc.gz", capture.offset,
                                               capture.length).payload == PAGE


@contextlib.contextmanager
def catalog_at(tmp_path: Path):
    catalog = Catalog(tmp_path / "catalog", 4)
    try:
        yield catalog
    finally:
        catalog.close()


async def test_replay_serves_imported_responses_revisits_and_resources(tmp_path):
    path = tmp_path / "archiver.toml"
    path.write_text('[archive]\nroot = "archive"\n')
    config = load(path)
    stores = EmbeddedStores(config)
    source = tmp_path / "theirs.warc.gz"
    with source.open("wb") as out:
        warcio_records(out, gzip_records=True)
    with contextlib.closing(stores.catalog()) as catalog:
        import_file(source, warcs=FolderStore(stores.warc_directory()), catalog=catalog,
                    in_place=False)
    async with serving(config) as running:
        for stamp, url, body, mime in [
                ("20200501100000", "http://example.org/page", PAGE, "text/html"),
                ("20210501100000", "http://example.org/page", PAGE, "text/html"),  # the revisit
                ("20200501100001", "http://example.org/shot.png", b"\x89PNG fake", "image/png")]:
            status, headers, got = await get(running.content_at, f"/web/{stamp}id_/{url}")
            assert (status, got) == (200, body), (stamp, url)
            assert headers["content-type"].startswith(mime)
            assert headers["memento-datetime"]
