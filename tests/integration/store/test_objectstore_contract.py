"""The object store contract, run against both stores: a local folder and S3 (moto's real server).

Every test takes ``store`` (parametrised over both kinds) and, where it must damage an object
behind the store's back, ``tamper`` (writes raw bytes under a key the way another client would).
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from archiver.config import S3Config, WarcConfig
from archiver.store.bundles import BundleWriter
from archiver.store.catalog_maintenance import ObjectWarcs
from archiver.store.objectstore import (
    Fingerprint,
    FolderStore,
    NoSuchObject,
    ObjectMismatch,
    ObjectRangeError,
    ObjectStore,
    ObjectStoreUnavailable,
    put,
)
from archiver.store.s3.objectstore import MIN_PART_SIZE, S3Store
from archiver.store.shipping import ship_closed, ship_file
from archiver.store.warcindex import WarcError, index_warc, read_record

RNG = random.Random(14)
DATE = datetime(2026, 11, 22, 3, 15, tzinfo=UTC)
GET = b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n"

Tamper = Callable[[str, bytes], None]


@pytest.fixture(params=["folder", "s3"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> ObjectStore:
    if kind == "folder":
        return FolderStore(tmp_path / "store")
    bucket = request.getfixturevalue("s3_bucket")
    # The smallest part size S3 allows, so that a 10 MiB file takes the multipart path.
    return S3Store(bucket.client, bucket.name, "archive/warcs", part_size=MIN_PART_SIZE)


@pytest.fixture
def tamper(kind: str, store: Any) -> Tamper:
    """Write ``data`` under ``key`` as another client would: a folder's file is rewritten in
    place; an S3 object is replaced by a PutObject carrying the new bytes' own SHA-256."""
    def rewrite_file(key: str, data: bytes) -> None:
        path = store.directory / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def put_object(key: str, data: bytes) -> None:
        store.client.put_object(Bucket=store.bucket, Key=f"{store.prefix}/{key}", Body=data,
                                ChecksumSHA256=base64.b64encode(hashlib.sha256(data).digest()).decode())

    return rewrite_file if kind == "folder" else put_object


class AfterUpload:
    """The store, with ``then(key)`` run after each upload (to crash or damage in between)."""

    def __init__(self, inner: ObjectStore, then: Callable[[str], None]) -> None:
        self.inner = inner
        self.then = then
        self.uploads: list[str] = []

    def upload(self, source: Path, key: str) -> Any:
        sent = self.inner.upload(source, key)
        self.uploads.append(key)
        self.then(key)
        return sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Crash(Exception):
    """Stands for the process being killed at that point."""


def local_file(tmp_path: Path, name: str, size: int) -> Path:
    path = tmp_path / "local" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(RNG.randbytes(size))
    return path


# -- put, verified


@pytest.mark.parametrize("size", [1, 100_000, 2 * MIN_PART_SIZE + 1234])
def test_put_is_verified_and_reads_back(store: ObjectStore, tmp_path: Path, size: int) -> None:
    source = local_file(tmp_path, "a.bin", size)
    sent = put(store, source, "x/a.bin")
    assert sent.size == size
    assert store.stored("x/a.bin") == sent == store.fingerprint(source)
    assert store.size("x/a.bin") == size
    assert store.read("x/a.bin", 0, size) == source.read_bytes()


def test_multipart_checksum_is_composite(store: ObjectStore, tmp_path: Path, kind: str) -> None:
    """Three parts on S3: S3's composite checksum; a folder hashes the whole file."""
    source = local_file(tmp_path, "big.bin", 2 * MIN_PART_SIZE + 1)
    data = source.read_bytes()
    if kind == "folder":
        expected = "sha256:" + hashlib.sha256(data).hexdigest()
    else:
        parts = [data[i:i + MIN_PART_SIZE] for i in range(0, len(data), MIN_PART_SIZE)]
        digest = hashlib.sha256(b"".join(hashlib.sha256(part).digest() for part in parts)).digest()
        expected = base64.b64encode(digest).decode() + "-3"
    assert put(store, source, "big.bin").checksum == expected
    assert store.stored("big.bin") == Fingerprint(len(data), expected)


def test_put_replaces_an_object(store: ObjectStore, tmp_path: Path) -> None:
    put(store, local_file(tmp_path, "one", 5000), "k")
    second = local_file(tmp_path, "two", 3000)
    put(store, second, "k")
    assert store.read("k", 0, 3000) == second.read_bytes()
    assert store.size("k") == 3000


def test_a_replaced_object_fails_verification_loudly(store: ObjectStore, tamper: Tamper,
                                                     tmp_path: Path) -> None:
    source = local_file(tmp_path, "a.bin", 4096)
    other = bytes(b ^ 0xFF for b in source.read_bytes())  # same size, other bytes
    damaged = AfterUpload(store, lambda key: tamper(key, other))
    with pytest.raises(ObjectMismatch, match=r"a\.bin"):
        put(damaged, source, "a.bin")
    assert source.read_bytes() != other


# -- byte ranges


def test_byte_ranges(store: ObjectStore, tmp_path: Path) -> None:
    source = local_file(tmp_path, "r.bin", 10_000)
    data = source.read_bytes()
    put(store, source, "r.bin")
    assert store.read("r.bin", 0, 1) == data[:1]
    assert store.read("r.bin", 9_999, 1) == data[-1:]
    assert store.read("r.bin", 1234, 5678) == data[1234:1234 + 5678]
    with pytest.raises(ObjectRangeError, match=r"r\.bin"):
        store.read("r.bin", 10_000, 1)  # past the end
    with pytest.raises(ObjectRangeError, match=r"r\.bin"):
        store.read("r.bin", 9_990, 20)  # across the end
    with pytest.raises(NoSuchObject, match="missing"):
        store.read("missing", 0, 1)
    with pytest.raises(ValueError, match="range"):
        store.read("r.bin", 5, 0)
    with pytest.raises(ValueError, match="range"):
        store.read("r.bin", -1, 5)



def test_ranges_opened_as_files(store: ObjectStore, tmp_path: Path) -> None:
    source = local_file(tmp_path, "r.bin", 10_000)
    data = source.read_bytes()
    put(store, source, "r.bin")
    with store.open_range("r.bin", 1234, 5678) as opened:
        assert opened.read(1) == data[1234:1235]
        assert opened.read(100_000) == data[1235:1234 + 5678]
        assert opened.read(10) == b""
    with store.open_range("r.bin", 9_990, 20) as opened:  # across the end: what there is
        assert opened.read() == data[9_990:]
    with pytest.raises(NoSuchObject, match="missing"):
        store.open_range("missing", 0, 1)
    with pytest.raises(ValueError, match="range"):
        store.open_range("r.bin", 5, 0)


# -- listing, sizes, deletion, keys


def test_listing_sizes_and_deletion(store: ObjectStore, tmp_path: Path) -> None:
    keys = ["b.warc.gz", "a.warc.gz", "outlinks/1.tsv", "outlinks/0.tsv", "outlinksx"]
    for i, key in enumerate(keys):
        put(store, local_file(tmp_path, f"f{i}", 100 + i), key)
    assert store.list() == sorted(keys)
    assert store.list("outlinks/") == ["outlinks/0.tsv", "outlinks/1.tsv"]
    assert store.list("outlinks") == ["outlinks/0.tsv", "outlinks/1.tsv", "outlinksx"]
    assert store.list("zzz") == []
    assert store.size("outlinks/1.tsv") == 102
    assert store.size("nothing") is None
    assert store.stored("nothing") is None
    store.delete("a.warc.gz")
    store.delete("a.warc.gz")  # deleting what is gone is fine
    assert store.size("a.warc.gz") is None
    assert "a.warc.gz" not in store.list()


@pytest.mark.parametrize("key", ["", "../x", "/x", "a//b", ".hidden", "a/./b", "a/../b", "x\ny"])
def test_bad_keys_are_refused(store: ObjectStore, tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="bad object key"):
        put(store, local_file(tmp_path, "k", 10), key)
    with pytest.raises(ValueError, match="bad object key"):
        store.size(key)


# -- shipping WARC bundles


def write_bundles(directory: Path, exchanges: int = 40, max_size: int = 20_000) -> list[Path]:
    """Real bundles from BundleWriter, rotated by size; the closed files, sorted."""
    with BundleWriter(directory, WarcConfig(max_size=max_size)) as writer:
        for i in range(exchanges):
            writer.write_exchange(
                url=f"http://example.org/page/{i}", ip="127.0.0.1", date=DATE, request=GET,
                response_head=b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
                response_body=RNG.randbytes(RNG.randrange(100, 3000)))
    return sorted(directory.glob("*.warc.gz"))


def test_shipped_records_read_back_identical(store: ObjectStore, tmp_path: Path) -> None:
    local = tmp_path / "warcs"
    bundles = write_bundles(local)
    assert len(bundles) >= 3
    (local / "ARCHIVER-20261122031500-0-00099.warc.gz.open").write_bytes(b"still written")
    (local / "ARCHIVER-20261122031500-0-00098.warc.gz.corrupt").write_bytes(b"repaired away")
    entries = {path.name: list(index_warc(path)) for path in bundles}
    expected = {(c.filename, c.offset): read_record(local, c.filename, c.offset, c.length)
                for found in entries.values() for c in found}
    assert len(expected) == 40

    shipped = ship_closed(local, store, under="warcs/")
    assert [s.name for s in shipped] == [p.name for p in bundles]
    assert all(s.uploaded for s in shipped)
    assert sorted(p.name for p in local.iterdir()) == [
        "ARCHIVER-20261122031500-0-00098.warc.gz.corrupt", "ARCHIVER-20261122031500-0-00099.warc.gz.open"]

    warcs = ObjectWarcs(store, "warcs/")
    assert warcs.names() == [p.name for p in bundles]
    for name, found in entries.items():
        assert list(warcs.index(name)) == found
        for capture in found:
            assert warcs.read(capture.filename, capture.offset, capture.length) == \
                expected[(capture.filename, capture.offset)]
    assert ship_closed(local, store, under="warcs/") == []


def test_object_warcs_errors(store: ObjectStore, tmp_path: Path) -> None:
    local = tmp_path / "warcs"
    bundle = write_bundles(local, exchanges=3)[0]
    size = bundle.stat().st_size
    ship_closed(local, store)
    warcs = ObjectWarcs(store)
    with pytest.raises(WarcError, match="no such WARC file"):
        warcs.read("ARCHIVER-nothing.warc.gz", 0, 10)
    with pytest.raises(WarcError, match=r"cut short \(10 of 20 bytes\)"):
        warcs.read(bundle.name, size - 10, 20)
    garbage = tmp_path / "ARCHIVER-garbage.warc.gz"
    garbage.write_bytes(b"no WARC record here\n" * 10)
    put(store, garbage, garbage.name)
    with pytest.raises(WarcError, match=r"garbage\.warc\.gz: no complete record at offset 20"):
        warcs.read(garbage.name, 20, 100)
    with pytest.raises(WarcError, match="bad WARC file name"):
        warcs.read("../etc/passwd", 0, 10)
    assert warcs.names() == sorted([bundle.name, garbage.name])
    assert warcs.names("*-0-0000[0-9].warc.gz") == [bundle.name]
    assert warcs.names("nothing*") == []
    assert warcs.size(bundle.name) == size


def test_a_damaged_bundle_is_not_indexed(store: ObjectStore, tamper: Tamper, tmp_path: Path) -> None:
    local = tmp_path / "warcs"
    bundle = write_bundles(local, exchanges=3)[0]
    ship_closed(local, store)
    tamper(bundle.name, b"not a WARC at all")
    with pytest.raises(WarcError, match="not a complete WARC file"):
        list(ObjectWarcs(store).index(bundle.name))


def test_shipping_resumes_after_an_interruption(store: ObjectStore, tamper: Tamper,
                                                tmp_path: Path) -> None:
    """Killed after the second upload (before its check and deletion), with a partial object
    left under the third key by an earlier attempt: the next run finishes, uploading only what
    the store does not hold intact."""
    local = tmp_path / "warcs"
    bundles = write_bundles(local, exchanges=60)
    assert len(bundles) >= 4
    contents = {p.name: p.read_bytes() for p in bundles}

    def crash_on_second(key: str) -> None:
        if len(interrupted.uploads) == 2:
            raise Crash(key)

    interrupted = AfterUpload(store, crash_on_second)
    with pytest.raises(Crash):
        ship_closed(local, interrupted)
    assert sorted(p.name for p in local.glob("*.warc.gz")) == [p.name for p in bundles[1:]]
    tamper(bundles[2].name, contents[bundles[2].name][:1000])  # a partial object

    again = AfterUpload(store, lambda key: None)
    shipped = ship_closed(local, again)
    assert [(s.name, s.uploaded) for s in shipped] == [
        (bundles[1].name, False), *((p.name, True) for p in bundles[2:])]
    assert again.uploads == [p.name for p in bundles[2:]]
    assert list(local.glob("*.warc.gz")) == []
    for name, data in contents.items():
        assert store.read(name, 0, len(data)) == data
        assert store.size(name) == len(data)


def test_a_corrupted_upload_keeps_the_local_bundle(store: ObjectStore, tamper: Tamper,
                                                   tmp_path: Path) -> None:
    local = tmp_path / "warcs"
    bundles = write_bundles(local)
    victim = bundles[1]
    data = victim.read_bytes()
    garbage = RNG.randbytes(len(data))

    def damage(key: str) -> None:
        if key == victim.name:
            tamper(key, garbage)

    with pytest.raises(ObjectMismatch, match=re.escape(victim.name)):
        ship_closed(local, AfterUpload(store, damage))
    assert victim.read_bytes() == data
    assert not bundles[0].exists()
    assert sorted(local.glob("*.warc.gz")) == bundles[1:]
    # The damage gone, the next run ships the rest.
    assert [s.name for s in ship_closed(local, store)] == [p.name for p in bundles[1:]]
    assert store.read(victim.name, 0, len(data)) == data


class Lying:
    """The store, whose ``stored`` says ``lie(truth)`` instead of what it holds."""

    def __init__(self, inner: ObjectStore, lie: Callable[[Fingerprint], Fingerprint | None]) -> None:
        self.inner = inner
        self.lie = lie

    def stored(self, key: str) -> Fingerprint | None:
        truth = self.inner.stored(key)
        return None if truth is None else self.lie(truth)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("lie", [
    lambda truth: Fingerprint(truth.size, None),  # a server that keeps no checksum
    lambda truth: Fingerprint(truth.size - 1, truth.checksum),  # the checksum sent, bytes missing
    lambda truth: None,  # nothing there after all
], ids=["no-checksum", "short", "absent"])
def test_an_answer_that_is_not_the_bytes_sent_never_deletes_the_local_file(
        store: ObjectStore, tmp_path: Path, lie: Callable[[Fingerprint], Fingerprint | None]) -> None:
    bundle = write_bundles(tmp_path / "warcs", exchanges=5)[0]
    data = bundle.read_bytes()
    with pytest.raises(ObjectMismatch, match=re.escape(bundle.name)):
        ship_file(bundle, Lying(store, lie), bundle.name)  # type: ignore[arg-type]
    assert bundle.read_bytes() == data


def test_spool_files_ship_too(store: ObjectStore, tmp_path: Path) -> None:
    outlinks = tmp_path / "outlinks"
    outlinks.mkdir()
    (outlinks / "0-20261122031500-00000.tsv").write_text("http://a.example/\t1\n")
    (outlinks / "0-20261122031505-00001.tsv.open").write_text("http://b.example/\t1\n")
    shipped = ship_closed(outlinks, store, pattern="*.tsv", under="outlinks/")
    assert [s.key for s in shipped] == ["outlinks/0-20261122031500-00000.tsv"]
    assert store.list("outlinks/") == ["outlinks/0-20261122031500-00000.tsv"]
    assert [p.name for p in outlinks.iterdir()] == ["0-20261122031505-00001.tsv.open"]


# -- a store away: unavailable, bounded, nothing local lost


def test_a_folder_that_cannot_take_a_file_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "gone").write_text("a file where the store's folder should be")
    store = FolderStore(tmp_path / "gone")
    bundle = write_bundles(tmp_path / "warcs", exchanges=3)[0]
    with pytest.raises(ObjectStoreUnavailable, match="the folder cannot take it"):
        ship_file(bundle, store, bundle.name)
    assert bundle.exists()


TIMEOUT = 0.5  # s3.timeout of the store away: a hung server holds each attempt this long
# One store call's worst case: two S3 requests (shipping asks for the object's head before it
# uploads), each 3 attempts with botocore's back-off between them (up to 1 s, then 2 s), plus
# slack for a loaded machine. Without s3.timeout a hung server held each attempt 60 s.
CALL_BOUND = 2 * (3 * TIMEOUT + 3.0) + 1.0


@pytest.mark.parametrize("fault", ["stop", "hang", "fail"])
def test_an_s3_store_away_is_unavailable_in_bounded_time_and_keeps_the_local_files(
        stoppable_bucket: Any, tmp_path: Path, fault: str) -> None:
    bucket, endpoint = stoppable_bucket.bucket, stoppable_bucket.endpoint
    store = S3Store.from_config(f"s3://{bucket.name}/p", S3Config(endpoint_url=bucket.endpoint,
                                                                  region="us-east-1", timeout=TIMEOUT))
    local = tmp_path / "warcs"
    first, second = write_bundles(local, exchanges=20)[:2]
    contents = {p.name: p.read_bytes() for p in (first, second)}
    ship_file(first, store, first.name)
    getattr(endpoint, fault)()
    calls: list[Callable[[], object]] = [  # a HEAD, a ranged GET, a listing
        lambda: ship_file(second, store, second.name), lambda: store.read(first.name, 0, 100), store.list]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(ObjectStoreUnavailable, match=r"the store (cannot be reached|is failing)"):
            call()
        assert time.monotonic() - started < CALL_BOUND
    assert second.read_bytes() == contents[second.name]
    endpoint.start()
    assert ship_closed(local, store)[0].name == second.name
    for name, data in contents.items():
        assert store.read(name, 0, len(data)) == data


def test_an_upload_cut_part_way_keeps_the_local_file_and_is_made_again(
        stoppable_bucket: Any, tmp_path: Path) -> None:
    """The endpoint stopped as the second part of a multipart upload goes out: nothing is
    completed under the key, the local file stays, and the next shipment uploads it whole."""
    bucket, endpoint = stoppable_bucket.bucket, stoppable_bucket.endpoint
    store = S3Store.from_config(f"s3://{bucket.name}/p", S3Config(endpoint_url=bucket.endpoint,
                                                                  region="us-east-1", timeout=TIMEOUT))
    store.part_size = MIN_PART_SIZE
    source = local_file(tmp_path, "big.warc.gz", 2 * MIN_PART_SIZE + 1234)
    data = source.read_bytes()
    parts = []

    def cut(**_: Any) -> None:
        parts.append(1)
        if len(parts) == 2:
            endpoint.stop()

    store.client.meta.events.register("before-send.s3.UploadPart", cut)
    with pytest.raises(ObjectStoreUnavailable):
        ship_file(source, store, source.name)
    store.client.meta.events.unregister("before-send.s3.UploadPart", cut)
    assert source.read_bytes() == data
    endpoint.start()
    assert store.stored(source.name) is None
    assert ship_file(source, store, source.name).uploaded
    assert not source.exists()
    assert store.read(source.name, 0, len(data)) == data


# -- S3 from the config, credentials from the environment


def test_s3_store_from_config(s3_bucket: Any, tmp_path: Path) -> None:
    store = S3Store.from_config(f"s3://{s3_bucket.name}/crawl/warcs/",
                                S3Config(endpoint_url=s3_bucket.endpoint, region="us-east-1"))
    assert store.prefix == "crawl/warcs"
    source = local_file(tmp_path, "a.warc.gz", 1000)
    put(store, source, source.name)
    listed = s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name)["Contents"]
    assert [item["Key"] for item in listed] == ["crawl/warcs/a.warc.gz"]
    assert store.location(source.name) == f"s3://{s3_bucket.name}/crawl/warcs/a.warc.gz"


def test_s3_without_credentials_fails_clearly(s3_bucket: Any, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    from botocore.exceptions import NoCredentialsError

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = S3Store.from_config(f"s3://{s3_bucket.name}/p", S3Config(endpoint_url=s3_bucket.endpoint))
    with pytest.raises(NoCredentialsError):
        store.size("anything")
