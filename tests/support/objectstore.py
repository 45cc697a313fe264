"""A real S3-compatible server for the tests: moto's standalone server on 127.0.0.1.

``moto_endpoint`` (one per session) runs it (``tools.s3server.running_moto``: a subprocess on a
free port, waited for by polling a request with a deadline) and stops it at the end.
``s3_bucket`` gives each test a bucket of its own and the standard AWS environment variables for
that test only; the bucket and its objects are removed afterwards (moto keeps them in memory).
``stoppable_bucket`` is such a bucket reached through a ``StoppableEndpoint`` (tools.s3server):
the test stops the endpoint (the store is away: connections refused) and starts it again on the
same port, the objects kept.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from archiver.store.s3.objectstore import s3_client
from tools.s3server import CREDENTIALS, StoppableEndpoint, running_moto


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server running for the whole session."""
    with running_moto() as endpoint:
        yield endpoint


@dataclass(frozen=True)
class S3Bucket:
    """A fresh bucket on the test server, and a client for it."""

    endpoint: str
    name: str
    client: Any


@pytest.fixture
def s3_bucket(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Bucket]:
    """A bucket of this test's own, with the AWS credentials in the environment for this test."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    client = s3_client(moto_endpoint, CREDENTIALS["AWS_DEFAULT_REGION"])
    name = f"test-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=name)
    yield S3Bucket(moto_endpoint, name, client)
    for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
        client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=name, Key=item["Key"])
    client.delete_bucket(Bucket=name)


@dataclass(frozen=True)
class StoppableBucket:
    """A bucket whose endpoint (``bucket.endpoint``) the test may stop and start again."""

    bucket: S3Bucket
    endpoint: StoppableEndpoint


@pytest.fixture
def stoppable_bucket(s3_bucket: S3Bucket, moto_endpoint: str) -> Iterator[StoppableBucket]:
    """``s3_bucket`` behind an endpoint of its own that the test may stop and start."""
    endpoint = StoppableEndpoint(moto_endpoint)
    try:
        yield StoppableBucket(dataclasses.replace(s3_bucket, endpoint=endpoint.url), endpoint)
    finally:
        endpoint.close()
