"""The replay service's pure parts: escaped pages and the listen address."""

from __future__ import annotations

import pytest

from archiver.replay import pages
from archiver.replay.serve import parse_listen
from archiver.store.models import Capture


def test_pages_escape_archived_values():
    capture = Capture(
        "a)/", "20261122000000", 'http://a.org/"><script>', 200, "text/<b>", "d", None, "f", 0, 1
    )
    page = pages.capture_list(prefix="", content="", url='http://a.org/"><script>', captures=[capture])
    assert "<script>" not in page and "&lt;script&gt;" in page and "text/&lt;b&gt;" in page


# --- the service process ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("127.0.0.1:8080", ("127.0.0.1", 8080)), ("8081", ("127.0.0.1", 8081)), ("[::1]:0", ("::1", 0)),
     ("0.0.0.0:80", ("0.0.0.0", 80))],
)  # fmt: skip
def test_parse_listen(text, parsed):
    assert parse_listen(text) == parsed


@pytest.mark.parametrize(
    "text", ["", "localhost:8080", "127.0.0.1", "127.0.0.1:99999", "::1:80", "[::1]", "a:b"]
)
def test_parse_listen_refuses(text):
    with pytest.raises(ValueError, match="listen address"):
        parse_listen(text)
