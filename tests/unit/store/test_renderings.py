"""The records of a page's rendering in the store: ``BundleWriter.write_resource`` (a screenshot
``urn:screenshot:<url>``, the rendered text ``urn:text:<url>``), their catalog keys (right after
the page's, in its shard, out of its exact lookups) and their indexing."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter
from archiver.store.catalog_maintenance import export_cdxj
from archiver.store.catalogkeys import shard_of, surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from archiver.store.warcindex import capture_fields, index_warc, read_record
from tests.support.fuzzing import examples
from tests.support.warcexchanges import check

HOST_PORT = re.compile(r"urn:\d+(?:[/?#]|\Z)")
DATE = datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)
PAGE = "http://a.example/docs/"
REQUEST = b"GET /docs/ HTTP/1.1\r\nHost: a.example\r\n\r\n"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
TEXT = "Rendered: déjà vu\r\n\r\n".encode()


def test_keys_of_renderings_follow_their_page_in_its_shard() -> None:
    page = surt_key(PAGE)
    assert surt_key("urn:screenshot:" + PAGE) == page + " urn:screenshot"
    assert surt_key("urn:text:" + PAGE) == page + " urn:text"
    assert surt_key("urn:screenshot:https://www.A.example/docs/") == page + " urn:screenshot"
    keys = sorted([surt_key(u) for u in (PAGE, "urn:text:" + PAGE, "urn:screenshot:" + PAGE,
                                         PAGE + "!", PAGE + "a", "http://a.example/doc")])
    assert keys.index(page) + 1 == keys.index(page + " urn:screenshot")
    assert keys.index(page) + 2 == keys.index(page + " urn:text")
    for shards in (7, 1000):
        assert shard_of(surt_key("urn:screenshot:" + PAGE), shards) == shard_of(page, shards)
    for refused in ("urn:foo", "urn:uuid:1234", "urn:screenshot:", "urn:screenshot:dns:a.example",
                    "urn:text:urn:screenshot:" + PAGE, "urn:screenshot:urn:screenshot:" + PAGE):
        with pytest.raises(ValueError, match="not a usable URL"):
            surt_key(refused)


@settings(max_examples=examples(200))
@given(st.sampled_from(["urn:", "urn:screenshot:", "urn:text:", "urn:screenshot:http://",
                        "urn:text:https://a.example"]), st.text(max_size=60))
def test_urn_keys_are_a_key_or_a_value_error(prefix: str, rest: str) -> None:
    assume(not HOST_PORT.match(prefix + rest))  # "urn:0" is host "urn" and a port, as typed
    try:
        key = surt_key(prefix + rest)
    except ValueError:
        return
    assert key.endswith((" urn:screenshot", " urn:text"))
    assert " " not in key.rpartition(" ")[0]


@settings(max_examples=examples(300))
@given(st.text(max_size=80))
def test_any_urn_text_keys_or_fails_cleanly(text: str) -> None:
    for url in ("urn:" + text, "urn:screenshot:" + text, "urn:text:" + text):
        try:
            key = surt_key(url)
        except ValueError:
            continue
        if not HOST_PORT.match(url):  # "urn:8080/a" is host "urn" and a port, as typed
            assert key.endswith((" urn:screenshot", " urn:text"))  # no other urn: is keyed


def write_rendered_page(writer: BundleWriter) -> tuple[str, str, str]:
    """A page's exchange, its screenshot and text, then its labels: the record ids."""
    page = writer.write_exchange(url=PAGE, ip="127.0.0.1", date=DATE, request=REQUEST,
                                 response_head=HEAD, response_body=b"<div id=app></div>")
    shot = writer.write_resource(url="urn:screenshot:" + PAGE, date=DATE, refers_to=page.record_id,
                                 content_type="image/png", payload=PNG)
    text = writer.write_resource(url="urn:text:" + PAGE, date=DATE, refers_to=page.record_id,
                                 content_type="text/plain; charset=utf-8", payload=TEXT)
    writer.write_labels(url=PAGE, date=DATE, refers_to=page.record_id,
                        labels={"rendered": "crawl.capture = browser"})
    return page.record_id, shot.record_id, text.record_id


def test_resource_records_round_trip_through_index_and_read(tmp_path) -> None:
    with BundleWriter(tmp_path / "warcs", WarcConfig(prefix="t")) as writer:
        page_id, _, _ = write_rendered_page(writer)
        shot = writer.write_resource(url="urn:screenshot:" + PAGE, date=DATE, refers_to=page_id,
                                     content_type="image/webp", payload=b"RIFF")
        assert shot.request == shot.response and shot.payload_digest.startswith("sha1:")
        writer.write_exchange(url="http://a.example/next", ip=None, date=DATE, request=REQUEST,
                              response_head=HEAD, response_body=b"<p>next")
    (path,) = (tmp_path / "warcs").glob("*.warc.gz")
    assert check(path) == (0, 9)  # warcio recomputes every digest: all pass
    with path.open("rb") as f:
        resources = [r.rec_headers for r in ArchiveIterator(f) if r.rec_type == "resource"]
    assert [h.get_header("WARC-Refers-To") for h in resources] == [page_id] * 3
    assert all(h.get_header("WARC-Payload-Digest") == h.get_header("WARC-Block-Digest")
               for h in resources)
    entries = list(index_warc(path))
    assert [(c.url, c.mime, c.status, c.rectype) for c in entries] == [
        (PAGE, "text/html", 200, "response"),
        ("urn:screenshot:" + PAGE, "image/png", 200, "resource"),
        ("urn:text:" + PAGE, "text/plain", 200, "resource"),
        ("urn:screenshot:" + PAGE, "image/webp", 200, "resource"),
        ("http://a.example/next", "text/html", 200, "response"),
    ]
    # The labels record comes after the rendering's records: it still labels the page alone.
    assert [c.label_map for c in entries] == [{"rendered": "crawl.capture = browser"}, {}, {}, {}, {}]
    assert read_record(tmp_path / "warcs", entries[1].filename, entries[1].offset,
                       entries[1].length).payload == PNG
    assert read_record(tmp_path / "warcs", entries[2].filename, entries[2].offset,
                       entries[2].length).payload == TEXT
    with Catalog(tmp_path / "catalog", 16) as catalog:
        catalog.add(entries)
        assert [c.url for c in catalog.captures(PAGE)] == [PAGE]
        assert [c.url for c in catalog.list(PAGE, "exact")] == [PAGE]
        assert [c.mime for c in catalog.captures("urn:screenshot:" + PAGE)] == ["image/png",
                                                                                  "image/webp"]
        assert [c.url for c in catalog.list("http://a.example/", "host")] == [
            PAGE, *(["urn:screenshot:" + PAGE] * 2), "urn:text:" + PAGE, "http://a.example/next"]


def test_labels_written_before_the_rendering_label_the_page_too(tmp_path) -> None:
    with BundleWriter(tmp_path / "warcs", WarcConfig(prefix="t")) as writer:
        page = writer.write_exchange(url=PAGE, ip=None, date=DATE, request=REQUEST,
                                     response_head=HEAD, response_body=b"<p>")
        writer.write_labels(url=PAGE, date=DATE, refers_to=page.record_id, labels={"rendered": "x"})
        writer.write_resource(url="urn:screenshot:" + PAGE, date=DATE, refers_to=page.record_id,
                              content_type="image/png", payload=PNG)
    (path,) = (tmp_path / "warcs").glob("*.warc.gz")
    assert [(c.url, c.label_map) for c in index_warc(path)] == [
        (PAGE, {"rendered": "x"}), ("urn:screenshot:" + PAGE, {})]


def test_the_live_feed_makes_the_same_entry(tmp_path) -> None:
    with BundleWriter(tmp_path / "warcs", WarcConfig(prefix="t")) as writer:
        write_rendered_page(writer)
    (path,) = (tmp_path / "warcs").glob("*.warc.gz")
    indexed = list(index_warc(path))[1]
    fed = capture_fields(url="urn:screenshot:" + PAGE, date=DATE, status=200,
                         content_type="image/png", location=None, digest=indexed.digest,
                         filename=indexed.filename, offset=indexed.offset, length=indexed.length,
                         rectype="resource")
    assert fed == indexed


def test_other_urn_resources_stay_unindexed(tmp_path) -> None:
    with BundleWriter(tmp_path / "warcs", WarcConfig(prefix="t")) as writer:
        page = writer.write_exchange(url=PAGE, ip=None, date=DATE, request=REQUEST,
                                     response_head=HEAD, response_body=b"<p>")
        writer.write_resource(url="urn:thumbnail:" + PAGE, date=DATE, refers_to=page.record_id,
                              content_type="image/png", payload=PNG)
        with pytest.raises(ValueError):
            writer.write_resource(url="urn:text:" + PAGE, date=DATE, refers_to="<x>\r\nX: y",
                                  content_type="text/plain", payload=b"")
        with pytest.raises(ValueError):
            writer.write_resource(url="urn:text:" + PAGE, date=DATE, refers_to="<x>",
                                  content_type=" ", payload=b"")
    (path,) = (tmp_path / "warcs").glob("*.warc.gz")
    assert [c.url for c in index_warc(path)] == [PAGE]


def test_resources_rotate_like_every_other_record(tmp_path) -> None:
    with BundleWriter(tmp_path / "warcs", WarcConfig(prefix="t", max_size=600)) as writer:
        first = writer.write_resource(url="urn:screenshot:" + PAGE, date=DATE, refers_to="<a>",
                                      content_type="image/png", payload=PNG)
        second = writer.write_resource(url="urn:screenshot:" + PAGE, date=DATE, refers_to="<b>",
                                       content_type="image/png", payload=PNG)
    assert first.response.filename != second.response.filename
    assert sorted(p.name for p in (tmp_path / "warcs").iterdir()) == sorted(
        [first.response.filename, second.response.filename])


def test_the_cdxj_export_leaves_the_renderings_out(tmp_path) -> None:
    with BundleWriter(tmp_path / "warcs", WarcConfig(prefix="t")) as writer:
        write_rendered_page(writer)
    (path,) = (tmp_path / "warcs").glob("*.warc.gz")
    out = io.StringIO()
    with Catalog(tmp_path / "catalog", 16) as catalog:
        catalog.add(list(index_warc(path)))
        assert export_cdxj(catalog, out) == 1
    (line,) = out.getvalue().splitlines()
    assert line.split(" ")[0] == surt_key(PAGE) and Capture.from_cdxj(line).url == PAGE
