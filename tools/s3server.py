"""moto's standalone S3 server on 127.0.0.1, for the tests and the object-store benchmark.

``running_moto()`` starts ``moto.server`` (the ``moto[server]`` test dependency) as a subprocess
on a free port, waits until it answers an HTTP request (polled, with a deadline), yields its
endpoint URL and stops it on the way out. moto keeps every object in its memory.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

STARTUP_DEADLINE = 60.0
REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": REGION}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    # Straight to loopback: a proxy named in the environment must not stand in between.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextlib.contextmanager
def running_moto() -> Iterator[str]:
    """The endpoint URL of a moto S3 server that runs until the block ends."""
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # The server logs every request on stderr: a file, not a pipe nobody drains.
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env={**os.environ, **CREDENTIALS}, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + STARTUP_DEADLINE
            while not _answers(endpoint + "/"):
                if server.poll() is not None:
                    log.seek(0)
                    output = log.read().decode(errors="replace")
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
