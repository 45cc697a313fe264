"""Object storage for closed files (WARC bundles, spool files): a local folder or an S3 bucket.

An :class:`ObjectStore` holds objects under keys (``/``-separated, relative to the store). It is
written to once per object, from a local file, and read by byte range. Two implementations:
:class:`FolderStore` (a folder on this machine, as ``warcs/`` is today) and
``store.s3.objectstore.S3Store`` (a bucket and prefix on AWS S3 or any S3-compatible server:
MinIO, Ceph...), in its own module so that only archives in object storage load botocore.

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
call at most ``store.s3.objectstore.ATTEMPTS`` times that, never forever.

**Away**: a store that cannot be reached (connection refused or cut, a timeout) or answers with
a server error (5xx, throttling) once botocore's retries are spent raises
:class:`ObjectStoreUnavailable`, and so does a folder store that cannot take a file (its disk
full, its mount gone): waiting may help. Other errors (no credentials, access denied, no such
bucket) stay botocore's: a configuration to fix.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from archiver.store.durable import fsync_directory
from archiver.store.warcindex import span

_COPY_CHUNK = 1 << 20


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

    def local_folder(self) -> Path | None:
        """The folder on this machine whose files are the objects, if there is one."""


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


def check_range(offset: int, length: int) -> None:
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

    def local_folder(self) -> Path | None:
        return self.directory

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
        check_range(offset, length)
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
        check_range(offset, length)
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
