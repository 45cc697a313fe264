"""`archiver status --sites`: each site's state, next visit and change rate, as JSON and as text."""

from __future__ import annotations

from archiver.commands.status import describe_site, site_line
from archiver.queues.models import SiteRow
from archiver.queues.revisits import ChangeHistory

DAY = 86400.0
NOW = 1_800_000_000.0


def row(**changes: object) -> SiteRow:
    base = SiteRow(origin="http://a.test", state="revisit", due=NOW + 2 * DAY, inlinks=4,
                   attempts=0, added=0.0, visits=3, note="", restart=False,
                   next_visit=NOW + 2 * DAY, history=ChangeHistory(10, 5, 10 * DAY))
    return base._replace(**changes)


def test_a_site_waiting_for_its_revisit_shows_when_and_how_often_it_changes():
    site = describe_site(row(), NOW)
    assert site["next_visit"] == "2027-01-17T08:00:00Z" and site["next_visit_in_days"] == 2.0
    assert site["change_rate_per_day"] == round(ChangeHistory(10, 5, 10 * DAY).rate() * DAY, 4)
    line = site_line(site)
    assert line.startswith("http://a.test  revisit  visits=3  inlinks=4  hops=0  priority=0.0  ")
    far = describe_site(row(hops=3, priority=1.5), NOW)
    assert (far["hops"], far["priority"]) == (3, 1.5) and "hops=3  priority=1.5" in site_line(far)
    assert "next_visit=2027-01-17T08:00:00Z (in 2.0 days)" in line
    assert "(5 of 10 pages compared changed)" in line


def test_a_site_never_revisited_has_no_rate_and_a_done_one_no_due_time():
    fresh = describe_site(row(state="waiting", due=NOW, next_visit=0.0, history=ChangeHistory()), NOW)
    assert fresh["next_visit"] is None and fresh["change_rate_per_day"] is None
    assert fresh["due"] == "2027-01-15T08:00:00Z"
    assert "change_rate" not in site_line(fresh) and "due=" in site_line(fresh)
    done = describe_site(row(state="done", next_visit=0.0, note="max_pages"), NOW)
    assert done["due"] is None and "note='max_pages'" in site_line(done)
