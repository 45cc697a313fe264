"""What crawler processes say of themselves, in both modes: status files under the root, or the
rows of table crawlers in PostgreSQL (with each process's host and heartbeat)."""

from __future__ import annotations

import psycopg
import pytest

from archiver.store.postgres.schema import StoreError
from archiver.store.postgres.status import PgStatus
from tests.support.statusrows import register, status_of
from tests.support.storemodes import ModeArchive


def test_each_process_reads_back_as_written(mode_archive: ModeArchive) -> None:
    stores = mode_archive.stores
    shared = mode_archive.mode == "shared"
    register(stores, 0, "crawl-a.example", pid=1234)
    register(stores, 1, "crawl-b.example", pid=999, heartbeat_ago=400)
    status = stores.status()
    try:
        registered = status.read_all()
        first, second = status_of(0, 10), status_of(1, 20, active={"http://a.example/": {"queued": 4}})
        status.write(1, second)
        status.write(0, status_of(0, 5))
        status.write(0, first)  # the last word counts
        found = status.read_all()
    finally:
        status.close()
    if not shared:
        assert registered == [] and found == [first, second]
        return
    # Registered but silent: the row's facts only.
    assert [{k: s[k] for k in ("process", "host", "pid", "epoch")} for s in registered] == [
        {"process": 0, "host": "crawl-a.example", "pid": 1234, "epoch": 1},
        {"process": 1, "host": "crawl-b.example", "pid": 999, "epoch": 1}]
    assert "pages" not in registered[0] and isinstance(registered[0]["started"], float)
    # Reporting: what it said, with its host, pid and heartbeat from the row.
    rows = {"host", "epoch", "heartbeat_age"}
    assert [{k: v for k, v in s.items() if k not in rows} for s in found] == [
        first | {"pid": 1234}, second | {"pid": 999}]
    assert [s["host"] for s in found] == ["crawl-a.example", "crawl-b.example"]
    assert 0 <= found[0]["heartbeat_age"] < 60 and 400 <= found[1]["heartbeat_age"] < 460


def test_an_unregistered_process_is_told_to_register(pg_store_url: str) -> None:
    status = PgStatus(pg_store_url)
    try:
        with pytest.raises(StoreError, match="crawler process 7 has no row in table crawlers"):
            status.write(7, status_of(7, 1))
        assert status.read_all() == []
    finally:
        status.close()


def test_a_broken_connection_is_made_again(pg_store_url: str) -> None:
    status = PgStatus(pg_store_url)
    try:
        assert status.read_all() == []
        with psycopg.connect(pg_store_url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'archiver'"
                " AND datname = current_database() AND pid <> pg_backend_pid()").fetchall()
        assert killed == [(True,)]
        assert status.read_all() == []
    finally:
        status.close()
