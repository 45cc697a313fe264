"""The PostgreSQL schema on a real server: versioned migrations, `archiver store init`, the refusal
of a database at another version, and no password in any message."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from archiver import cli
from archiver.queues.postgres.sitequeue import PgSiteQueue
from archiver.store.postgres.catalog import PgCatalog
from archiver.store.postgres.schema import (
    CURRENT_VERSION,
    MIGRATIONS,
    SchemaError,
    StoreError,
    connect_current,
    init_schema,
    redact,
    schema_version,
)
from tests.support.postgres import PASSWORD, PASSWORD_ROLE, PostgresServer


def write_config(tmp_path: Path, store_url: str) -> Path:
    path = tmp_path / "archiver.toml"
    path.write_text(f'[archive]\nroot = "{tmp_path / "archive"}"\n\n[store]\nurl = "{store_url}"\n')
    return path


def test_init_schema_applies_every_migration_once(pg_url: str) -> None:
    assert schema_version(pg_url) == 0
    assert init_schema(pg_url) == list(MIGRATIONS)
    assert schema_version(pg_url) == CURRENT_VERSION
    assert init_schema(pg_url) == []
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version, description FROM schema_version ORDER BY version").fetchall()
        assert rows == [(m.version, m.description) for m in MIGRATIONS]
        partitioned = conn.execute(
            "SELECT partstrat, a.attname FROM pg_partitioned_table p JOIN pg_attribute a"
            " ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]"
            " WHERE p.partrelid = 'catalog_captures'::regclass").fetchone()
        assert partitioned == ("h", "shard")
        # The shard key leads every index of the catalog, so Citus could distribute it as it is.
        leading = conn.execute(
            "SELECT DISTINCT a.attname FROM pg_index i JOIN pg_attribute a"
            " ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            " WHERE i.indrelid IN (SELECT inhrelid FROM pg_inherits"
            "  WHERE inhparent = 'catalog_captures'::regclass)").fetchall()
        assert leading == [("shard",)]


def test_two_inits_at_once_apply_the_migrations_once(pg_url: str) -> None:
    results: list[object] = []
    start = threading.Barrier(2)

    def init() -> None:
        start.wait()
        try:
            results.append(init_schema(pg_url))
        except Exception as e:
            results.append(e)

    threads = [threading.Thread(target=init) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=len) == [[], list(MIGRATIONS)]
    assert schema_version(pg_url) == CURRENT_VERSION


def test_stores_refuse_a_database_at_another_version(pg_url: str) -> None:
    with pytest.raises(SchemaError, match=r"no archiver schema.*archiver store init --config"):
        connect_current(pg_url).close()
    with pytest.raises(SchemaError, match="archiver store init"):
        PgCatalog(pg_url, 16)
    init_schema(pg_url)
    connect_current(pg_url).close()
    PgCatalog(pg_url, 16).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version, description) VALUES (%s, 'from the future')",
                     (CURRENT_VERSION + 1,))
    with pytest.raises(SchemaError, match=r"newer than this archiver.*upgrade archiver"):
        connect_current(pg_url).close()
    with pytest.raises(SchemaError, match="newer than this archiver"):
        init_schema(pg_url)


def test_store_init_verb_creates_then_finds_nothing_to_do(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, pg_url)
    assert cli.main(["store", "init", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"applied version 1: {MIGRATIONS[0].description}" in out
    assert schema_version(pg_url) == CURRENT_VERSION
    assert cli.main(["store", "init", "--config", str(config)]) == 0
    assert f"at schema version {CURRENT_VERSION} already; nothing to do" in capsys.readouterr().out


def test_store_init_of_the_embedded_store_has_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["store", "init", "--config", str(write_config(tmp_path, "sqlite"))]) == 0
    assert "embedded store has nothing to initialise" in capsys.readouterr().out
    assert not (tmp_path / "archive").exists()


def test_no_password_in_any_message(
    postgres_server: PostgresServer, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = postgres_server.url(pg_url.rsplit("/", 1)[1], user=PASSWORD_ROLE)
    config = write_config(tmp_path, url)
    wrong = "Wrong-Pa55word-zz"
    monkeypatch.setenv("PGPASSWORD", wrong)
    assert cli.main(["store", "init", "--config", str(config)]) == 1
    captured = capsys.readouterr()
    assert "password authentication failed" in captured.err
    assert wrong not in captured.err + captured.out
    with pytest.raises(StoreError) as failed:
        connect_current(url).close()
    assert wrong not in str(failed.value) and "***" not in str(failed.value)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert cli.main(["store", "init", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    assert "applied version 1" in captured.out and PASSWORD not in captured.out + captured.err
    # What libpq could echo: a URL or a conninfo with the password, or the PGPASSWORD value.
    message = (f"failed for postgresql://u:{PASSWORD}@h/db and host=h password='{PASSWORD}' user=u,"
               f" password={PASSWORD}, or {PASSWORD} alone")
    assert PASSWORD not in redact(message)
    assert redact(message).count("***") == 4


def test_a_database_from_before_sessions_keeps_its_sites_and_can_pause_them(pg_url: str) -> None:
    sessions = next(m for m in MIGRATIONS if "'paused'" in m.sql)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as ``store init`` left it before
        conn.execute("CREATE TABLE schema_version (version integer PRIMARY KEY, description text"
                     " NOT NULL, applied timestamptz NOT NULL DEFAULT now())")
        for migration in MIGRATIONS[:MIGRATIONS.index(sessions)]:
            conn.execute(migration.sql)
            conn.execute("INSERT INTO schema_version (version, description) VALUES (%s, %s)",
                         (migration.version, migration.description))
        conn.execute("INSERT INTO sites (origin, added, note) VALUES ('http://a.test', 0, 'old')")
    assert sessions in init_schema(pg_url)
    queue = PgSiteQueue(pg_url, process=0)
    try:
        row = queue.site("http://a.test")
        assert row is not None and (row.note, row.gatekeepers) == ("old", ())
        assert queue.cookies("http://a.test") == ""
        assert queue.claim(include_deferred=False, now=0) == "http://a.test"
        queue.pause("http://a.test", "session lost")
        assert queue.counts()["paused"] == 1
    finally:
        queue.close()
