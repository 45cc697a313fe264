"""WARC bundles: records read back with warcio, locations, rotation, repair."""

import base64
import hashlib
import io
import resource
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator

from archiver import __version__
from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter, RecordLocation, repair_open_bundle
from tests.support.warcexchanges import DATE, EXCHANGES, GET, RNG, check, write_all


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def records(path: Path) -> list:
    """(headers, http head or None, payload bytes, offset, length) for every record in ``path``."""
    found = []
    with path.open("rb") as stream:
        iterator = ArchiveIterator(stream)
        for record in iterator:
            payload = record.raw_stream.read()
            found.append(
                SimpleNamespace(
                    headers=record.rec_headers,
                    http=record.http_headers,
                    payload=payload,
                    offset=iterator.get_record_offset(),
                    length=iterator.get_record_length(),
                )
            )
    return found


def member(path: Path, location: RecordLocation) -> bytes:
    """The record bytes of the gzip member at ``location``, which must be exactly one member."""
    with path.open("rb") as stream:
        stream.seek(location.offset)
        raw = stream.read(location.length)
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    content = inflater.decompress(raw)
    assert inflater.eof
    assert inflater.unused_data == b""
    return content


def test_exchanges_read_back(tmp_path):
    writer = BundleWriter(tmp_path, WarcConfig(), operator="tests",
                          extra_info={"isPartOf": "test-crawl", "robots": "obey"})
    written = write_all(writer)
    path = tmp_path / written[0].response.filename
    assert writer.current_path == path.with_name(path.name + ".open")
    writer.close()

    found = records(path)
    assert len(found) == 1 + 2 * len(EXCHANGES)
    info = found[0]
    assert info.headers["WARC-Type"] == "warcinfo"
    assert info.headers.protocol == "WARC/1.1"
    assert info.headers["WARC-Filename"] == path.name
    fields = info.payload.decode()
    for line in (
        "format: WARC File Format 1.1",
        "operator: tests",
        "isPartOf: test-crawl",
        "robots: obey",
        f"software: archiver/{__version__}",
    ):
        assert line + "\r\n" in fields

    pairs = zip(EXCHANGES, written, found[1::2], found[2::2], strict=True)
    for (name, url, request, _head, body, truncated), result, response, req in pairs:
        assert response.headers["WARC-Type"] == "response", name
        assert response.headers["WARC-Record-ID"] == result.record_id
        assert response.headers["WARC-Target-URI"] == url
        assert response.headers["WARC-Date"] == "2026-11-22T03:15:00.123456Z"
        assert response.headers["WARC-IP-Address"] == "127.0.0.1"
        assert response.headers["WARC-Truncated"] == truncated
        assert response.headers["Content-Type"] == "application/http;msgtype=response"
        assert response.payload == body, name
        assert result.payload_digest == sha1_b32(body)
        assert response.headers["WARC-Payload-Digest"] == result.payload_digest
        assert req.headers["WARC-Type"] == "request"
        assert req.headers["WARC-Concurrent-To"] == result.record_id
        assert req.headers["WARC-Target-URI"] == url
        assert req.headers["Content-Type"] == "application/http;msgtype=request"
        assert req.payload == request.partition(b"\r\n\r\n")[2]
        for record in (response, req):
            digests = [k for k, _ in record.headers.headers if k.endswith("-Digest")]
            assert sorted(digests) == ["WARC-Block-Digest", "WARC-Payload-Digest"], name


def test_http_heads_and_blocks_are_stored_byte_for_byte(tmp_path):
    with BundleWriter(tmp_path, WarcConfig()) as writer:
        written = write_all(writer)
    for (name, _, request, head, body, _), result in zip(EXCHANGES, written, strict=True):
        path = tmp_path / result.response.filename
        for location, block in ((result.response, head + body), (result.request, request)):
            content = member(path, location)
            warc_head, _, rest = content.partition(b"\r\n\r\n")
            assert rest == block + b"\r\n\r\n", name
            assert b"Content-Length: %d\r\n" % len(block) in warc_head + b"\r\n"
            assert b"WARC-Block-Digest: " + sha1_b32(block).encode() in warc_head


def test_locations_are_the_gzip_members(tmp_path):
    with BundleWriter(tmp_path, WarcConfig()) as writer:
        written = write_all(writer)
        meta = writer.write_metadata(url="http://example.org/", date=DATE, fields={"a": "b"})
        total = writer.bytes_written
    path = tmp_path / meta.filename
    assert total == path.stat().st_size
    ours = [(loc.offset, loc.length) for w in written for loc in (w.response, w.request)]
    ours.append((meta.offset, meta.length))
    found = records(path)
    assert ours == [(r.offset, r.length) for r in found[1:]]
    for result in written:
        response = list(ArchiveIterator(io.BytesIO(member(path, result.response))))
        assert [r.rec_headers["WARC-Record-ID"] for r in response] == [result.record_id]
        request = list(ArchiveIterator(io.BytesIO(member(path, result.request))))
        assert [r.rec_headers["WARC-Concurrent-To"] for r in request] == [result.record_id]


def test_metadata_record(tmp_path):
    with BundleWriter(tmp_path, WarcConfig()) as writer:
        location = writer.write_metadata(
            url="http://example.org/gone",
            date=DATE.astimezone(timezone(timedelta(hours=2))),
            fields={"fetch-error": "connect: refused", "attempts": "3"},
        )
    path = tmp_path / location.filename
    [record] = records(path)[1:]
    assert (record.offset, record.length) == (location.offset, location.length)
    assert record.headers["WARC-Type"] == "metadata"
    assert record.headers["WARC-Target-URI"] == "http://example.org/gone"
    assert record.headers["WARC-Date"] == "2026-11-22T03:15:00.123456Z"
    assert record.headers["Content-Type"] == "application/warc-fields"
    assert record.headers["WARC-Payload-Digest"] is None
    assert record.payload == b"fetch-error: connect: refused\r\nattempts: 3\r\n"
    assert check(path) == (0, 2)


def test_rotation_by_size(tmp_path):
    writer = BundleWriter(tmp_path, WarcConfig(max_size=6000))
    bodies = [RNG.randbytes(2500) for _ in range(9)]
    written = [
        writer.write_exchange(
            url=f"http://example.org/{i}",
            ip=None,
            date=DATE,
            request=GET,
            response_head=b"HTTP/1.1 200 OK\r\n\r\n",
            response_body=body,
        )
        for i, body in enumerate(bodies)
    ]
    total = writer.bytes_written
    writer.close()
    paths = sorted(tmp_path.iterdir())
    assert len(paths) == writer.files_closed == 5
    for serial, path in enumerate(paths):
        assert path.name.endswith(f"-0-{serial:05d}.warc.gz")
    assert sum(p.stat().st_size for p in paths) == total
    for path in paths:
        found = records(path)
        assert found[0].headers["WARC-Type"] == "warcinfo"
        assert found[0].headers["WARC-Filename"] == path.name
        assert "WARC-IP-Address" not in [k for k, _ in found[1].headers.headers]
        assert len(found) == 5 or path == paths[-1]
        assert found[-2].offset < 6000  # under max_size when its last exchange began
    assert [w.response.filename for w in written] == [p.name for p in paths for _ in (1, 2)][:9]
    for result, body in zip(written, bodies, strict=True):
        assert result.request.filename == result.response.filename
        assert member(tmp_path / result.response.filename, result.response).endswith(
            body + b"\r\n\r\n"
        )
    assert check(*paths) == (0, 5 + 2 * 9)


def test_rotation_by_age_before_a_write_and_at_a_group_commit(tmp_path):
    now = [0.0]
    writer = BundleWriter(tmp_path, WarcConfig(max_age=60.0), clock=lambda: now[0])

    def fetch(n: int) -> str:
        return writer.write_exchange(url=f"http://example.org/{n}", ip=None, date=DATE, request=GET,
                                     response_head=b"HTTP/1.1 200 OK\r\n\r\n",
                                     response_body=b"x").response.filename

    first = [fetch(0), fetch(1)]
    now[0] = 59.0
    assert fetch(2) == first[0]                     # not yet 60 s old
    now[0] = 60.0
    second = fetch(3)                               # old before this write: a new bundle
    assert second != first[0]
    writer.sync()
    assert (tmp_path / first[0]).exists()           # the old one is closed and published
    now[0] = 130.0
    writer.sync()                                   # idle past max_age: closed at the commit
    assert (tmp_path / second).exists()
    assert writer.current_path is None
    third = fetch(4)
    writer.close()
    assert len({first[0], second, third}) == 3
    assert check(*sorted(tmp_path.iterdir())) == (0, 3 + 2 * 5)


def test_close_renames_and_serial_continues(tmp_path):
    writer = BundleWriter(tmp_path, WarcConfig(prefix="CRAWL"), process=3)
    writer.sync()
    writer.close()
    assert writer.current_path is None
    assert list(tmp_path.iterdir()) == []

    first = writer.write_metadata(url="dns:example.org", date=DATE, fields={"a": "1"})
    open_path = writer.current_path
    assert open_path is not None
    assert open_path.name == first.filename + ".open"
    assert first.filename.startswith("CRAWL-2") and first.filename.endswith("-3-00000.warc.gz")
    # The warcinfo and each record reach the OS at once: a killed process loses none of them.
    assert open_path.stat().st_size == writer.bytes_written
    writer.close()
    assert not open_path.exists()
    assert (tmp_path / first.filename).exists()
    assert writer.files_closed == 1

    second = writer.write_metadata(url="dns:example.org", date=DATE, fields={"a": "2"})
    assert second.filename.endswith("-3-00001.warc.gz")
    writer.close()

    (tmp_path / "CRAWL-20200101000000-3-00007.warc.gz.corrupt").touch()
    (tmp_path / "CRAWL-20200101000000-4-00042.warc.gz").touch()
    (tmp_path / "OTHER-20200101000000-3-00099.warc.gz").touch()
    again = BundleWriter(tmp_path, WarcConfig(prefix="CRAWL"), process=3)
    third = again.write_metadata(url="dns:example.org", date=DATE, fields={"a": "3"})
    assert third.filename.endswith("-3-00008.warc.gz")
    other = BundleWriter(tmp_path, WarcConfig(prefix="CRAWL"), process=4)
    fourth = other.write_metadata(url="dns:x", date=DATE, fields={"a": "4"})
    assert fourth.filename.endswith("-4-00043.warc.gz")
    for w in (again, other):
        w.close()
    names = (first.filename, second.filename, third.filename, fourth.filename)
    assert check(*(tmp_path / name for name in names)) == (0, 8)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"date": datetime(2026, 1, 1)},
        {"url": "http://example.org/a b"},
        {"url": "http://example.org/\r\nWARC-Type: x"},
        {"ip": "127.0.0.1\r\n"},
        {"truncated": "too long"},
    ],
)
def test_bad_exchange_is_refused_before_anything_is_written(tmp_path, kwargs):
    writer = BundleWriter(tmp_path, WarcConfig())
    exchange = {
        "url": "http://example.org/",
        "ip": "127.0.0.1",
        "date": DATE,
        "request": GET,
        "response_head": b"HTTP/1.1 200 OK\r\n\r\n",
        "response_body": b"",
    }
    with pytest.raises(ValueError):
        writer.write_exchange(**(exchange | kwargs))
    assert writer.current_path is None
    assert list(tmp_path.iterdir()) == []


def test_bad_fields_are_refused(tmp_path):
    with pytest.raises(ValueError):
        BundleWriter(tmp_path, WarcConfig(), extra_info={"isPartOf": "a\r\nb"})
    with pytest.raises(ValueError):
        BundleWriter(tmp_path, WarcConfig(prefix="a/b"))
    writer = BundleWriter(tmp_path, WarcConfig())
    for fields in ({"bad name": "x"}, {"reason": "two\nlines"}, {"": "x"}):
        with pytest.raises(ValueError):
            writer.write_metadata(url="http://example.org/", date=DATE, fields=fields)
    assert list(tmp_path.iterdir()) == []


def small_bundle(directory: Path) -> tuple[bytes, list[int]]:
    """A closed bundle's bytes and the end offset of each of its records."""
    with BundleWriter(directory, WarcConfig()) as writer:
        written = write_all(writer, 3)
        meta = writer.write_metadata(url="http://example.org/", date=DATE, fields={"a": "b"})
    path = directory / meta.filename
    data = path.read_bytes()
    path.unlink()
    ends = [loc.offset + loc.length for w in written for loc in (w.response, w.request)]
    ends.append(meta.offset + meta.length)
    assert ends[-1] == len(data)
    return data, [written[0].response.offset, *ends]


def test_repair_at_truncation_offsets(tmp_path):
    warcs = tmp_path / "warcs"
    data, ends = small_bundle(warcs)
    # Every structural point of every member (gzip header, deflate data, CRC, ISIZE, boundary)
    # plus a stride through the rest.
    cuts = set(range(0, len(data) + 1, 7))
    for start, end in zip([0, *ends], ends, strict=False):
        cuts |= {start, start + 1, start + 9, start + 10, (start + end) // 2}
        cuts |= {end - 8, end - 5, end - 4, end - 1, end}
    open_path = tmp_path / "ARCHIVER-20261122031500-0-00000.warc.gz.open"
    checked = {}
    for cut in sorted(cuts):
        open_path.write_bytes(data[:cut])
        report = repair_open_bundle(open_path)
        kept = sum(1 for end in ends if end <= cut)
        good = max([0, *(end for end in ends if end <= cut)])
        assert report.path == open_path
        assert report.kept_records == kept, cut
        if kept:
            assert report.final_path == open_path.with_name(open_path.name[: -len(".open")])
            assert report.cut_bytes == cut - good
            assert report.final_path.read_bytes() == data[:good]
            if good not in checked:
                checked[good] = check(report.final_path)
            assert checked[good] == (0, kept), cut
        elif cut == 0:                                  # empty: removed, nothing to keep
            assert report.final_path == open_path and report.cut_bytes == 0
        else:
            assert report.final_path.name.endswith(".warc.gz.corrupt")
            assert report.cut_bytes == cut
            assert report.final_path.read_bytes() == data[:cut]
        assert not open_path.exists()
        report.final_path.unlink(missing_ok=True)
    assert len(checked) == len(ends)
    assert len(cuts) > 150


def test_repair_cuts_zeroed_or_garbage_tails(tmp_path):
    data, ends = small_bundle(tmp_path / "warcs")
    open_path = tmp_path / "ARCHIVER-20261122031500-0-00001.warc.gz.open"
    for tail in (b"\0" * 70000, b"\x1f\x8b\x08" + b"\0" * 20, b"not gzip at all"):
        open_path.write_bytes(data[: ends[3]] + tail)
        report = repair_open_bundle(open_path)
        assert (report.kept_records, report.cut_bytes) == (4, len(tail))
        assert check(report.final_path) == (0, 4)
        report.final_path.unlink()
    open_path.write_bytes(zlib.compress(b"WARC/1.1\r\nContent-Length: 5\r\n\r\nab", wbits=31))
    report = repair_open_bundle(open_path)
    assert report.kept_records == 0
    assert report.final_path.name.endswith(".corrupt")
    with pytest.raises(ValueError):
        repair_open_bundle(report.final_path)


def test_failed_write_is_cut_back_to_a_record_boundary(tmp_path):
    writer = BundleWriter(tmp_path, WarcConfig())
    writer.write_exchange(
        url="http://example.org/1",
        ip=None,
        date=DATE,
        request=GET,
        response_head=b"HTTP/1.1 200 OK\r\n\r\n",
        response_body=b"one",
    )
    path = writer.current_path
    assert path is not None
    on_disk = path.stat().st_size
    body = RNG.randbytes(20000)
    # A file size limit makes write(2) stop part-way (then fail with EFBIG), as a full disk does.
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (on_disk + 5000, hard))
    try:
        writer.write_exchange(
            url="http://example.org/2",
            ip=None,
            date=DATE,
            request=GET,
            response_head=b"HTTP/1.1 200 OK\r\n\r\n",
            response_body=body,
        )
        assert isinstance(writer.error, OSError)         # the exchange waits in memory
        assert path.stat().st_size == on_disk
        with pytest.raises(OSError):
            writer.flush()                               # a retry while the disk is still full
        assert path.stat().st_size == on_disk
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    writer.close()
    found = records(path.with_name(path.name[: -len(".open")]))
    assert [r.payload for r in found[1::2]] == [b"one", body]
    assert check(path.with_name(path.name[: -len(".open")])) == (0, 5)


def test_position_is_where_the_next_record_goes(tmp_path):
    (tmp_path / "ARCHIVER-20200101000000-1-00004.warc.gz").touch()
    writer = BundleWriter(tmp_path, WarcConfig(max_size=10), process=1)
    assert writer.position() == (5, 0)                 # no bundle open: the next one's start
    first = writer.write_metadata(url="dns:example.org", date=DATE, fields={"a": "1"})
    assert first.filename.endswith("-1-00005.warc.gz")
    assert writer.position() == (5, first.offset + first.length)
    second = writer.write_metadata(url="dns:example.org", date=DATE, fields={"a": "2"})
    assert second.filename.endswith("-1-00006.warc.gz")   # max_size reached: rotated
    assert writer.position() == (6, second.offset + second.length)
    writer.close()
    assert writer.position() == (7, 0)
