"""Fixtures of the integration tests: the real servers they run against, and an archive in either
mode on them."""

from tests.support.browsercrawls import modern_browser_crawl, modern_plain_loads
from tests.support.objectstore import moto_endpoint, s3_bucket, stoppable_bucket
from tests.support.postgres import (
    _pg_schema_template,
    own_postgres,
    pg_store_url,
    pg_url,
    postgres_server,
    replicated_postgres,
)
from tests.support.replayarchive import two_dates_crawled
from tests.support.storemodes import mode_archive

__all__ = ["_pg_schema_template", "mode_archive", "modern_browser_crawl", "modern_plain_loads",
           "moto_endpoint", "own_postgres", "pg_store_url", "pg_url", "postgres_server",
           "replicated_postgres", "s3_bucket", "stoppable_bucket", "two_dates_crawled"]
