"""archiver.dns.resolver: when a name is checked again."""

from __future__ import annotations

from archiver.dns.resolver import Answer, next_check
from archiver.store.models import Observation

AGES = {"min_age": 100.0, "max_age": 1000.0, "retry_base": 10.0, "retry_max": 80.0}


def test_next_check_clamps_ttl_and_backs_off():
    ok = Answer("a.test", Observation("a.test", "a.test", (), ("192.0.2.1",), 300.0), "ok", 300.0)
    assert next_check(ok, 1000.0, failures=0, **AGES) == 1300.0
    short = Answer("a.test", Observation("a.test", "a.test", (), ("192.0.2.1",), 5.0), "ok", 5.0)
    assert next_check(short, 1000.0, failures=0, **AGES) == 1100.0
    long = Answer("a.test", Observation("a.test", "a.test", (), ("192.0.2.1",), 86400.0), "ok", 86400.0)
    assert next_check(long, 1000.0, failures=0, **AGES) == 2000.0
    timeout = Answer("a.test", None, "timeout", 0.0)
    assert [next_check(timeout, 1000.0, failures=n, **AGES) - 1000.0 for n in range(1, 7)] == [
        10.0,
        20.0,
        40.0,
        80.0,
        80.0,
        80.0,
    ]
    assert next_check(timeout, 0.0, failures=10_000, **AGES) == 80.0
    nxdomain = Answer("a.test", None, "nxdomain", 0.0)
    assert next_check(nxdomain, 1000.0, failures=1, **AGES) == 1100.0
    empty = Answer("a.test", None, "no-address", 0.0)
    assert next_check(empty, 1000.0, failures=1, **AGES) == 1100.0
    wide = {**AGES, "retry_max": 500.0}
    assert next_check(nxdomain, 1000.0, failures=5, **wide) == 1160.0  # back-off beyond min_age
