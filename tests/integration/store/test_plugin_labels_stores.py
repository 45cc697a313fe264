"""Plugin labels in both catalogs (SQLite shards and PostgreSQL, migration 10): every read gives
back the labels a capture was added with, a capture added again keeps them, and none is none."""

from __future__ import annotations

import dataclasses

from tests.integration.store.test_catalog_contract import cap, open_catalog

__all__ = ["open_catalog"]  # the fixture, both backends


def test_every_read_gives_the_labels_back(open_catalog):
    labelled = dataclasses.replace(cap("http://example.org/a", "20260101000000"),
                                   labels='{"kind":"page","lang":"fr"}')
    plain = cap("http://example.org/b", "20260101000000", offset=1)
    catalog = open_catalog(shards=8)
    assert catalog.add([labelled, plain]) == 2
    assert catalog.add([labelled, plain]) == 0  # again, as after a crash: nothing twice
    assert list(catalog.list("http://example.org/", "host")) == [labelled, plain]
    assert catalog.closest("http://example.org/a", "20260101000000") == labelled
    assert catalog.captures("http://example.org/a") == [labelled]
    assert catalog.captures("http://example.org/b")[0].labels == ""
    assert list(catalog.iter_all()) == [labelled, plain]
    assert catalog.closest("http://example.org/a", "20260101000000").label_map == {
        "kind": "page", "lang": "fr"}
