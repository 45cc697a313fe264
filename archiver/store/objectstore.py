"""Object storage for closed files (WARC bundles, spool files): a local folder or an S3 bucket.

An :class:`ObjectStore` holds objects under keys (``/``-separated, relative to the store). It is
written to once per object, from a local file, and read by byte range. Two implementations:
:class:`FolderStore` (a folder on this machine, as ``warcs/`` is today) and :class:`S3Store`
(a bucket and prefix on AWS S3 or any S3-compatible server: MinIO, Ceph...).

**Verified** writes (:func:`put`): while a file is read for upload, its size and checksum are
computed; after the upload the store is asked what it holds under the key, and both must match,
else :class:`ObjectMismatch` is raised and nothing local is touched. The checksum is SHA-256:

- a folder reports the SHA-256 of the file it holds (read back from disk);
- S3 reports the ``x-amz-checksum-sha256`` it keeps with the object (``ChecksumMode=ENABLED``).
  A file up to ``part_size`` goes in one PutObject with its SHA-256 (a full-object checksum);
  a larger one in a multipart upload of ``part_size`` parts, each with its SHA-256, whose object
  checksum is the SHA-256 of the parts' digests followed by ``-<parts>`` (S3's composite
  checksum). AWS and MinIO recompute each checksum from the bytes received and refuse a
  mismatch (``BadDigest``), so a matching report proves the bytes arrived intact. moto (the
  test server) keeps the checksum as sent without recomputing it (nor Content-MD5), so there the
  check proves the object is the one uploaded and not replaced, truncated or missing, which is
  what the contract tests exercise. The MD5 ETag was not chosen: it is not an MD5 for SSE-KMS
  objects, so it cannot be relied on across S3 deployments.

Credentials never come from archiver's config: boto3 reads them as every AWS client does (the
environment, ``~/.aws`` files, an instance or container role). Retries are botocore's
``standard`` mode (exponential back-off with jitter on throttling and transient errors), each
attempt bounded by ``s3.timeout`` to connect and to wait for each read: a hung server costs a
call at most ``ATTEMPTS`` times that, never forever.

**Away**: a store that cannot be reached (connection refused or cut, a timeout) or answers with
a server error (5xx, throttling) once botocore's retries are spent raises
:class:`ObjectStoreUnavailable`, and so does a folder store that cannot take a file (its disk
full, its mount gone): waiting may help. Other errors (no credentials, access denied, no such
bucket) stay botocore's: a configuration to fix.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as NoConnection

from archiver.config import S3Config, parse_s3_url
from archiver.store.durable import fsync_directory
from archiver.store.warcindex import span

# 64 MiB parts: a 1 GiB bundle is 16 parts, far below S3's limit of 10,000, and one part in
# memory at a time stays small next to the crawler's other buffers.
PART_SIZE = 64 * 2**20
# S3 refuses parts under 5 MiB, the last one aside.
MIN_PART_SIZE = 5 * 2**20
_COPY_CHUNK = 1 << 20
# Attempts of one S3 call (botocore's standard mode), each bounded by s3.timeout.
ATTEMPTS = 3
# The S3 errors that say the store is failing rather than the request wrong (retried by botocore).
_SERVER_ERRORS = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout",
                  "Throttling", "ThrottlingException"}


class ObjectStoreError(Exception):
    """An object store could not do what was asked (the message says which object and why)."""


class NoSuchObject(ObjectStoreError):
    """No object under that key."""


class ObjectRangeError(ObjectStoreError):
    """A byte range that the object does not hold entirely."""


class ObjectMismatch(ObjectStoreError):
    """After an upload, the store holds other bytes than the local file (size or checksum)."""


class ObjectStoreUnavailable(ObjectStoreError):
    """The store cannot be reached or is failing (see the module docstring): try again later.
    ``reason`` says which, in a few words; the message adds where and the error seen."""

    def __init__(self, where: str, reason: str, error: BaseException) -> None:
        super().__init__(f"{where}: {reason}: {error}")
        self.reason = reason


@dataclass(frozen=True)
class Fingerprint:
    """An object's size and its checksum as this kind of store states it."""

    size: int
    checksum: str | None


class ObjectStore(Protocol):
    """Objects under keys: written once from a local file, read by byte range."""

    def upload(self, source: Path, key: str) -> Fingerprint:
        """Store the file ``source`` under ``key`` (unverified: see :func:`put`); the size and
        checksum of the bytes sent, computed while reading them."""

    def fingerprint(self, source: Path) -> Fingerprint:
        """What :meth:`stored` would say of an exact copy of the local file ``source``."""

    def stored(self, key: str) -> Fingerprint | None:
        """What the store holds under ``key``: its size and checksum; None if nothing."""

    def size(self, key: str) -> int | None:
        """The object's size in bytes; None if there is no object under ``key``."""

    def read(self, key: str, offset: int, length: int) -> bytes:
        """Exactly ``length`` bytes from ``offset``; ObjectRangeError if the object ends first,
        NoSuchObject if there is none."""

    def open_range(self, key: str, offset: int, length: int) -> BinaryIO:
        """``length`` bytes from ``offset`` as a file read as it goes (one streamed request, or a
        file read in place), never held whole; NoSuchObject if there is no object. An object
        that ends first gives fewer bytes."""

    def list(self, prefix: str = "") -> list[str]:
        """Every key starting with ``prefix``, sorted."""

    def delete(self, key: str) -> None:
        """Remove the object (nothing happens if there is none)."""

    def location(self, key: str) -> str:
        """Where the object lives, for messages (a path, an ``s3://`` URL)."""


def put(store: ObjectStore, source: Path, key: str) -> Fingerprint:
    """Upload ``source`` under ``key``, then check that the store holds exactly its bytes.

    ObjectMismatch if it does not (the local file is left as it is, the object too, for a look).
    """
    sent = store.upload(source, key)
    held = store.stored(key)
    if held != sent:
        raise ObjectMismatch(f"{store.location(key)}: the store holds {_describe(held)} after "
                             f"uploading {source} ({_describe(sent)})")
    return sent


def _describe(fingerprint: Fingerprint | None) -> str:
    if fingerprint is None:
        return "nothing"
    return f"{fingerprint.size} bytes, checksum {fingerprint.checksum or 'none'}"


def check_key(key: str) -> str:
    """``key`` if it is a plain relative key: ``/``-separated names, none empty or starting with
    ``.`` (no ``..``, no hidden upload files), no control characters."""
    if not key or any(not part or part.startswith(".") for part in key.split("/")) \
            or any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise ValueError(f"bad object key {key!r}")
    return key


def _check_range(offset: int, length: int) -> None:
    if offset < 0 or length < 1:
        raise ValueError(f"bad byte range: offset {offset}, length {length}")


class FolderStore:
    """Objects as files under a local folder (a key's ``/`` are subfolders)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, key: str) -> Path:
        return self.directory / check_key(key)

    def location(self, key: str) -> str:
        return str(self._path(key))

    def upload(self, source: Path, key: str) -> Fingerprint:
        """Copy into a hidden file beside the target, fsync, then rename over it: a crash leaves
        the old object or the new one, never a mix (a stray hidden file at worst). A folder that
        cannot take it (full, gone) is ObjectStoreUnavailable; the source's own errors are not."""
        target = self._path(key)
        partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.upload")
        digest = hashlib.sha256()
        size = 0
        with source.open("rb") as src:
            with _taking(target):
                target.parent.mkdir(parents=True, exist_ok=True)
                dst = partial.open("xb")
            try:
                with dst:
                    while chunk := src.read(_COPY_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        with _taking(target):
                            dst.write(chunk)
                    with _taking(target):
                        dst.flush()
                        os.fsync(dst.fileno())
                with _taking(target):
                    partial.rename(target)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
        with _taking(target):
            fsync_directory(target.parent)
        return Fingerprint(size, "sha256:" + digest.hexdigest())

    def fingerprint(self, source: Path) -> Fingerprint:
        return _file_sha256(source)

    def stored(self, key: str) -> Fingerprint | None:
        path = self._path(key)
        return _file_sha256(path) if path.is_file() else None

    def size(self, key: str) -> int | None:
        path = self._path(key)
        return path.stat().st_size if path.is_file() else None

    def read(self, key: str, offset: int, length: int) -> bytes:
        _check_range(offset, length)
        path = self._path(key)
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read(length)
        except FileNotFoundError:
            raise NoSuchObject(f"{path}: no such object") from None
        if len(data) != length:
            raise ObjectRangeError(f"{path}: bytes {offset}-{offset + length - 1} asked, the object "
                                   f"holds {path.stat().st_size} bytes")
        return data

    def open_range(self, key: str, offset: int, length: int) -> BinaryIO:
        _check_range(offset, length)
        path = self._path(key)
        try:
            file = path.open("rb")
        except FileNotFoundError:
            raise NoSuchObject(f"{path}: no such object") from None
        file.seek(offset)
        return span(file, length)

    def list(self, prefix: str = "") -> list[str]:
        keys = []
        for folder, subfolders, files in os.walk(self.directory):
            subfolders[:] = [d for d in subfolders if not d.startswith(".")]
            base = Path(folder).relative_to(self.directory).as_posix()
            keys += [name if base == "." else f"{base}/{name}"
                     for name in files if not name.startswith(".")]
        return sorted(k for k in keys if k.startswith(prefix))

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        fsync_directory(path.parent)


@contextlib.contextmanager
def _taking(target: Path) -> Iterator[None]:
    """An OSError of the folder that takes ``target`` as ObjectStoreUnavailable."""
    try:
        yield
    except OSError as e:
        raise ObjectStoreUnavailable(str(target), "the folder cannot take it", e) from e


def _file_sha256(path: Path) -> Fingerprint:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(_COPY_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return Fingerprint(size, "sha256:" + digest.hexdigest())


def s3_client(endpoint_url: str = "", region: str = "", timeout: float = S3Config.timeout) -> Any:
    """A boto3 S3 client for ``endpoint_url`` (empty: AWS) with the standard credential chain,
    standard-mode retries (``ATTEMPTS``, each waiting at most ``timeout`` seconds to connect and
    for each read), and path-style addressing for other endpoints (MinIO and most
    S3-compatible servers have no per-bucket host names)."""
    # Imported here: boto3 and botocore.config take about 0.25 s to import, which only
    # archives in object storage should pay.
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": ATTEMPTS},
        connect_timeout=timeout,
        read_timeout=timeout,
        # Checksums are sent explicitly (SHA-256, see the module docstring); botocore's own
        # default CRC32 headers are refused by some S3-compatible servers.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        s3={"addressing_style": "path"} if endpoint_url else None,
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint_url or None, region_name=region or None, config=config)


class S3Store:
    """Objects in an S3 bucket under a prefix (``<prefix>/<key>``)."""

    def __init__(self, client: Any, bucket: str, prefix: str = "", *, part_size: int = PART_SIZE) -> None:
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"part_size must be at least {MIN_PART_SIZE} bytes (S3's minimum)")
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.part_size = part_size
        self.opened_from: tuple[str, S3Config] | None = None  # what from_config was given

    @classmethod
    def from_config(cls, url: str, s3: S3Config) -> S3Store:
        """The store ``warc.store = "s3://bucket/prefix"`` names, with the ``[s3]`` section."""
        bucket, prefix = parse_s3_url(url)
        store = cls(s3_client(s3.endpoint_url, s3.region, s3.timeout), bucket, prefix)
        store.opened_from = (url, s3)
        return store

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what it was opened from (a client holds connections): a process that
        unpickles it opens the store once and shares it (the links batch's Dask workers)."""
        if self.opened_from is None:
            raise TypeError("only an S3Store opened by S3Store.from_config can be pickled")
        return _reopened, self.opened_from

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    @contextlib.contextmanager
    def _reached(self, where: str) -> Iterator[None]:
        """botocore's errors that say the store is away or failing, its retries spent, as
        ObjectStoreUnavailable (``where``: the object or prefix asked for)."""
        try:
            yield
        except (NoConnection, HTTPClientError) as e:  # refused, cut, timed out
            raise ObjectStoreUnavailable(where, "the store cannot be reached", e) from e
        except ClientError as e:
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status >= 500 or e.response.get("Error", {}).get("Code") in _SERVER_ERRORS:
                raise ObjectStoreUnavailable(where, "the store is failing", e) from e
            raise

    def upload(self, source: Path, key: str) -> Fingerprint:
        full = self._key(key)
        size = source.stat().st_size
        with source.open("rb") as f, self._reached(self.location(key)):
            if size <= self.part_size:
                data = f.read()
                checksum = _b64sha256(data)
                # The algorithm named as well as the value: moto keeps a checksum only then.
                self.client.put_object(Bucket=self.bucket, Key=full, Body=data,
                                       ChecksumAlgorithm="SHA256", ChecksumSHA256=checksum)
                return Fingerprint(len(data), checksum)
            return self._upload_parts(f, full)

    def _upload_parts(self, f: BinaryIO, full: str) -> Fingerprint:
        upload_id = self.client.create_multipart_upload(
            Bucket=self.bucket, Key=full, ChecksumAlgorithm="SHA256")["UploadId"]
        parts: list[dict[str, Any]] = []
        digests = hashlib.sha256()
        size = 0
        try:
            while data := f.read(self.part_size):
                digest = hashlib.sha256(data).digest()
                digests.update(digest)
                size += len(data)
                checksum = base64.b64encode(digest).decode("ascii")
                number = len(parts) + 1
                answer = self.client.upload_part(Bucket=self.bucket, Key=full, UploadId=upload_id,
                                                 PartNumber=number, Body=data, ChecksumSHA256=checksum)
                parts.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumSHA256": checksum})
            self.client.complete_multipart_upload(Bucket=self.bucket, Key=full, UploadId=upload_id,
                                                  MultipartUpload={"Parts": parts})
        except BaseException:
            self._abort(full, upload_id)
            raise
        return Fingerprint(size, _composite(digests.digest(), len(parts)))

    def _abort(self, full: str, upload_id: str) -> None:
        """Drop the parts of a failed upload (best effort: a lifecycle rule catches the rest)."""
        with contextlib.suppress(BotoCoreError, ClientError):
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=full, UploadId=upload_id)

    def fingerprint(self, source: Path) -> Fingerprint:
        size = source.stat().st_size
        with source.open("rb") as f:
            if size <= self.part_size:
                data = f.read()
                return Fingerprint(len(data), _b64sha256(data))
            digests = hashlib.sha256()
            parts = size = 0
            while data := f.read(self.part_size):
                digests.update(hashlib.sha256(data).digest())
                parts += 1
                size += len(data)
        return Fingerprint(size, _composite(digests.digest(), parts))

    def _head(self, key: str, **extra: Any) -> dict[str, Any] | None:
        try:
            with self._reached(self.location(key)):
                head: dict[str, Any] = self.client.head_object(Bucket=self.bucket, Key=self._key(key),
                                                               **extra)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return head

    def stored(self, key: str) -> Fingerprint | None:
        head = self._head(key, ChecksumMode="ENABLED")
        if head is None:
            return None
        checksum = head.get("ChecksumSHA256")
        etag = head.get("ETag", "").strip('"')
        # A composite checksum carries "-<parts>" on AWS; some servers (moto) leave it out, and
        # the multipart ETag ("<md5>-<parts>") still gives the part count.
        if checksum and "-" not in checksum and "-" in etag:
            checksum += "-" + etag.rsplit("-", 1)[1]
        return Fingerprint(head["ContentLength"], checksum)

    def size(self, key: str) -> int | None:
        head = self._head(key)
        return None if head is None else int(head["ContentLength"])

    def read(self, key: str, offset: int, length: int) -> bytes:
        with self.open_range(key, offset, length) as opened, self._reached(self.location(key)):
            data = opened.read()
        if len(data) != length:
            raise ObjectRangeError(f"{self.location(key)}: bytes {offset}-{offset + length - 1} "
                                   f"asked, the object holds {len(data)} of them")
        return data

    def open_range(self, key: str, offset: int, length: int) -> BinaryIO:
        """One GET of the range, its body read from the connection as it is asked for."""
        _check_range(offset, length)
        try:
            with self._reached(self.location(key)):
                answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key),
                                                Range=f"bytes={offset}-{offset + length - 1}")
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code")
            if code == "NoSuchKey":
                raise NoSuchObject(f"{self.location(key)}: no such object") from None
            if code == "InvalidRange":
                return io.BytesIO()
            raise
        return span(answer["Body"], length)

    def list(self, prefix: str = "") -> list[str]:
        base = f"s3://{self.bucket}/{self.prefix}/" if self.prefix else f"s3://{self.bucket}/"
        with self._reached(base + prefix):
            return sorted(self._keys(prefix))

    def _keys(self, prefix: str) -> Iterator[str]:
        base = f"{self.prefix}/" if self.prefix else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                      Prefix=base + prefix)
        for page in pages:
            for item in page.get("Contents", []):
                yield item["Key"][len(base):]

    def delete(self, key: str) -> None:
        with self._reached(self.location(key)):
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))


@functools.cache
def _reopened(url: str, s3: S3Config) -> S3Store:
    return S3Store.from_config(url, s3)


def _b64sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def _composite(digest_of_digests: bytes, parts: int) -> str:
    """S3's composite checksum: the SHA-256 of the parts' SHA-256 digests, then ``-<parts>``."""
    return base64.b64encode(digest_of_digests).decode("ascii") + f"-{parts}"


class _ObjectRaw(io.RawIOBase):
    """An object read as a seekable file, one byte-range request per buffer refill."""

    def __init__(self, store: ObjectStore, key: str, size: int) -> None:
        self._store, self._key, self._size, self._at = store, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = max(base + offset, 0)
        return self._at

    def readinto(self, buffer: Any) -> int:
        length = min(len(buffer), self._size - self._at)
        if length <= 0:
            return 0
        data = self._store.read(self._key, self._at, length)
        buffer[:length] = data
        self._at += length
        return length


def open_object(store: ObjectStore, key: str, *, buffer_size: int = 8 * 2**20) -> BinaryIO:
    """The object under ``key`` as a read-only, seekable binary file (NoSuchObject if none)."""
    size = store.size(key)
    if size is None:
        raise NoSuchObject(f"{store.location(key)}: no such object")
    return io.BufferedReader(_ObjectRaw(store, key, size), buffer_size)
