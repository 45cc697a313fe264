"""An object store in an S3 bucket (``store.objectstore``'s protocol): AWS S3 or any S3-compatible
server (MinIO, Ceph...). The verified writes, credentials, retries and what counts as away are
described in ``store.objectstore``'s docstring."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as NoConnection

from archiver.config import S3Config, parse_s3_url
from archiver.store.objectstore import (
    Fingerprint,
    NoSuchObject,
    ObjectRangeError,
    ObjectStoreUnavailable,
    check_key,
    check_range,
)
from archiver.store.warcindex import span

# 64 MiB parts: a 1 GiB bundle is 16 parts, far below S3's limit of 10,000, and one part in
# memory at a time stays small next to the crawler's other buffers.
PART_SIZE = 64 * 2**20
# S3 refuses parts under 5 MiB, the last one aside.
MIN_PART_SIZE = 5 * 2**20
# Attempts of one S3 call (botocore's standard mode), each bounded by s3.timeout.
ATTEMPTS = 3
# The S3 errors that say the store is failing rather than the request wrong (retried by botocore).
_SERVER_ERRORS = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout",
                  "Throttling", "ThrottlingException"}


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

    def local_folder(self) -> Path | None:
        return None

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
        check_range(offset, length)
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
