"""``archiver import``: WARC files written by other tools (wget against the demo web, warcio
directly) checked whole, stored in the WARC store of either mode, catalogued and replayed; a
truncated or non-WARC file refused with nothing changed."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import resource
import subprocess
import tempfile
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.config import load
from archiver.store.catalog_maintenance import WarcFiles
from archiver.store.embedded.catalog import Catalog
from archiver.store.imports import ImportRefused, import_file
from archiver.store.objectstore import FolderStore, ObjectStore
from archiver.stores import EmbeddedStores
from demoweb import WebSpec, run_demo_process
from tests.support.fuzzing import assert_cost_bounded
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
    return archive.stores.warc_store()


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


def arc_file(records: list[tuple[str, bytes, bytes]]) -> bytes:
    """An ARC file (version 1): its filedesc record, then (URL, HTTP message, what follows its
    block) per record."""
    header_body = b"1 0 archiver test\nURL IP-address Archive-date Content-type Archive-length\n"
    out = [b"filedesc://lax.arc 0.0.0.0 20010101000000 text/plain %d\n" % len(header_body)
           + header_body + b"\n"]
    for url, http, after in records:
        out.append(f"{url} 192.0.2.1 20010203040506 text/html {len(http)}\n".encode() + http + after)
    return b"".join(out)


@pytest.mark.parametrize("gzipped", [False, True])
def test_an_arc_file_warcio_reads_is_imported_and_its_quirks_are_one_line_each(tmp_path, gzipped):
    """Two quirks of old ARC writers warcio takes with raw multi-line warnings: a URL with spaces
    (escaped) and a line after a block that its length leaves out (skipped)."""
    http = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE
    data = arc_file([("http://example.org/a b", http, b"\n"),
                     ("http://example.org/tail", http, b"</body></html>\n\n"),
                     ("http://example.org/last", http, b"\n")])
    source = tmp_path / ("lax.arc.gz" if gzipped else "lax.arc")
    source.write_bytes(gzip.compress(data) if gzipped else data)
    archive = tmp_path / "archiver.toml"
    archive.write_text('[archive]\nroot = "archive"\n')
    done = subprocess.run([*ARCHIVER, "import", str(source), "--config", str(archive)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "4 records, 3 catalog entries added" in done.stdout
    said = done.stderr.splitlines()
    assert all(line.startswith("archiver import: ") for line in said), said  # nothing raw
    assert sum("holds spaces, escaped as %20" in line for line in said) == 1
    assert sum("'</body></html>\\n' follows its block" in line for line in said) == 1
    with Catalog(tmp_path / "archive" / "catalog", 1000, readonly=True) as catalog:
        assert [c.url for c in catalog.captures("http://example.org/a%20b")] == ["http://example.org/a%20b"]
        assert catalog.captures("http://example.org/last")


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


def record(*, url: str = "http://example.org/page", status: bytes = b"200 OK",
           date: bytes = b"2020-05-01T10:00:00Z", extra: bytes = b"", body: bytes = PAGE,
           length: int | None = None) -> bytes:
    """One WARC response record written by hand, so that any of its parts can be wrong."""
    http = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html\r\n\r\n" + body
    return (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:" + url.encode()[-8:]
            + b">\r\nWARC-Date: " + date + b"\r\nWARC-Target-URI: " + url.encode() + b"\r\n"
            + extra + b"Content-Type: application/http; msgtype=response\r\nContent-Length: "
            + str(len(http) if length is None else length).encode() + b"\r\n\r\n" + http
            + b"\r\n\r\n")


GOOD = record(url="http://example.org/good")
HOSTILE = {
    "status of 25 digits": (record(status=b"1234567890123456789012345 OK"), "HTTP status"),
    "negative status": (record(status=b"-200 OK"), "HTTP status '-200' is not three digits"),
    "status not a number": (record(status=b"OK"), "HTTP status 'OK' is not three digits"),
    "control character in the URI": (record(url="http://example.org/\x1b[2J"), "control character"),
    "date out of range": (record(date=b"99999-01-01T00:00:00Z"), "is not a date"),
    "date not a date": (record(date=b"yesterday"), "is not a date"),
    "Content-Length too short": (record(length=30), "follows its block of 30 bytes"),
    "Content-Length too long": (record(length=10_000), "cut short"),
    "Content-Length not a number": (record(length=-5), "not a number of at most 18 digits"),
    "Content-Length of 5,000 digits": (record().replace(b"Content-Length: ", b"Content-Length: "
                                                        + b"9" * 5000), "not a number"),
    "huge WARC head": (record(extra=b"X-Filler: abcdefgh\r\n" * 5000), "WARC head is longer"),
    "long WARC header line": (record(extra=b"X-Long: " + b"a" * 10**6 + b"\r\n"), "WARC head is longer"),
    "long HTTP header line": (record(body=b"", status=b"200 OK\r\nX-Long: " + b"a" * 300_000),
                              "HTTP head is longer than 262144 bytes"),
}


@pytest.mark.parametrize("form", ["plain", "by-record", "whole-gzip"])
@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_malformed_record_refuses_the_file_naming_the_record_and_its_offset(tmp_path, hostile, form):
    data, why = HOSTILE[hostile]
    source = tmp_path / ("theirs.warc" if form == "plain" else "theirs.warc.gz")
    if form == "plain":
        source.write_bytes(GOOD + data)
    elif form == "by-record":
        source.write_bytes(gzip.compress(GOOD) + gzip.compress(data))
    else:
        source.write_bytes(gzip.compress(GOOD + data))
    with catalog_at(tmp_path) as catalog:
        with pytest.raises(ImportRefused) as refused:
            import_file(source, warcs=FolderStore(tmp_path / "warcs"), catalog=catalog, in_place=False)
        assert catalog.count() == 0
    message = str(refused.value)
    assert message.startswith(f"{source}: record 2 (at byte {len(GOOD)}") and why in message
    assert "\n" not in message
    assert not (tmp_path / "warcs").exists() or not list((tmp_path / "warcs").iterdir())


def test_a_long_header_line_is_refused_before_warcio_reads_it():
    """A gzip member holding an 8 MB header line (8 KB on disk): warcio took time quadratic in
    the line (337 s for 130 MB); now it costs about what a record with an 8 MB body does."""
    line = b"X-Long: " + b"a" * (8 << 20) + b"\r\n"
    hostile = gzip.compress(record(extra=line))
    benign = gzip.compress(record(body=line))

    def run(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "theirs.warc.gz"
            source.write_bytes(data)
            with catalog_at(Path(tmp)) as catalog:
                try:
                    import_file(source, warcs=FolderStore(Path(tmp) / "warcs"), catalog=catalog,
                                in_place=False)
                except ImportRefused as e:
                    assert "its WARC head is longer than 65536 bytes" in str(e)

    assert_cost_bounded(run, hostile, benign, factor=3, label="long header line")


def test_bad_file_names_and_records_are_one_line_each_and_the_others_are_imported(tmp_path):
    archive = tmp_path / "archiver.toml"
    archive.write_text('[archive]\nroot = "archive"\n')
    good = tmp_path / "good.warc.gz"
    with good.open("wb") as out:
        warcio_records(out, gzip_records=True)  # a response, a revisit, a resource
    files = [tmp_path / ".hidden.warc.gz", tmp_path / "line\nbreak.warc.gz",
             tmp_path / "escape\x1b[2J.warc.gz", tmp_path / "status.warc.gz", good]
    for path in files[:3]:
        path.write_bytes(gzip.compress(GOOD))
    files[3].write_bytes(gzip.compress(record(status=b"1234567890123456789012345 OK")))
    done = subprocess.run([*ARCHIVER, "import", *map(str, files), "--config", str(archive)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    refusals = [line for line in done.stderr.splitlines() if line.startswith("archiver: ")]
    assert len(refusals) == 4 and "Traceback" not in done.stderr and "\x1b" not in done.stderr
    assert all(line.endswith("(nothing imported from it)") for line in refusals)
    assert sum("cannot hold a file named so" in line for line in refusals) == 3
    assert "line\\nbreak.warc.gz" in done.stderr and "escape\\x1b[2J.warc.gz" in done.stderr
    assert f"{files[3]}: record 1 (at byte 0 of the decompressed data): HTTP status" in done.stderr
    assert "good.warc.gz: 4 records, 3 catalog entries added" in done.stdout  # and a dns: record
    # reindex and verify take every kind import takes: a resource record is no bad entry.
    for verb in ("reindex", "verify"):
        checked = subprocess.run([*ARCHIVER, "catalog", verb, "--config", str(archive)],
                                 capture_output=True, text=True, timeout=120, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "OK: 3 entries" in checked.stdout


def test_reindex_takes_a_status_the_catalog_cannot_hold_as_unknown(tmp_path):
    """A file an earlier import stored with a 25-digit status: reindex failed on it forever."""
    warcs = tmp_path / "archive" / "warcs"
    warcs.mkdir(parents=True)
    (warcs / "old.warc.gz").write_bytes(gzip.compress(record(status=b"1234567890123456789012345 OK"))
                                        + gzip.compress(GOOD))
    (tmp_path / "archiver.toml").write_text('[archive]\nroot = "archive"\n')
    done = archiver_here("catalog", "reindex", "--config", str(tmp_path / "archiver.toml"))
    assert done.returncode == 0, done.stderr
    stores = EmbeddedStores(load(tmp_path / "archiver.toml"))
    with contextlib.closing(stores.catalog(readonly=True)) as catalog:
        assert [c.status for c in catalog.captures("http://example.org/page")] == [None]
        assert [c.status for c in catalog.captures("http://example.org/good")] == [200]


def test_temporary_disk_is_capped_and_a_whole_gzip_is_never_expanded_on_disk(tmp_path):
    """A 130 KB whole-file gzip holding 128 MiB: it was expanded into $TMPDIR whole. Imported
    under a file size limit of 8 MiB it now goes through (the rewritten file is small); a
    record whose digests warcio must compute is copied to a temporary file, which counts
    against import.max_temp_bytes."""
    zeros = b"\0" * (128 << 20)
    source = tmp_path / "whole.warc.gz"
    with gzip.open(source, "wb", compresslevel=1) as out:
        writer = WARCWriter(out, gzip=False)
        head = StatusAndHeaders("200 OK", [("Content-Type", "application/octet-stream")],
                                protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(
            "http://example.org/zeros", "response", payload=io.BytesIO(zeros), http_headers=head,
            warc_headers_dict={"WARC-Date": "2020-05-01T10:00:00Z"}))
    config_path = tmp_path / "archiver.toml"
    config_path.write_text('[archive]\nroot = "archive"\n')
    scratch = tmp_path / "tmp"
    scratch.mkdir()

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))

    done = subprocess.run([*ARCHIVER, "import", str(source), "--config", str(config_path)],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "TMPDIR": str(scratch)}, preexec_fn=limited)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "1 catalog entries added" in done.stdout and not list(scratch.iterdir())

    bare = tmp_path / "bare.warc"  # rewritten; no digests: warcio copies the record for them
    bare.write_bytes(record(body=b"x" * (2 << 20)))
    config_path.write_text('[archive]\nroot = "archive"\n[import]\nmax_temp_bytes = 1048576\n')
    refused = subprocess.run([*ARCHIVER, "import", str(bare), "--config", str(config_path)],
                             capture_output=True, text=True, timeout=300, check=False,
                             env={**os.environ, "TMPDIR": str(scratch)})
    assert refused.returncode == 2
    assert (f"archiver: {bare}: its rewriting needs more than import.max_temp_bytes (1048576 "
            "bytes) of temporary disk; raise it to import this file") in refused.stderr
    assert not list(scratch.iterdir())
