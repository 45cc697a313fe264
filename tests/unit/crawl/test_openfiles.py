"""The crawler's budget of open files (archiver.crawl.openfiles)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.config import Config
from archiver.crawl.openfiles import (
    CATALOG_HANDLES,
    CONNECTIONS_PER_SITE,
    FIXED,
    MIN_CONNECTIONS,
    PER_CONNECTION,
    PER_SITE,
    SPARE,
    FileLimitError,
    budget,
)


def test_the_default_crawl_under_common_limits():
    sites, shards = Config().crawl.sites_per_process, Config().catalog.shards
    assert budget(524_288, sites, shards).catalog_connections == 128  # systemd's hard limit
    assert budget(8192, sites, shards).catalog_connections == 128  # the unit's LimitNOFILE
    assert budget(1024, sites, shards).catalog_connections == 56  # systemd's soft limit
    with pytest.raises(FileLimitError, match=r"is 256: crawl.sites_per_process = 64 needs at "
                                             r"least 695 \(raise LimitNOFILE="):
        budget(256, sites, shards)
    assert budget(695, sites, shards).catalog_connections == MIN_CONNECTIONS
    assert budget(256, 16, shards).catalog_connections == MIN_CONNECTIONS
    assert budget(4096, 64, 20).catalog_connections == 20  # never more than the shards


@given(st.integers(1, 2**20), st.integers(1, 2000), st.integers(1, 5000))
def test_what_is_given_fits_the_limit_and_what_is_refused_could_not(limit, sites, shards):
    try:
        found = budget(limit, sites, shards)
    except FileLimitError as e:
        needed = int(str(e).split("needs at least ")[1].split()[0])
        assert needed > limit
        assert budget(needed, sites, shards).catalog_connections == min(shards, MIN_CONNECTIONS)
        return
    connections = found.catalog_connections
    assert min(shards, MIN_CONNECTIONS) <= connections <= min(
        shards, max(MIN_CONNECTIONS, CONNECTIONS_PER_SITE * sites))
    held = FIXED + PER_SITE * sites + PER_CONNECTION * CATALOG_HANDLES * connections
    assert held <= limit - limit // SPARE
