"""PostgreSQL for the tests: one server per session (``tools.pgserver.running_postgres``),
``pg_url`` an empty database of its own for each test, dropped afterwards, and ``pg_store_url``
one at archiver's schema. The fault tests get servers of their own, to restart and fail over:
``own_postgres`` (a server) and ``replicated_postgres`` (a primary and its streaming standby),
each with a database at archiver's schema (``store_database``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import psycopg
import pytest

from archiver.store.postgres.schema import init_schema
from tools.pgserver import (
    FAULT_SETTINGS,
    PASSWORD,
    PASSWORD_ROLE,
    PostgresServer,
    multi_host_url,
    running_postgres,
    running_standby,
    store_database,
)

__all__ = ["PASSWORD", "PASSWORD_ROLE", "PostgresServer", "store_database"]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session, stopped (fast shutdown) at its end."""
    with running_postgres() as server:
        yield server


_numbers = itertools.count()


def _database(server: PostgresServer, template: str = "template1") -> Iterator[str]:
    name = f"test_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    yield server.url(name)
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database for one test (dropped after it)."""
    yield from _database(postgres_server)


@pytest.fixture(scope="session")
def _pg_schema_template(postgres_server: PostgresServer) -> str:
    """A database with archiver's schema, made once, that ``pg_store_url`` copies."""
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute("CREATE DATABASE archiver_schema")
    init_schema(postgres_server.url("archiver_schema"))
    return "archiver_schema"


@pytest.fixture
def pg_store_url(postgres_server: PostgresServer, _pg_schema_template: str) -> Iterator[str]:
    """The URL of a fresh database at archiver's current schema (as ``archiver store init`` leaves it)."""
    yield from _database(postgres_server, _pg_schema_template)


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A server of this test's own, to stop, start and restart."""
    with running_postgres(settings=FAULT_SETTINGS) as server:
        yield server


@pytest.fixture
def replicated_postgres() -> Iterator[tuple[PostgresServer, PostgresServer, str]]:
    """A primary of this test's own with a streaming standby, and the multi-host URL of a
    database at archiver's schema that reaches whichever of them takes writes."""
    with running_postgres(settings=FAULT_SETTINGS) as primary:
        store_database(primary)
        with running_standby(primary) as standby:
            yield primary, standby, multi_host_url([primary, standby], "archive")
