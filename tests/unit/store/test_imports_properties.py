"""``archiver import`` reads whatever it is given: any bytes, and any cut or flipped byte of a
real WARC, are imported whole or refused with ImportRefused, and a refusal changes nothing."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from archiver.store.embedded.catalog import Catalog
from archiver.store.imports import ImportRefused, import_file
from archiver.store.objectstore import FolderStore
from tests.support.fuzzing import examples


def _warc(gzip_records: bool) -> bytes:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=gzip_records)
    head = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    for n in range(3):
        writer.write_record(writer.create_warc_record(
            f"http://example.org/{n}", "response", payload=io.BytesIO(b"<p>page %d</p>" % n),
            http_headers=head))
    return out.getvalue()


WARCS = (_warc(True), _warc(False))


def _import(data: bytes, name: str) -> None:
    """Import ``data`` as a file named ``name`` into a fresh archive: all of it, or nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = root / name
        source.write_bytes(data)
        catalog = Catalog(root / "catalog", 2)
        try:
            try:
                done = import_file(source, warcs=FolderStore(root / "warcs"), catalog=catalog,
                                   in_place=False)
            except ImportRefused as e:
                assert str(e).startswith(str(source))
                assert catalog.count() == 0
                assert not (root / "warcs").exists() or not list((root / "warcs").iterdir())
            else:
                assert catalog.count() == done.added == done.entries
                assert (root / "warcs" / done.name).is_file()
        finally:
            catalog.close()


@settings(max_examples=examples(60), deadline=None)
@given(st.binary(max_size=400), st.sampled_from(["x.warc", "x.warc.gz", "x.arc"]))
def test_any_bytes_are_imported_or_refused(data: bytes, name: str) -> None:
    _import(data, name)


@settings(max_examples=examples(80), deadline=None)
@given(st.sampled_from(range(len(WARCS))), st.data())
def test_a_cut_or_damaged_warc_is_imported_whole_or_refused(which: int, data: st.DataObject) -> None:
    warc = bytearray(WARCS[which])
    if data.draw(st.booleans(), label="cut"):
        warc = warc[: data.draw(st.integers(0, len(warc)), label="length")]
    else:
        at = data.draw(st.integers(0, len(warc) - 1), label="at")
        warc[at] ^= data.draw(st.integers(1, 255), label="flip")
    _import(bytes(warc), "x.warc.gz" if which == 0 else "x.warc")
