"""The global bitmap's slices: one Bloom bitmap each, each saved as its own file or object.

Slice ``p`` of ``P`` (archiver.links.slicing says which keys it holds) at generation ``g`` is
``slice-<p>of<P>-<g>.bloom``: under ``<root>/links/`` in the embedded mode (``SliceFiles``:
written to a temporary name, fsynced, renamed, the folder fsynced), or under ``links/`` in the
object store (``SliceObjects``: written to a scratch file, uploaded, and checked against what the
store then holds before anything names it). Each slice has ``expected_urls * bits_per_url / P``
bits (``slice_shape``). The links state records each slice's generation (the one its ledger
matches); a slice file of another generation or another slice count is stale (a checkpoint or a
reshard killed before its commit, or superseded by one) and ``remove_stale`` takes it away.

A slice store is picklable (a path, or an object store that pickles as its settings), because the
Dask engine sends it to its workers, which read and write the slices themselves. A slice at the
store's ``empty_at`` generation is empty and stored nowhere: 0 for a new state, and a reshard's
first generation, above every generation of the slices in force, so that no name is reused.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from archiver.queues.bloom import HEADER_SIZE, BloomBitmap, LayerHeader, optimal_hashes, read_header
from archiver.store.durable import fsync_directory
from archiver.store.objectstore import NoSuchObject, ObjectStore, open_object, put

OBJECT_PREFIX = "links/"
_NAME = re.compile(r"slice-(\d+)of(\d+)-(\d+)\.bloom")
_TEMPORARY = (".tmp", ".upload")


def slice_name(p: int, slice_count: int, generation: int) -> str:
    return f"slice-{p}of{slice_count}-{generation}.bloom"


def slice_shape(expected_urls: int, bits_per_url: int, slice_count: int) -> tuple[int, int]:
    """(bits, hashes) of a new slice: its share of the design load at ``bits_per_url`` bits."""
    return math.ceil(expected_urls * bits_per_url / slice_count), optimal_hashes(bits_per_url)


class SliceStore(Protocol):
    """Where the ``slice_count`` slices of one layout are kept (see the module docstring)."""

    @property
    def count(self) -> int: ...

    @property
    def bits(self) -> int:
        """Of a new slice."""

    @property
    def hashes(self) -> int:
        """Of a new slice."""

    @property
    def empty_at(self) -> int:
        """The generation at which a slice is empty and stored nowhere."""

    def identity(self) -> str:
        """The same text for every copy of this store (a worker's cache of slices is keyed by it)."""

    def location(self, p: int, generation: int) -> str:
        """Where slice ``p`` of ``generation`` lives, for messages."""

    def load(self, p: int, generation: int) -> BloomBitmap:
        """Slice ``p`` at ``generation`` (a new empty one at ``empty_at``); RuntimeError if it is
        missing or damaged."""

    def header(self, p: int, generation: int) -> LayerHeader:
        """The header of slice ``p`` at ``generation`` (read without its bits)."""

    def save(self, p: int, generation: int, bitmap: BloomBitmap) -> None:
        """Store ``bitmap`` durably as slice ``p`` at ``generation``, before a state names it."""

    def remove(self, p: int, generation: int) -> None:
        """Remove slice ``p`` of ``generation`` (nothing happens if there is none)."""

    def remove_stale(self, keep: Collection[str]) -> list[str]:
        """Remove every slice, of any layout, whose name is not in ``keep``, and the leftovers of
        saves cut short; the names removed."""


def _empty(store: SliceStore) -> BloomBitmap:
    return BloomBitmap(store.bits, store.hashes)


_REBUILD = "restore it, or rebuild every slice from the spool files done with `archiver links reshard`"


def _missing(where: str, p: int, generation: int) -> RuntimeError:
    return RuntimeError(f"{where} is missing: the links state says slice {p} is at generation "
                        f"{generation}; {_REBUILD}")


def _damaged(where: str, error: ValueError) -> RuntimeError:
    return RuntimeError(f"{where}: not a slice this batch wrote: {error}; {_REBUILD}")


@dataclass(frozen=True)
class SliceFiles:
    """Slices as files in ``directory`` (``<root>/links``)."""

    directory: Path
    count: int
    bits: int
    hashes: int
    empty_at: int = 0

    def identity(self) -> str:
        return f"{self.directory.resolve()}/slice-*of{self.count}"

    def path(self, p: int, generation: int) -> Path:
        return self.directory / slice_name(p, self.count, generation)

    def location(self, p: int, generation: int) -> str:
        return str(self.path(p, generation))

    def load(self, p: int, generation: int) -> BloomBitmap:
        if generation == self.empty_at:
            return _empty(self)
        path = self.path(p, generation)
        try:
            with path.open("rb") as f:
                return BloomBitmap.read(f)
        except FileNotFoundError:
            raise _missing(str(path), p, generation) from None
        except ValueError as e:
            raise _damaged(str(path), e) from None

    def header(self, p: int, generation: int) -> LayerHeader:
        path = self.path(p, generation)
        try:
            with path.open("rb") as f:
                return read_header(f.read(HEADER_SIZE))
        except FileNotFoundError:
            raise _missing(str(path), p, generation) from None
        except ValueError as e:
            raise _damaged(str(path), e) from None

    def save(self, p: int, generation: int, bitmap: BloomBitmap) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(p, generation)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as f:
            bitmap.write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_directory(self.directory)

    def remove(self, p: int, generation: int) -> None:
        self.path(p, generation).unlink(missing_ok=True)

    def remove_stale(self, keep: Collection[str]) -> list[str]:
        removed = []
        if self.directory.is_dir():
            for path in sorted(self.directory.glob("slice-*")):
                if path.name not in keep and (_NAME.fullmatch(path.name)
                                                  or path.name.endswith(_TEMPORARY)):
                    path.unlink()
                    removed.append(path.name)
        return removed


@dataclass(frozen=True)
class SliceObjects:
    """Slices as objects under ``links/`` in ``objects``; ``scratch`` is a local folder for a
    slice on its way up."""

    objects: ObjectStore
    scratch: Path
    count: int
    bits: int
    hashes: int
    empty_at: int = 0

    def identity(self) -> str:
        return f"{self.objects.location(OBJECT_PREFIX + 'slice')}-*of{self.count}"

    def key(self, p: int, generation: int) -> str:
        return OBJECT_PREFIX + slice_name(p, self.count, generation)

    def location(self, p: int, generation: int) -> str:
        return self.objects.location(self.key(p, generation))

    def load(self, p: int, generation: int) -> BloomBitmap:
        if generation == self.empty_at:
            return _empty(self)
        try:
            with open_object(self.objects, self.key(p, generation)) as f:
                return BloomBitmap.read(f)
        except NoSuchObject:
            raise _missing(self.location(p, generation), p, generation) from None
        except ValueError as e:
            raise _damaged(self.location(p, generation), e) from None

    def header(self, p: int, generation: int) -> LayerHeader:
        key = self.key(p, generation)
        try:
            return read_header(self.objects.read(key, 0, HEADER_SIZE))
        except NoSuchObject:
            raise _missing(self.location(p, generation), p, generation) from None
        except ValueError as e:
            raise _damaged(self.location(p, generation), e) from None

    def save(self, p: int, generation: int, bitmap: BloomBitmap) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        name = slice_name(p, self.count, generation)
        local = self.scratch / f"{name}.{os.getpid()}.upload"
        try:
            with local.open("wb") as f:
                bitmap.write(f)
            put(self.objects, local, OBJECT_PREFIX + name)
        finally:
            local.unlink(missing_ok=True)

    def remove(self, p: int, generation: int) -> None:
        self.objects.delete(self.key(p, generation))

    def remove_stale(self, keep: Collection[str]) -> list[str]:
        removed = []
        for key in self.objects.list(OBJECT_PREFIX + "slice-"):
            name = key[len(OBJECT_PREFIX):]
            if name not in keep and _NAME.fullmatch(name):
                self.objects.delete(key)
                removed.append(name)
        if self.scratch.is_dir():
            for leftover in self.scratch.glob("slice-*.upload"):
                leftover.unlink()
        return removed
