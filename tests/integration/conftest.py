"""Fixtures of the integration tests: the real servers they run against."""

from tests.support.postgres import _pg_schema_template, pg_store_url, pg_url, postgres_server

__all__ = ["_pg_schema_template", "pg_store_url", "pg_url", "postgres_server"]
