"""store.catalogkeys: the SURT keys and shards both catalogs share (an on-disk contract)."""

from __future__ import annotations

import pytest

from archiver.store.catalogkeys import shard_host, shard_of, surt_key


def test_surt_key_folds_like_pywb_and_refuses_hostless_urls() -> None:
    assert surt_key("https://WWW.Example.org/a?b=2&a=1") == "org,example)/a?a=1&b=2"
    assert surt_key("example.org") == "org,example)/"
    assert surt_key("Example.org:8080/a") == "org,example:8080)/a"  # not scheme "example.org"
    for bad in ["", "dns:example.org", "not a url", "http://"]:
        with pytest.raises(ValueError, match="not a usable URL"):
            surt_key(bad)


def test_shard_of_is_a_fixed_function_of_the_host_part() -> None:
    # The on-disk contract: these numbers must never change (existing catalogs depend on them).
    assert shard_host("org,example,www2:8080)/a/b") == "org,example,www2:8080"
    assert shard_of("org,example)/", 1000) == 78
    assert shard_of("org,example)/", 7) == 4
    assert shard_of("org,example)/deep/path?q=1", 1000) == 78
    assert shard_of(surt_key("http://www.example.org/x"), 1000) == shard_of(surt_key("example.org"), 1000)
