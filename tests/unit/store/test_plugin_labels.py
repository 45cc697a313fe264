"""Plugin labels in the store: the metadata record after a capture, read back onto its catalog entry
by indexing, the catalog's labels (SQLite, shards made before labels, CDXJ, JSON), the ``/cdx``
label fields, and exports carrying them."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from archiver.config import WarcConfig
from archiver.plugins import LABEL_NAME
from archiver.replay.cdxquery import CdxError, parse_query, render, select
from archiver.store.bundles import LABELS_TYPE, BundleWriter
from archiver.store.catalog_maintenance import WarcFiles
from archiver.store.embedded.catalog import Catalog
from archiver.store.exports import export
from archiver.store.models import Capture, labels_text
from archiver.store.warcindex import capture_fields, index_warc

DATE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REQUEST = b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"


def write(writer: BundleWriter, url: str, labels: dict[str, str] | None) -> str:
    written = writer.write_exchange(url=url, ip="127.0.0.1", date=DATE, request=REQUEST,
                                    response_head=HEAD, response_body=b"<p>" + url.encode())
    if labels:
        writer.write_labels(url=url, date=DATE, refers_to=written.record_id, labels=labels)
    return written.record_id


def test_labels_follow_their_capture_and_indexing_reads_them_back(tmp_path):
    with BundleWriter(tmp_path / "warcs", WarcConfig(prefix="t")) as writer:
        first = write(writer, "http://a.example/", {"lang": "fr", "kind": "page"})
        write(writer, "http://a.example/b", None)
        write(writer, "http://a.example/c", {"lang": "déjà vu"})
        # A metadata record naming another record (not the capture before it) labels nothing.
        writer.write_labels(url="http://a.example/c", date=DATE, refers_to=first, labels={"x": "1"})
    (path,) = (tmp_path / "warcs").glob("*.warc.gz")
    with path.open("rb") as f:
        found = [(r.rec_type, r.rec_headers.get_header("WARC-Refers-To"),
                  r.rec_headers.get_header("Content-Type"), r.content_stream().read())
                 for r in ArchiveIterator(f) if r.rec_type in ("response", "metadata")]
    assert found[0][0] == "response" and found[1][:3] == ("metadata", first, LABELS_TYPE)
    assert json.loads(found[1][3]) == {"labels": {"kind": "page", "lang": "fr"}}
    entries = {c.url: c for c in index_warc(path)}
    assert entries["http://a.example/"].label_map == {"kind": "page", "lang": "fr"}
    assert entries["http://a.example/b"].labels == ""
    assert entries["http://a.example/c"].label_map == {"lang": "déjà vu"}
    assert list(entries) == ["http://a.example/", "http://a.example/b", "http://a.example/c"]


def capture(url: str, labels: dict[str, str], **fields: object) -> Capture:
    return dataclasses.replace(capture_fields(
        url=url, date=DATE, status=200, content_type="text/html", location=None,
        digest="sha1:AAAA", filename="a.warc.gz", offset=len(url), length=10, labels=labels), **fields)


def test_the_catalog_keeps_labels_in_every_form(tmp_path):
    labelled = capture("http://a.example/", {"lang": "fr", "kind": "page"})
    plain = capture("http://a.example/b", {})
    assert labelled.labels == '{"kind":"page","lang":"fr"}' and plain.labels == ""
    with Catalog(tmp_path / "catalog", 4) as catalog:
        catalog.add([labelled, plain])
        assert list(catalog.list("http://a.example/", "host")) == [labelled, plain]
    assert Capture.from_cdxj(labelled.to_cdxj()) == labelled
    assert json.loads(labelled.to_cdxj().split(" ", 2)[2])["label.lang"] == "fr"
    assert labelled.to_json()["labels"] == {"kind": "page", "lang": "fr"}
    assert "labels" not in plain.to_json()


def test_a_shard_made_before_labels_gets_the_column(tmp_path):
    directory = tmp_path / "catalog"
    with Catalog(directory, 1) as catalog:
        catalog.add([capture("http://a.example/old", {})])
    shard = directory / "000.sqlite"
    db = sqlite3.connect(shard)  # as an older archiver made it: no labels column
    db.execute("ALTER TABLE captures DROP COLUMN labels")
    db.close()
    with Catalog(directory, 1, readonly=True) as reader:
        (old,) = reader.list("http://a.example/", "host")
        assert old.labels == ""
    with Catalog(directory, 1) as catalog:
        catalog.add([capture("http://a.example/new", {"lang": "en"})])
        assert [c.labels for c in catalog.list("http://a.example/", "host")] == ['{"lang":"en"}', ""]


def rows(query: str, captures: list[Capture]) -> list[str]:
    parsed = parse_query([tuple(pair.split("=", 1)) for pair in query.split("&")])
    return [render(parsed, row) for row in select(parsed, captures)]


def test_cdx_filters_on_label_fields_and_shows_them():
    fr = capture("http://a.example/fr", {"lang": "fr"})
    de = capture("http://a.example/de", {"lang": "de", "kind": "page"})
    none = capture("http://a.example/none", {})
    every = [de, fr, none]
    assert rows("url=a.example/&matchType=host&filter==label.lang:fr&output=json&fl=url,label.lang",
                every) == ['{"url": "http://a.example/fr", "label.lang": "fr"}\n']
    assert len(rows("url=a.example/&matchType=host&filter=!~label.lang:(fr|de)$", every)) == 1
    assert len(rows("url=a.example/&matchType=host&filter=~label.kind:p", every)) == 1
    json_line = json.loads(rows("url=a.example/&matchType=host&output=json", every)[0])
    assert json_line["label.kind"] == "page" and json_line["label.lang"] == "de"
    for bad in ("filter=label.Lang:fr", "filter=labels:fr", "fl=url,label."):
        with pytest.raises(CdxError, match="label"):
            parse_query([("url", "a.example/"), tuple(bad.split("=", 1))])


@given(st.dictionaries(st.from_regex(LABEL_NAME, fullmatch=True),
                       st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
                               max_size=20), max_size=5))
def test_labels_survive_every_form(labels):
    made = capture("http://a.example/", labels)
    assert made.label_map == labels
    assert Capture.from_cdxj(made.to_cdxj()) == made
    assert json.loads(labels_text(labels) or "{}") == labels


def test_an_export_carries_the_labels_records(tmp_path):
    warcs = tmp_path / "warcs"
    with BundleWriter(warcs, WarcConfig(prefix="t")) as writer:
        write(writer, "http://a.example/", {"lang": "fr"})
        write(writer, "http://a.example/b", None)
    (path,) = warcs.glob("*.warc.gz")
    with Catalog(tmp_path / "catalog", 2) as catalog:
        catalog.add(index_warc(path))
        made = export(catalog, WarcFiles(warcs), url="http://a.example/", match="host",
                      output=tmp_path / "out" / "slice.warc.gz")
    assert made.captures == 2
    exported = {c.url: c.label_map for c in index_warc(made.path, "slice.warc.gz")}
    assert exported == {"http://a.example/": {"lang": "fr"}, "http://a.example/b": {}}
