"""What only the shared links state does: the cluster's lock lives and dies with the state's
connection, and a state that moved underneath a batch refuses its commit and its reshard."""

from __future__ import annotations

import psycopg
import pytest

from archiver.queues.postgres.linksstate import LinksBatchBusy, PgLinksState
from archiver.store.postgres.schema import StoreError
from archiver.store.s3.objectstore import S3Store
from tests.support.linkbatch import site_changes

FILE = ("0-20261122000000-00001.tsv", 3, 2, 0)


@pytest.fixture
def objects(s3_bucket) -> S3Store:
    return S3Store(s3_bucket.client, s3_bucket.name, "archive")


def test_a_batch_that_loses_its_connection_loses_the_lock_and_can_write_nothing(
        pg_store_url, objects):
    first = PgLinksState(pg_store_url, objects)
    with pytest.raises(LinksBatchBusy, match=r"held by archiver links run, .* pid \d+"):
        PgLinksState(pg_store_url, objects)
    with psycopg.connect(pg_store_url, autocommit=True) as admin:   # its connection drops
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                      " WHERE application_name LIKE 'archiver links run%'")
    second = PgLinksState(pg_store_url, objects)
    try:
        with pytest.raises(StoreError, match="the links lock went with the connection"):
            first.commit(1, [FILE], site_changes({"http://a.test": 1}, {"http://a.test"}), 0.0, [1])
        assert second.generation == 0 and second.files_done() == set()
    finally:
        first.close()
        second.close()


def test_a_state_moved_underneath_refuses_the_commit_and_the_reshard(pg_store_url, objects):
    state = PgLinksState(pg_store_url, objects)
    try:
        with psycopg.connect(pg_store_url, autocommit=True) as other:
            other.execute("UPDATE links_meta SET generation = 5")
        with pytest.raises(RuntimeError, match="no longer at generation 0"):
            state.commit(1, [FILE], site_changes({"http://a.test": 1}), 0.0, [1])
        with pytest.raises(RuntimeError, match="no longer at generation 0"):
            state.reshard([1, 1])
        assert state.files_done() == set() and state.dirty_sites() == []
        assert state.slice_generations() == []
    finally:
        state.close()
