"""Crash recovery with plugin labels: captures past the commit point are catalogued with the
labels record that follows them, and a kill that tears a labels record loses only those labels."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from archiver.store.bundles import BundleWriter
from archiver.store.embedded.catalog import Catalog
from tests.support.recoveryscene import GET, SITE, config_for, queue, run, state

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"


def test_recovery_catalogues_labels_and_a_torn_labels_record_loses_only_them(tmp_path):
    config = config_for(tmp_path)
    queue(config, SITE, [(f"{SITE}/", 0), (f"{SITE}/1", 1), (f"{SITE}/2", 1)])
    writer = BundleWriter(config.root / "warcs", config.warc)
    for path, labels in (("/", {"lang": "fr"}), ("/1", None), ("/2", {"lang": "de"})):
        date = datetime.now(UTC)
        written = writer.write_exchange(url=SITE + path, ip="127.0.0.1", date=date, request=GET,
                                        response_head=HEAD, response_body=b"<p>page</p>")
        if labels:
            writer.write_labels(url=SITE + path, date=date, refers_to=written.record_id,
                                labels=labels)
    assert writer.current_path is not None
    # Killed while the last labels record was being written: its tail never reached the disk.
    os.truncate(writer.current_path, writer.current_path.stat().st_size - 20)

    result, indexed = run(config)

    assert indexed == [f"{SITE}/", f"{SITE}/1", f"{SITE}/2"]
    with Catalog(config.root / "catalog", config.catalog.shards, readonly=True) as catalog:
        assert {c.url: c.label_map for c in catalog.iter_all()} == {
            f"{SITE}/": {"lang": "fr"}, f"{SITE}/1": {}, f"{SITE}/2": {}}
    assert state(config, SITE)[3] == []  # all three pages done: the capture of /2 is kept
    assert result.bundles_repaired == 1
