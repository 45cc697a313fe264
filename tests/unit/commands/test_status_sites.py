"""`archiver status --sites`: each site's state, next visit and change rate, as JSON and as text;
a paused site in the overview and /metrics."""

from __future__ import annotations

import json

from archiver.commands.status import describe_site, site_line
from archiver.crawl.stats import Stats
from archiver.queues.embedded.sitequeue import SiteQueue, queue_path
from archiver.queues.models import SiteRow
from archiver.queues.revisits import ChangeHistory
from archiver.replay.statuspages import metrics_text
from archiver.store.status import summary_line

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


LOST = "session lost: http://a.test/members/p7 did not contain 'Log out'"


def test_a_paused_site_shows_why_and_its_gatekeepers_and_no_due_time():
    paused = describe_site(row(state="paused", due=NOW, next_visit=0.0, note=LOST,
                               gatekeepers=(("challenge", 12), ("rate-limit", 1))), NOW)
    assert (paused["state"], paused["note"], paused["due"]) == ("paused", LOST, None)
    assert paused["gatekeepers"] == {"challenge": 12, "rate-limit": 1}
    assert json.loads(json.dumps(paused))["gatekeepers"] == {"challenge": 12, "rate-limit": 1}
    line = site_line(paused)
    assert line.startswith("http://a.test  paused  ") and f"note={LOST!r}" in line
    assert "gatekeepers=challenge:12,rate-limit:1" in line and "due=" not in line
    assert describe_site(row(), NOW)["gatekeepers"] == {}
    assert "gatekeepers=" not in site_line(describe_site(row(), NOW))


def test_the_overview_and_metrics_count_paused_sites(tmp_path):
    with SiteQueue(queue_path(tmp_path, 0)) as queue:
        queue.add("http://a.test", now=0)
        queue.claim(include_deferred=False, now=0)
        queue.pause("http://a.test", LOST)
        status = Stats(process=0).snapshot(queue.counts())
    assert " paused=1 " in summary_line(status)
    assert 'archiver_sites{process="0",state="paused"} 1\n' in metrics_text([status])
    assert " paused=" not in summary_line(Stats(process=0).snapshot({"waiting": 1}))
