"""Leases: the holder's own deadline, earlier than the database's, and what ends a lease."""

from archiver.queues.leases import Leases, lost_to, safety_margin


def test_a_lease_is_safe_until_the_ttl_less_a_margin_from_when_it_was_asked_for():
    leases = Leases(ttl=30.0)
    leases.granted("http://a.test", 7, sent_at=100.0)
    assert leases.epoch("http://a.test") == 7
    assert leases.holds("http://a.test", 100.0 + 30.0 - safety_margin(30.0) - 0.001)
    assert not leases.holds("http://a.test", 100.0 + 30.0 - safety_margin(30.0))
    leases.renewed({"http://a.test"}, sent_at=120.0)
    assert leases.holds("http://a.test", 140.0)


def test_a_renewal_never_shortens_a_lease_and_ignores_sites_no_longer_held():
    leases = Leases(ttl=10.0)
    leases.granted("http://a.test", 1, sent_at=50.0)
    leases.renewed({"http://a.test", "http://gone.test"}, sent_at=40.0)  # an old snapshot
    assert leases.holds("http://a.test", 57.0)
    assert leases.held() == {"http://a.test": 1}


def test_a_lost_lease_is_remembered_until_the_visit_lets_go():
    leases = Leases(ttl=10.0)
    leases.granted("http://a.test", 3, sent_at=0.0)
    leases.lose("http://a.test")
    assert not leases.holds("http://a.test", 1.0) and leases.epoch("http://a.test") is None
    assert leases.lost == {"http://a.test"}
    leases.drop("http://a.test")
    assert leases.lost == set()
    leases.granted("http://a.test", 5, sent_at=2.0)
    assert leases.holds("http://a.test", 3.0)


def test_the_margin_is_a_tenth_of_the_ttl_within_bounds():
    assert safety_margin(300.0) == 30.0
    assert safety_margin(5.0) == 1.0
    assert safety_margin(1.0) == 0.5


def test_a_lost_lease_is_reported_once_with_its_cause():
    faults = []
    leases = Leases(ttl=10.0, report=lambda _log, _level, name, **fields: faults.append((name, fields)))
    leases.granted("http://a.test", 3, sent_at=0.0)
    cause = lost_to(("active", 1, 4))
    leases.lose("http://a.test", during="renew", cause=cause)
    leases.lose("http://a.test", during="finish", cause=cause)        # known already: not again
    assert faults == [("lease-lost", {"site": "http://a.test", "epoch": 3, "during": "renew",
                                      "cause": "process 1 holds it now (epoch 4)"})]
    assert lost_to(("done", None, 4)) == "the site is done now (epoch 4)"
