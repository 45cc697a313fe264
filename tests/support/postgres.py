"""PostgreSQL for the tests: one server per session (``tools.pgserver.running_postgres``),
``pg_url`` an empty database of its own for each test, dropped afterwards, and ``pg_store_url``
one at archiver's schema."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import psycopg
import pytest

from archiver.store.pgschema import init_schema
from tools.pgserver import PASSWORD, PASSWORD_ROLE, PostgresServer, running_postgres

__all__ = ["PASSWORD", "PASSWORD_ROLE", "PostgresServer"]


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
