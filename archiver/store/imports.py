"""Taking in WARC files other tools wrote (``archiver import``): checked whole, stored, catalogued.

A file is read whole before anything changes. Every record must parse (warcio) and hold the bytes
its Content-Length promises, and a gzipped file's last member must be complete: a truncated file,
or one that is no WARC (or ARC) at all, gets a :class:`ImportRefused` naming the file and the
problem, and neither the WARC store nor the catalog changes.

How a file is stored:

- ``copy`` (the default): into the archive's WARC store (the WARC folder, or the object store of
  the shared mode) under its own name. A WARC already gzipped record by record (what wget,
  Heritrix, warcio, Browsertrix and Zeno write) is stored byte for byte. Any other (an uncompressed
  ``.warc``, a whole-file gzip, an ARC file) is rewritten record by record as a ``.warc.gz`` of
  one gzip member per record, which replay needs to read a record by its offset; an ARC file's
  records become WARC records as warcio converts them. The stored name ends in ``.warc.gz``.
- ``in-place``: indexed where it lies, which must be the archive's WARC folder (a file elsewhere
  could not be read back by name), and it must already be gzipped record by record.

Catalog entries come from the stored bytes (archiver.store.warcindex: response, revisit and
resource records of http and https URLs). An entry the catalog already has (same URL, timestamp,
payload digest and kind, from whichever file) is a *duplicate*: counted and reported, not added
again, so importing a file twice adds nothing. A name the store holds already is refused unless it
holds the same bytes (then only the missing entries are added).
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.warcwriter import WARCWriter

from archiver.store.bundles import complete_prefix
from archiver.store.catalog import Capture
from archiver.store.interfaces import CatalogStore
from archiver.store.objectstore import FolderStore, ObjectStore, ObjectStoreError, put
from archiver.store.warcindex import WarcError, index_stream

_CHUNK = 1 << 20
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


def check_file(source: Path, where: Path | None = None) -> tuple[int, dict[str, int]]:
    """Read every record of a WARC or ARC file (any compression); (records, records by kind).

    ImportRefused if it is not one, or is truncated: a record shorter than its Content-Length, a
    gzip stream that ends mid-member or is followed by other bytes. A file gzipped whole must
    be handed over decompressed (``decompressed``): warcio reads only one member per record.
    ``where`` names the file in messages (default: ``source``).
    """
    where = where or source
    if _is_gzip(source):
        _check_gzip_stream(source)
    start = _start(source)
    if not start:
        raise ImportRefused(f"{where}: the file is empty")
    if not start.startswith((b"WARC/", b"filedesc://")):
        raise ImportRefused(f"{where}: not a WARC or ARC file (it begins {start[:20]!r}, not "
                            "with WARC/ or an ARC file header)")
    arc = start.startswith(b"filedesc://")  # lengths as warcio converts ARC records differ
    kinds: dict[str, int] = {}
    count = 0
    try:
        with source.open("rb") as f:
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
    except zlib.error as e:
        raise ImportRefused(f"{where}: damaged gzip data: {e}") from None
    return count, kinds


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


def _check_gzip_stream(source: Path) -> None:
    """Every gzip member of the file ends, and nothing but members follows."""
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
                        raise ImportRefused(f"{source}: truncated: its last gzip member ends early")
            except zlib.error as e:
                raise ImportRefused(f"{source}: damaged gzip data: {e}") from None
            data = inflater.unused_data


def decompressed(source: Path, target: Path) -> None:
    """Write the bytes of a gzip file (every member) to ``target``."""
    with gzip.open(source, "rb") as f, target.open("wb") as out:
        shutil.copyfileobj(f, out, _CHUNK)


def rewrite(source: Path, target: Path) -> None:
    """Write ``source``'s records to ``target`` as one gzip member per record (ARC records as
    warcio converts them to WARC), as ``warcio recompress`` does: headers parsed and written
    back, payloads as they were, lengths and missing digests computed."""
    with source.open("rb") as f, target.open("wb") as out:
        writer = WARCWriter(out, gzip=True)
        for record in ArchiveIterator(f, arc2warc=True, check_digests=False, verify_http=False):
            writer.write_record(record)


def import_file(source: Path, *, warcs: ObjectStore, catalog: CatalogStore, in_place: bool,
                progress: Callable[[str], None] = lambda _: None) -> Imported:
    """Import one file into ``warcs`` (the archive's WARC store) and ``catalog``."""
    if not source.is_file():
        raise ImportRefused(f"{source}: no such file")
    by_record = gzipped_by_record(source)
    whole = by_record and source.name.endswith(".warc.gz")
    if in_place:
        records, kinds = check_file(source)
        return _in_place(source, warcs, catalog, records, kinds, whole)
    with tempfile.TemporaryDirectory(prefix="archiver-import-") as tmp:
        readable = source
        if _is_gzip(source) and not by_record:  # gzipped whole (or an ARC's members)
            _check_gzip_stream(source)
            readable = Path(tmp) / "decompressed"
            decompressed(source, readable)
        records, kinds = check_file(readable, source)
        name = stored_name(source, rewritten=not whole)
        local = source
        if not whole:
            progress(f"{source}: rewriting as one gzip member per record")
            local = Path(tmp) / name
            try:
                rewrite(readable, local)
            except (ArchiveLoadFailed, ValueError, UnicodeDecodeError, *_DAMAGED) as e:
                raise ImportRefused(f"{source}: a record warcio cannot rewrite "
                                    f"({type(e).__name__}: {e})") from None
        entries = _entries(local, name, source)
        done = Imported(source, name, records, len(entries), rewritten=not whole,
                        skipped=_skipped(kinds, entries))
        held = warcs.stored(name)
        if held is None:
            progress(f"{source}: storing as {warcs.location(name)}")
            try:
                put(warcs, local, name)
            except (OSError, ObjectStoreError) as e:
                warcs.delete(name)
                raise ImportRefused(f"{source}: could not store it as {warcs.location(name)}: "
                                    f"{e}") from None
            done.stored = True
        elif held != warcs.fingerprint(local):
            raise ImportRefused(f"{source}: the WARC store holds another file named {name} "
                                f"({warcs.location(name)}); rename this one to import it")
        _catalogue(done, entries, catalog)
    return done


def _in_place(source: Path, warcs: ObjectStore, catalog: CatalogStore, records: int,
              kinds: dict[str, int], whole: bool) -> Imported:
    if not isinstance(warcs, FolderStore) or source.resolve().parent != warcs.directory.resolve():
        where = warcs.directory if isinstance(warcs, FolderStore) else warcs.location("")
        raise ImportRefused(f"{source}: --in-place indexes files inside the WARC store ({where}); "
                            "use --copy for a file elsewhere")
    if not whole:
        raise ImportRefused(f"{source}: --in-place needs a .warc.gz gzipped record by record "
                            "(replay reads records by offset); --copy rewrites it so")
    entries = _entries(source, source.name, source)
    done = Imported(source, source.name, records, len(entries), skipped=_skipped(kinds, entries))
    _catalogue(done, entries, catalog)
    return done


def _entries(path: Path, name: str, source: Path) -> list[Capture]:
    """The catalog entries of the file at ``path``, to be stored as ``name`` (``source`` in
    messages)."""
    try:
        with path.open("rb") as f:
            return list(index_stream(f, name, str(source)))
    except WarcError as e:
        raise ImportRefused(str(e)) from None


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
