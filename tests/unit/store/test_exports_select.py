"""The captures ``archiver export --host`` takes: the host on any scheme and port, or on one port
when it names one; never a subdomain."""

from __future__ import annotations

from pathlib import Path

from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.exports import select
from archiver.store.models import Capture

URLS = ["http://example.org/a", "https://example.org/b", "http://example.org:8080/c",
        "https://www.example.org:8443/d", "http://sub.example.org/e", "http://example.net/f"]


def test_a_host_is_every_scheme_and_port_and_a_port_narrows_it(tmp_path: Path) -> None:
    with Catalog(tmp_path / "catalog", 50) as catalog:
        catalog.add(Capture(surt_key(url), f"202001010000{n:02d}", url, 200, "text/html", "sha1:X", None,
                            "A.warc.gz", n, 10) for n, url in enumerate(URLS))

        def urls(given: str) -> list[str]:
            return [c.url for c in select(catalog, given, "host", from_=None, to=None)]

        assert urls("http://example.org/") == URLS[:4]  # SURT folds www. and the scheme
        assert urls("http://example.org:8080/") == ["http://example.org:8080/c"]
        assert urls("http://sub.example.org/") == ["http://sub.example.org/e"]
