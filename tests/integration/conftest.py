"""Fixtures of the integration tests: the real servers they run against."""

from tests.support.objectstore import moto_endpoint, s3_bucket

__all__ = ["moto_endpoint", "s3_bucket"]
