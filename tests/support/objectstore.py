"""A real S3-compatible server for the tests: moto's standalone server on 127.0.0.1.

``moto_endpoint`` (one per session) starts ``moto.server`` as a subprocess on a free port, waits
until it answers an HTTP request (polled, with a deadline) and stops it at the end.
``s3_bucket`` gives each test a bucket of its own and the standard AWS environment variables for
that test only; the bucket and its objects are removed afterwards (moto keeps them in memory).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from archiver.store.objectstore import s3_client

STARTUP_DEADLINE = 60.0
_REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server running for the whole session."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": _REGION}
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE
        while not _answers(endpoint + "/"):
            if server.poll() is not None:
                output = server.stderr.read().decode(errors="replace") if server.stderr else ""
                raise RuntimeError(f"moto server exited with {server.returncode}: {output}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not answer on {endpoint} in {STARTUP_DEADLINE} s")
            time.sleep(0.05)
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stderr:
            server.stderr.close()


@dataclass(frozen=True)
class S3Bucket:
    """A fresh bucket on the test server, and a client for it."""

    endpoint: str
    name: str
    client: Any


@pytest.fixture
def s3_bucket(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Bucket]:
    """A bucket of this test's own, with the AWS credentials in the environment for this test."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", _REGION)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    client = s3_client(moto_endpoint, _REGION)
    name = f"test-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=name)
    yield S3Bucket(moto_endpoint, name, client)
    for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
        client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=name, Key=item["Key"])
    client.delete_bucket(Bucket=name)
