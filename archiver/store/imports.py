"""Taking in WARC files other tools wrote (``archiver import``): checked whole, stored, catalogued.

A file is read whole before anything changes. Its name must be one the WARC store can hold (not
starting with ``.``, no control character). Every record's heads must pass
``store.warcheads.check_heads`` (bounded lines, a plain Content-Length that the block holds, a
date, a three-digit HTTP status...) before warcio parses it, then parse (warcio); a gzipped
file's last member must be complete: a truncated or malformed file, or one that is no WARC (or
ARC) at all, gets a :class:`ImportRefused`, one line naming the file, the record and its offset,
and the problem, and neither the WARC store nor the catalog changes.

How a file is stored:

- ``copy`` (the default): into the archive's WARC store (the WARC folder, or the object store of
  the shared mode) under its own name. A WARC already gzipped record by record (what wget,
  Heritrix, warcio, Browsertrix and Zeno write) is stored byte for byte. Any other (an uncompressed
  ``.warc``, a whole-file gzip, an ARC file) is rewritten record by record as a ``.warc.gz`` of
  one gzip member per record, which replay needs to read a record by its offset; an ARC file's
  records become WARC records as warcio converts them. The stored name ends in ``.warc.gz``.
  A whole-file gzip is read through a decompressing stream, never expanded on disk; the
  temporary files (the rewritten file, and warcio's copy of a record it must digest) may hold
  at most ``import.max_temp_bytes`` together, past which the file is refused.
- ``in-place``: indexed where it lies, which must be the archive's WARC folder (a file elsewhere
  could not be read back by name), and it must already be gzipped record by record.

Catalog entries come from the stored bytes (archiver.store.warcindex: response, revisit and
resource records of http and https URLs). An entry the catalog already has (same URL, timestamp,
payload digest and kind, from whichever file) is a *duplicate*: counted and reported, not added
again, so importing a file twice adds nothing. A name the store holds already is refused unless it
holds the same bytes (then only the missing entries are added).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.warcwriter import WARCWriter

from archiver.store.bundles import complete_prefix
from archiver.store.interfaces import CatalogStore
from archiver.store.models import Capture
from archiver.store.objectstore import ObjectStore, ObjectStoreError, check_key, put
from archiver.store.warcheads import HeadError, check_heads
from archiver.store.warcindex import WarcError, index_stream

_CHUNK = 1 << 20
# import.max_temp_bytes by default: temporary disk for one file's rewriting.
MAX_TEMP_BYTES = 4 * 2**30
# The part of a record warcio copies to a temporary file in memory (SpooledTemporaryFile).
_SPOOL_IN_MEMORY = 512 * 1024
# What warcio's parser raises on some damaged records, besides its own ArchiveLoadFailed.
_DAMAGED = (TypeError, AttributeError, KeyError, IndexError)


class ImportRefused(Exception):
    """A file that cannot be imported as asked; nothing was changed for it."""


@dataclass
class Imported:
    """What importing one file did."""

    source: Path
    name: str  # as the WARC store and the catalog name it
    records: int  # every record of the file (warcinfo, requests... included)
    entries: int  # catalog entries its records give
    added: int = 0  # of which new to the catalog
    duplicates: int = 0  # of which the catalog had already
    rewritten: bool = False  # stored as rewritten gzip members, not byte for byte
    stored: bool = False  # copied into the store now (False: in place, or there already)
    skipped: dict[str, int] = field(default_factory=dict)  # records not catalogued, by kind


def stored_name(source: Path, *, rewritten: bool) -> str:
    """The name a file gets in the WARC store: its own, ending in ``.warc.gz`` once rewritten."""
    name = source.name
    if not rewritten:
        return name
    for suffix in (".warc.gz", ".arc.gz", ".warc", ".arc", ".gz"):
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".warc.gz"
    return name + ".warc.gz"


def gzipped_by_record(source: Path) -> bool:
    """True if the file is gzip members each holding one whole record, to its last byte."""
    with source.open("rb") as f:
        end, records = complete_prefix(f)
        return records > 0 and end == f.seek(0, 2)


def shown(source: Path) -> str:
    """A path for a message: control characters (a newline in a file name) escaped, so that the
    message stays one line and a terminal acts on none of them."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(source))


def check_name(source: Path, where: str) -> None:
    """ImportRefused if the WARC store could not hold a file of this name (nor the catalog name
    it): a name starting with ``.`` or holding a control character."""
    try:
        check_key(source.name)
    except ValueError:
        raise ImportRefused(f"{where}: the WARC store cannot hold a file named so (a name starting "
                            "with '.' or holding a control character): rename it") from None


@contextlib.contextmanager
def warcio_quiet() -> Iterator[None]:
    """Keep warcio from writing to stderr or the root logger while it reads a user's file: its
    warnings are several raw lines each (a record not followed by a blank line, a URL with
    spaces), and ``check_records`` has already said, one line each, what warcio will take as it
    does. Not thread-safe (sys.stderr is swapped): for ``archiver import``."""
    warcio = logging.getLogger("warcio")
    propagate = warcio.propagate
    warcio.propagate = False
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        warcio.propagate = propagate


def check_records(source: Path, where: str, warn: Callable[[str], None] = lambda _: None) -> None:
    """ImportRefused for the first record ``warcheads.check_heads`` refuses, naming it and its
    offset (in the decompressed data of a gzip file); ``warn`` hears, one line each, what is
    taken as warcio takes it."""
    gzipped = _is_gzip(source)
    try:
        with _open(source, whole_gzip=gzipped) as f:
            check_heads(f, lambda said: warn(f"{where}: {said}"))
    except HeadError as e:
        at = f"byte {e.offset}" + (" of the decompressed data" if gzipped else "")
        raise ImportRefused(f"{where}: record {e.number} (at {at}): {e}") from None
    except (OSError, EOFError, zlib.error) as e:
        raise ImportRefused(f"{where}: damaged gzip data: {e}") from None


def check_file(source: Path, where: str | None = None, *,
               whole_gzip: bool = False) -> tuple[int, dict[str, int]]:
    """Read every record of a WARC or ARC file (any compression); (records, records by kind).

    ImportRefused if it is not one, or is truncated: a record shorter than its Content-Length (a
    gzip stream that ends mid-member or is followed by other bytes: ``check_gzip_stream``, which
    the caller runs first). A file gzipped whole is read
    through a decompressing stream (``whole_gzip``): warcio reads only one member per record.
    ``where`` names the file in messages (default: ``source``).
    """
    where = where or shown(source)
    arc = _is_arc(source, where)  # lengths as warcio converts ARC records differ
    kinds: dict[str, int] = {}
    count = 0
    try:
        with _open(source, whole_gzip=whole_gzip) as f:
            for record in ArchiveIterator(f, arc2warc=True, check_digests=False, no_record_parse=True):
                declared = record.rec_headers.get_header("Content-Length") or ""
                got = _drain(record.raw_stream)
                if not arc and not (record.rec_type and record.rec_headers.get_header("WARC-Date")):
                    raise ImportRefused(f"{where}: record {count + 1} lacks WARC-Type or WARC-Date, "
                                        "which every WARC record has")
                if not arc and (not declared.isdigit() or got < int(declared)):
                    raise ImportRefused(f"{where}: record {count + 1} ({record.rec_type}) is cut "
                                        f"short: {got} of {declared or 'an unknown number of'} "
                                        "bytes")
                kinds[record.rec_type] = kinds.get(record.rec_type, 0) + 1
                count += 1
    except (ArchiveLoadFailed, EOFError, ValueError, UnicodeDecodeError) as e:
        raise ImportRefused(f"{where}: not a WARC or ARC file warcio can read: {e}") from None
    except _DAMAGED as e:
        raise ImportRefused(f"{where}: a damaged record warcio cannot parse "
                            f"({type(e).__name__}: {e})") from None
    except (zlib.error, OSError) as e:
        raise ImportRefused(f"{where}: damaged gzip data: {e}") from None
    return count, kinds


def _is_arc(source: Path, where: str) -> bool:
    """True for an ARC file, False for a WARC file; ImportRefused for anything else."""
    start = _start(source)
    if not start:
        raise ImportRefused(f"{where}: the file is empty")
    if not start.startswith((b"WARC/", b"filedesc://")):
        raise ImportRefused(f"{where}: not a WARC or ARC file (it begins {start[:20]!r}, not "
                            "with WARC/ or an ARC file header)")
    return start.startswith(b"filedesc://")


def _open(source: Path, *, whole_gzip: bool) -> BinaryIO:
    """The file's bytes, decompressed as one stream if ``whole_gzip``."""
    return gzip.open(source, "rb") if whole_gzip else source.open("rb")  # type: ignore[return-value]


def _drain(stream: BinaryIO) -> int:
    size = 0
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
    return size


def _start(source: Path) -> bytes:
    """The first bytes of the file, decompressed if it is gzip."""
    try:
        with (gzip.open(source, "rb") if _is_gzip(source) else source.open("rb")) as f:
            return f.read(16)
    except (OSError, EOFError, zlib.error):
        return b""


def _is_gzip(source: Path) -> bool:
    with source.open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def check_gzip_stream(source: Path, where: str) -> None:
    """ImportRefused unless every gzip member of the file ends and nothing but members follows."""
    with source.open("rb") as f:
        data = b""
        while True:
            if not data:
                data = f.read(_CHUNK)
                if not data:
                    return
            inflater = zlib.decompressobj(31)
            try:
                while True:
                    inflater.decompress(data, _CHUNK)
                    while inflater.unconsumed_tail:
                        inflater.decompress(inflater.unconsumed_tail, _CHUNK)
                    if inflater.eof:
                        break
                    data = f.read(_CHUNK)
                    if not data:
                        raise ImportRefused(f"{where}: truncated: its last gzip member ends early")
            except zlib.error as e:
                raise ImportRefused(f"{where}: damaged gzip data: {e}") from None
            data = inflater.unused_data


class TempFull(Exception):
    """The temporary files of one import would pass ``import.max_temp_bytes``."""


class _TempBudget:
    """The bytes an import writes to temporary files, against its cap."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            raise TempFull(f"its rewriting needs more than import.max_temp_bytes ({self.limit} "
                           "bytes) of temporary disk")


class _CappedOutput:
    """A file written through a :class:`_TempBudget`."""

    def __init__(self, out: BinaryIO, budget: _TempBudget) -> None:
        self.out, self.budget = out, budget

    def write(self, data: bytes) -> int:
        self.budget.take(len(data))
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


class _CappedSpool(tempfile.SpooledTemporaryFile):
    """warcio's copy of a record it digests, counted against the budget while it is held."""

    def __init__(self, budget: _TempBudget) -> None:
        super().__init__(max_size=_SPOOL_IN_MEMORY)
        self.budget = budget
        self.held = 0

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.budget.take(len(data))
        self.held += len(data)
        return super().write(data)

    def close(self) -> None:
        self.budget.used -= self.held
        self.held = 0
        super().close()


class _CappedWriter(WARCWriter):
    """warcio's writer, its temporary copies of records counted (``_create_temp_file`` is
    warcio's own hook for them)."""

    def __init__(self, out: _CappedOutput, budget: _TempBudget) -> None:
        super().__init__(out, gzip=True)
        self.budget = budget

    def _create_temp_file(self) -> _CappedSpool:
        return _CappedSpool(self.budget)


def rewrite(source: Path, target: Path, *, whole_gzip: bool = False,
            max_temp_bytes: int = MAX_TEMP_BYTES) -> None:
    """Write ``source``'s records to ``target`` as one gzip member per record (ARC records as
    warcio converts them to WARC), as ``warcio recompress`` does: headers parsed and written
    back, payloads as they were, lengths and missing digests computed. TempFull once ``target``
    and warcio's temporary copies would hold more than ``max_temp_bytes``."""
    budget = _TempBudget(max_temp_bytes)
    with _open(source, whole_gzip=whole_gzip) as f, target.open("wb") as out:
        writer = _CappedWriter(_CappedOutput(out, budget), budget)
        for record in ArchiveIterator(f, arc2warc=True, check_digests=False, verify_http=False):
            writer.write_record(record)


def import_file(source: Path, *, warcs: ObjectStore, catalog: CatalogStore, in_place: bool,
                progress: Callable[[str], None] = lambda _: None,
                max_temp_bytes: int = MAX_TEMP_BYTES) -> Imported:
    """Import one file into ``warcs`` (the archive's WARC store) and ``catalog``."""
    where = shown(source)
    if not source.is_file():
        raise ImportRefused(f"{where}: no such file")
    check_name(source, where)
    whole_gzip = _is_gzip(source)
    if whole_gzip:
        check_gzip_stream(source, where)
    _is_arc(source, where)
    check_records(source, where, progress)
    by_record = gzipped_by_record(source)
    whole = by_record and source.name.endswith(".warc.gz")
    if in_place:
        with warcio_quiet():
            records, kinds = check_file(source, where)
        return _in_place(source, where, warcs, catalog, records, kinds, whole)
    with tempfile.TemporaryDirectory(prefix="archiver-import-") as tmp:
        whole_gzip = whole_gzip and not by_record  # gzipped whole (or an ARC's members)
        with warcio_quiet():
            records, kinds = check_file(source, where, whole_gzip=whole_gzip)
        name = stored_name(source, rewritten=not whole)
        local = source
        if not whole:
            progress(f"{where}: rewriting as one gzip member per record")
            local = Path(tmp) / name
            try:
                with warcio_quiet():
                    rewrite(source, local, whole_gzip=whole_gzip, max_temp_bytes=max_temp_bytes)
            except TempFull as e:
                raise ImportRefused(f"{where}: {e}; raise it to import this file") from None
            except (ArchiveLoadFailed, ValueError, UnicodeDecodeError, *_DAMAGED) as e:
                raise ImportRefused(f"{where}: a record warcio cannot rewrite "
                                    f"({type(e).__name__}: {e})") from None
        entries = _entries(local, name, where, rewritten=not whole)
        done = Imported(source, name, records, len(entries), rewritten=not whole,
                        skipped=_skipped(kinds, entries))
        held = warcs.stored(name)
        if held is None:
            progress(f"{where}: storing as {warcs.location(name)}")
            try:
                put(warcs, local, name)
            except (OSError, ObjectStoreError) as e:
                warcs.delete(name)
                raise ImportRefused(f"{where}: could not store it as {warcs.location(name)}: "
                                    f"{e}") from None
            done.stored = True
        elif held != warcs.fingerprint(local):
            raise ImportRefused(f"{where}: the WARC store holds another file named {name} "
                                f"({warcs.location(name)}); rename this one to import it")
        _catalogue(done, entries, catalog)
    return done


def _in_place(source: Path, where: str, warcs: ObjectStore, catalog: CatalogStore, records: int,
              kinds: dict[str, int], whole: bool) -> Imported:
    folder = warcs.local_folder()
    if folder is None or source.resolve().parent != folder.resolve():
        inside = folder if folder is not None else warcs.location("")
        raise ImportRefused(f"{where}: --in-place indexes files inside the WARC store ({inside}); "
                            "use --copy for a file elsewhere")
    if not whole:
        raise ImportRefused(f"{where}: --in-place needs a .warc.gz gzipped record by record "
                            "(replay reads records by offset); --copy rewrites it so")
    entries = _entries(source, source.name, where)
    done = Imported(source, source.name, records, len(entries), skipped=_skipped(kinds, entries))
    _catalogue(done, entries, catalog)
    return done


def _entries(path: Path, name: str, where: str, *, rewritten: bool = False) -> list[Capture]:
    """The catalog entries of the file at ``path``, to be stored as ``name`` (``where`` in
    messages; ``rewritten``: ``path`` is archiver's rewrite of it, whose offsets mean nothing to
    the user)."""
    try:
        with path.open("rb") as f, warcio_quiet():
            return list(index_stream(f, name, where))
    except WarcError as e:
        if not rewritten:
            raise ImportRefused(str(e)) from None
        raise ImportRefused(f"{where}: warcio reads it, but its rewrite as one gzip member per "
                            f"record cannot be indexed (a bug worth reporting, with the file): "
                            f"{str(e).removeprefix(where + ': ')}") from None


def _skipped(kinds: dict[str, int], entries: list[Capture]) -> dict[str, int]:
    """Records of the file that give no catalog entry, by kind (requests, warcinfo, metadata,
    records of other URL schemes such as Heritrix's ``dns:``)."""
    left = dict(kinds)
    for entry in entries:
        left[entry.rectype] = left.get(entry.rectype, 0) - 1
    return {kind: n for kind, n in sorted(left.items()) if n > 0}


def _catalogue(done: Imported, entries: list[Capture], catalog: CatalogStore) -> None:
    """Add the entries the catalog lacks; count the others as duplicates."""
    new = [e for e in entries if not _known(catalog, e)]
    done.duplicates = len(entries) - len(new)
    done.added = catalog.add(new) if new else 0


def _known(catalog: CatalogStore, entry: Capture) -> bool:
    """Does the catalog have this capture already (same URL, time, digest, revisit or not: the
    catalog keeps no other kind)?"""
    revisit = entry.rectype == "revisit"
    return any((c.url, c.digest, c.rectype == "revisit") == (entry.url, entry.digest, revisit)
               for c in catalog.captures(entry.url, from_=entry.timestamp, to=entry.timestamp))
