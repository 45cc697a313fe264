"""The steps of one checkpoint, as the engines run them (archiver.links.engine runs them in this
process; the Dask engine runs the same functions on its workers).

A checkpoint takes the next group of pending spool files: files in spool order, grouped until
their line count reaches ``links.checkpoint_urls`` (``group_end``), so every engine groups alike.
For that group:

1. ``read_spool_file`` (per file, in parallel): the file's columns (archiver.links.columns), its
   keys hashed in bulk, straight from the columns (``bloomkernel.hash_strings``, ``hash_pairs``),
   and routed to their slices (archiver.links.slicing). The ``ReadFile`` stays where it was
   read; only
2. ``slice_keys`` (per file and slice: two uint64 arrays) travels to
3. ``test_slice`` (per slice, one task at a time): the slice at the state's generation, its keys
   tested and set file by file in file order, saved durably as the next generation (the local
   engine runs its pieces, ``open_slice``, ``test_keys`` for each file as soon as it is read,
   then ``keep_slice``);
4. ``assemble`` (per file): the flags back in line order, the file's new URLs (in line order, each
   with its site) and its in-link increments, and each site's lowest hop count and highest
   priority (``FileResult``, what the driver, archiver.links.batch, merges in file order:
   ``inbox_lines`` groups the group's new URLs by site once, and the driver commits).

Every argument and result here is picklable. ``test_slice`` keeps the slices it saved in a cache of
its process, so a worker does not read a slice again at the next checkpoint; it always starts from
the generation it is given, so running it again (a worker lost, the task retried) gives the same
slice and the same flags.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from archiver.links.columns import read_columns, string_buffers
from archiver.links.slices import SliceStore
from archiver.links.slicing import slices_of
from archiver.logs import event
from archiver.queues.bloom import BloomBitmap
from archiver.queues.embedded.crawlqueue import QueueNames
from archiver.queues.interfaces import SpoolFiles
from archiver.queues.sitechanges import SiteChanges

if TYPE_CHECKING:
    from numpy.typing import NDArray

log = logging.getLogger("archiver.links.steps")

# The module numba imports to probe for BLAS (see load_kernels).
BLAS_PROBE = "scipy.linalg.cython_blas"
# An inbox line: the depth (0: a link from another site) and a tab, the URL, a newline.
_HEAD, _TAIL = np.frombuffer(b"0\t", dtype=np.uint8), np.frombuffer(b"\n", dtype=np.uint8)
# One load at a time (`links run` loads ahead while its engine may load too): the second finds the
# loops loaded, and only the first says it compiled them.
_loading = threading.Lock()
# Slices this process saved last, by (store identity, slice): (generation, bitmap).
_slices: dict[tuple[str, int], tuple[int, BloomBitmap]] = {}


@dataclass(frozen=True)
class SpoolSource:
    """Where spool files are read, and the crawl queues' rule for sites (``queue_names``; None:
    any site may have a crawl queue)."""

    files: SpoolFiles
    queue_names: QueueNames | None = None


@dataclass(frozen=True)
class KeyHashes:
    """One file's keys in one slice: the halves of their hashes, its URLs' keys (``urls`` of
    them, in line order) before its site pairs' keys (in order of first appearance)."""

    lo: NDArray[np.uint64]
    hi: NDArray[np.uint64]
    urls: int


@dataclass(frozen=True)
class ReadFile:
    """One spool file, read and hashed: what ``assemble`` needs, and each slice's keys."""

    name: str
    location: str
    lines: int
    bad: int
    reports: list[tuple[int, str]]  # (line number, reason) of the first bad lines
    urls: pa.Array  # the good lines' normalised URLs, in line order
    targets: NDArray[np.intp]  # each URL's site, an index into origins
    origins: pa.Array  # the sites (strings)
    pair_targets: NDArray[np.intp]  # each distinct site pair's target, an index into origins
    site_rows: NDArray[np.intp]  # the sites the file's good lines link to, indexes into origins
    site_hops: NDArray[np.int64]  # each one's lowest hop count in the file
    site_priority: NDArray[np.float64]  # each one's highest priority in the file
    url_rows: list[NDArray[np.intp]]  # per slice: its URLs, as indexes into urls
    pair_rows: list[NDArray[np.intp]]  # per slice: its site pairs, as indexes into pair_targets
    keys: list[KeyHashes]  # per slice


@dataclass(frozen=True)
class FileResult:
    """What one spool file added, for the driver's checkpoint."""

    name: str
    location: str
    lines: int
    bad: int
    reports: list[tuple[int, str]]
    new_urls: pa.Array  # (strings) in line order
    new_url_sites: NDArray[np.intp]  # each one's site, an index into origins
    origins: pa.Array  # (strings) the sites of the file's URLs
    linked: NDArray[np.intp]  # the sites that gained in-links, as indexes into origins
    linked_counts: NDArray[np.intp]  # how many new distinct linking sites each gained
    site_rows: NDArray[np.intp]  # every site the file's good lines link to, indexes into origins
    site_hops: NDArray[np.int64]  # each one's lowest hop count in the file
    site_priority: NDArray[np.float64]  # each one's highest priority in the file
    new_pairs: int
    new_keys: list[int]  # per slice: keys new to it (URLs and pairs)

    @property
    def new_url_count(self) -> int:
        return len(self.new_urls)


@dataclass(frozen=True)
class SiteNumbers:
    """Every site of a checkpoint's files under one numbering: its rank in key order (the order
    the databases take their rows fastest in)."""

    names: NDArray[np.object_]  # (strings) by rank
    starts: NDArray[np.intp]  # where each file's origins begin in ``of_origin``
    of_origin: NDArray[np.intp]  # the rank of each file's origins, file after file

    def ranks(self, rows: list[NDArray[np.intp]]) -> NDArray[np.intp]:
        """Each file's ``rows`` (indexes into its origins) as ranks, file after file."""
        return np.concatenate([self.of_origin[start + r]
                               for start, r in zip(self.starts, rows, strict=True)])


def site_numbers(results: list[FileResult]) -> SiteNumbers:
    """The files' ``SiteNumbers``."""
    if not results:
        nothing = np.zeros(0, dtype=np.intp)
        return SiteNumbers(names=np.zeros(0, dtype=object), starts=nothing, of_origin=nothing)
    sites = pa.concat_arrays([r.origins for r in results]).dictionary_encode()
    key_order = _numpy(pc.sort_indices(sites.dictionary))
    rank = np.empty(len(key_order), dtype=np.intp)
    rank[key_order] = np.arange(len(key_order))
    return SiteNumbers(names=np.array(sites.dictionary.take(key_order).to_pylist(), dtype=object),
                       starts=np.cumsum([0, *(len(r.origins) for r in results[:-1])]),
                       of_origin=rank[_numpy(sites.indices)])


def site_changes(results: list[FileResult], numbers: SiteNumbers) -> SiteChanges:
    """The files' ``SiteChanges`` (``numbers``: their ``site_numbers``), merged in numpy: every
    site their good lines link to, in key order."""
    names = numbers.names
    if not results:
        return SiteChanges(origins=names, inlinks=np.zeros(0, dtype=np.int64),
                           woken=np.zeros(0, dtype=bool), hops=np.zeros(0, dtype=np.int64),
                           priority=np.zeros(0))
    gained = np.zeros(len(names), dtype=np.int64)
    np.add.at(gained, numbers.ranks([r.linked for r in results]),
              np.concatenate([r.linked_counts for r in results]))
    each_file_marks = numbers.ranks([r.site_rows for r in results])
    hops = np.full(len(names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(hops, each_file_marks, np.concatenate([r.site_hops for r in results]))
    priority = np.full(len(names), -np.inf)
    np.maximum.at(priority, each_file_marks, np.concatenate([r.site_priority for r in results]))
    woken = np.zeros(len(names), dtype=bool)
    woken[numbers.ranks([r.new_url_sites for r in results])] = True
    # A site that gained in-links or new URLs is one the files link to (else it reads as hops 0,
    # priority 0); a file's origins may also hold sites whose lines all went bad: left out.
    marked = np.bincount(each_file_marks, minlength=len(names)) > 0
    hops[~marked], priority[~marked] = 0, 0.0
    kept = np.flatnonzero(marked | woken | (gained > 0))
    return SiteChanges(origins=names[kept], inlinks=gained[kept], woken=woken[kept],
                       hops=hops[kept], priority=priority[kept])


def inbox_lines(results: list[FileResult], numbers: SiteNumbers) -> dict[str, memoryview]:
    """The files' new URLs as each site's inbox lines (``0<TAB>url\\n``, depth 0: the crawl
    queues' ``append_lines``), in file and line order, the sites in key order (``numbers``:
    the files' ``site_numbers``); views into one buffer, written by a compiled loop."""
    if not sum(r.new_url_count for r in results):
        return {}
    site_of = numbers.ranks([r.new_url_sites for r in results])
    from archiver.queues.bloomkernel import place_lines  # numba: only where the batch runs

    # A stable sort keeps file and line order within a site; of 16-bit keys it is a radix sort.
    names = numbers.names
    order = np.argsort(site_of.astype(np.uint16) if len(names) <= 1 << 16 else site_of,
                       kind="stable")
    columns = [string_buffers(r.new_urls) for r in results]
    sizes = np.concatenate([np.diff(offsets) for _, offsets in columns]) + len(_HEAD) + len(_TAIL)
    ends = np.cumsum(sizes[order])
    at = np.empty(len(order), dtype=np.int64)
    at[order] = ends - sizes[order]  # where each URL's line goes: in site order, then as read
    text = np.empty(int(ends[-1]), dtype=np.uint8)
    first = 0
    for data, offsets in columns:
        place_lines(data, offsets, at[first:first + len(offsets) - 1], _HEAD, _TAIL, text)
        first += len(offsets) - 1
    counts = np.bincount(site_of, minlength=len(names))
    present = np.flatnonzero(counts)
    site_ends = ends[np.cumsum(counts[present]) - 1].tolist()
    view = text.data  # (a memoryview of it)
    return {site: view[start:end] for site, start, end
            in zip(names[present].tolist(), [0, *site_ends[:-1]], site_ends, strict=True)}


def group_end(line_counts: list[int], limit: int) -> int | None:
    """How many of these files (in spool order, with their line counts) make the next
    checkpoint's group: the fewest whose lines reach ``limit``; None if they all fall short
    (the group may take more files)."""
    lines = 0
    for taken, count in enumerate(line_counts, 1):
        lines += count
        if lines >= limit:
            return taken
    return None


def read_spool_file(spool: SpoolSource, name: str, slice_count: int) -> ReadFile:
    """Read, check and hash one spool file, its keys routed to the ``slice_count`` slices."""
    rule = spool.queue_names
    columns = read_columns(spool.files.read(name), rule, fit=rule.ALWAYS_FIT if rule else "")
    # numba: where the batch runs; imported here, so that the first reads run while it loads
    from archiver.queues.bloomkernel import hash_pairs, hash_strings

    url_hashes = hash_strings(*string_buffers(columns.urls))
    pair_hashes = hash_pairs(string_buffers(columns.linking_sites), columns.pair_sources,
                             string_buffers(columns.origins), columns.pair_targets)
    url_rows = _by_slice(slices_of(url_hashes[:, 0], slice_count), slice_count)
    pair_rows = _by_slice(slices_of(pair_hashes[:, 0], slice_count), slice_count)
    keys = [KeyHashes(lo=np.concatenate((url_hashes[u, 0], pair_hashes[q, 0])),
                      hi=np.concatenate((url_hashes[u, 1], pair_hashes[q, 1])), urls=len(u))
            for u, q in zip(url_rows, pair_rows, strict=True)]
    return ReadFile(name=name, location=spool.files.location(name), lines=columns.lines,
                    bad=columns.bad, reports=columns.reports, urls=columns.urls,
                    targets=columns.targets, origins=columns.origins,
                    pair_targets=columns.pair_targets, site_rows=columns.site_rows,
                    site_hops=columns.site_hops,
                    site_priority=columns.site_priority, url_rows=url_rows, pair_rows=pair_rows,
                    keys=keys)


def load_kernels() -> None:
    """Import and load the compiled loops the steps use (archiver.queues.bloomkernel), as their
    first use would: about 0.4 s of a process's start, mostly holding the GIL.

    As numba's CPU target loads, it probes for BLAS (for ``np.dot`` and ``np.linalg`` in compiled
    code, which no loop here uses) by importing ``scipy.linalg``: 0.15-0.2 s, and OpenBLAS's
    threads. Unless something imported it already, a ``None`` in ``sys.modules`` makes that one
    import fail at once (Python's rule for such an entry) while the loops load; it goes after.

    Loops not in numba's cache yet are compiled (the first run after an install: several seconds)
    and logged (``links-loops-compiled``): at every run, numba cannot write its cache."""
    with _loading:
        _load_kernels()


def _load_kernels() -> None:
    started = time.monotonic()
    skip_probe = BLAS_PROBE not in sys.modules
    if skip_probe:
        sys.modules[BLAS_PROBE] = None  # type: ignore[assignment]  # (typeshed omits None)
    try:
        from archiver.queues.bloomkernel import (
            cache_path,
            compilations,
            first_appearances,
            hash_pairs,
            hash_strings,
            origin_lengths,
            place_lines,
            test_and_set,
        )

        compiled = compilations()
        text, offsets = np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)
        rows = np.zeros(0, dtype=np.intp)
        hash_strings(text, offsets)
        hash_pairs((text, offsets), rows, (text, offsets), rows)
        origin_lengths(text, offsets)
        first_appearances(np.zeros(0, dtype=np.int64))
        place_lines(text, offsets, np.zeros(0, dtype=np.int64), _HEAD, _TAIL, text)
        nothing = np.zeros(0, dtype=np.uint64)
        test_and_set(np.zeros(1, dtype=np.uint8), 8, 1, nothing, nothing, np.zeros(0, dtype=bool))
        if compilations() > compiled:
            event(log, logging.INFO, "links-loops-compiled", loops=compilations() - compiled,
                  seconds=round(time.monotonic() - started, 1), cache=cache_path())
    finally:
        if skip_probe and BLAS_PROBE in sys.modules and sys.modules[BLAS_PROBE] is None:
            del sys.modules[BLAS_PROBE]


def _by_slice(home: NDArray[np.intp], slice_count: int) -> list[NDArray[np.intp]]:
    """The indexes of each slice's keys, in their order."""
    # A stable sort of 16-bit numbers is a radix sort in numpy: linear time.
    order = np.argsort(home.astype(np.uint16) if slice_count <= 1 << 16 else home,
                       kind="stable")
    counts = np.bincount(home, minlength=slice_count)
    return np.split(order, np.cumsum(counts)[:-1])


def slice_keys(read: ReadFile, p: int) -> KeyHashes:
    """The file's keys in slice ``p``."""
    return read.keys[p]


def test_slice(slices: SliceStore, p: int, generation: int, keys: list[KeyHashes], *,
               save: bool = True) -> list[NDArray[np.bool_]]:
    """Test and set each file's keys in slice ``p`` (at ``generation``), file after file; save
    the slice durably as ``generation + 1`` (unless ``save`` is False: a reshard's slices before
    its last group, then held by this process alone). One array of flags per file (``test_keys``)."""
    bitmap = open_slice(slices, p, generation)
    flags = [test_keys(bitmap, k) for k in keys]
    keep_slice(slices, p, generation + 1, bitmap, save=save)
    return flags


def open_slice(slices: SliceStore, p: int, generation: int) -> BloomBitmap:
    """Slice ``p`` at ``generation``, to test keys in: this process's copy if it holds that
    generation, else the store's. Taken out of the cache first, so that a failed test leaves no
    half-set copy there (``keep_slice`` puts it back)."""
    kept = _slices.pop((slices.identity(), p), None)
    if kept is not None and kept[0] == generation and generation != slices.empty_at:
        return kept[1]
    return slices.load(p, generation)


def test_keys(bitmap: BloomBitmap, keys: KeyHashes) -> NDArray[np.bool_]:
    """Test and set one file's keys in a slice: True where new, its URLs' then its pairs' (the
    two kinds are tested apart, so a URL's bits never hide a pair)."""
    return np.concatenate((bitmap.add_hashes(keys.lo[:keys.urls], keys.hi[:keys.urls]),
                           bitmap.add_hashes(keys.lo[keys.urls:], keys.hi[keys.urls:])))


def keep_slice(slices: SliceStore, p: int, generation: int, bitmap: BloomBitmap, *,
               save: bool = True) -> None:
    """Save slice ``p``, tested, durably as ``generation`` (unless ``save`` is False), and keep
    it in this process's cache."""
    if save:
        slices.save(p, generation, bitmap)
    _slices[(slices.identity(), p)] = (generation, bitmap)


def forget_slices(slices: SliceStore) -> None:
    """Drop this process's copies of the store's slices (their memory goes)."""
    for key in [key for key in _slices if key[0] == slices.identity()]:
        del _slices[key]


def assemble(read: ReadFile, flags_by_slice: list[NDArray[np.bool_]]) -> FileResult:
    """The file's result from each slice's flags for it (``test_slice``'s array for this file)."""
    new_url = np.zeros(len(read.urls), dtype=bool)
    new_pair = np.zeros(len(read.pair_targets), dtype=bool)
    for p, flags in enumerate(flags_by_slice):
        url_keys = read.keys[p].urls
        new_url[read.url_rows[p]] = flags[:url_keys]
        new_pair[read.pair_rows[p]] = flags[url_keys:]
    counts = np.bincount(read.pair_targets[new_pair], minlength=len(read.origins))
    linked = np.flatnonzero(counts)
    return FileResult(
        name=read.name, location=read.location, lines=read.lines, bad=read.bad,
        reports=read.reports, new_urls=read.urls.filter(pa.array(new_url)),
        new_url_sites=read.targets[new_url], origins=read.origins,
        linked=linked, linked_counts=counts[linked], site_rows=read.site_rows,
        site_hops=read.site_hops, site_priority=read.site_priority,
        new_pairs=int(new_pair.sum()), new_keys=[int(f.sum()) for f in flags_by_slice])


def _numpy(column: pa.Array) -> NDArray[np.intp]:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.intp)
