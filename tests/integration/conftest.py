"""Fixtures of the integration tests: the real servers they run against."""

from tests.support.objectstore import moto_endpoint, s3_bucket
from tests.support.postgres import _pg_schema_template, pg_store_url, pg_url, postgres_server

__all__ = ["_pg_schema_template", "moto_endpoint", "pg_store_url", "pg_url", "postgres_server", "s3_bucket"]
