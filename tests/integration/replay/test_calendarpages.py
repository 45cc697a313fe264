"""The capture calendars over real HTTP: a URL's captures by year and day (``/web/*/<url>``,
``/web/<digits>*/<url>``) and a host's pages per day (``/calendar/<host>``), from WARCs written
record by record years apart; their links, their 400s and 404s, and their listings' row cap."""

from __future__ import annotations

import re

import pytest

from archiver.config import Config
from tests.integration.replay.datedwarcs import Record, minimal_config, write_dated_archive
from tests.support.rawhttp import get
from tests.support.replayarchive import serving

URL = "http://cal.test/page"
RECORDS = [
    Record(URL, "20240229080000"),
    Record(URL, "20250601090000"),
    Record(URL, "20250601173000"),
    Record(URL, "20260105100000"),
    Record(URL, "20260310111111"),
    Record("http://cal.test/a", "20250601100000"),
    Record("http://cal.test/a", "20250601110000"),
    Record("http://cal.test/b", "20260105120000"),
    Record("https://cal.test/c", "20260105130000"),  # the other scheme: the same host
    Record("http://www.cal.test/d", "20260105140000"),  # www. folded, as SURT keys fold it
    Record("http://other.test/", "20260105100000"),  # other hosts are not counted
    Record("http://cal.test:8080/x", "20260105100000"),
]


@pytest.fixture(scope="module")
def dated(tmp_path_factory) -> Config:
    config = minimal_config(tmp_path_factory.mktemp("calendar"))
    write_dated_archive(config, RECORDS)
    return config


async def page(origin: str, path: str, status: int = 200) -> str:
    got, headers, body = await get(origin, path)
    assert got == status, (path, body[:300])
    assert headers["content-type"].startswith("text/html")
    text = body.decode()
    assert "<script" not in text and "a:focus-visible" in text  # no JavaScript; visible focus
    return text


def bars(text: str) -> dict[int, int]:
    """The year bars that are links: year -> count, from their labels."""
    return {int(y): int(n) for y, n in re.findall(r'<a href="[^"]*" title="(\d{4}): (\d+) \w+"', text)}


def current_year(text: str) -> int:
    found = re.search(r'title="(\d{4}): [^"]*" aria-label="[^"]*" class="current" aria-current="page"', text)
    assert found is not None
    return int(found.group(1))


def day(text: str, label: str) -> str:
    """The link of the day cell whose label starts with ``label`` ("5 January 2026")."""
    found = re.search(rf'<a href="[^"]*" title="[^"]*" aria-label="{label}: [^"]*"[^>]*>\d+</a>', text)
    assert found is not None, label
    return found.group(0)


async def test_a_urls_calendar_shows_the_latest_year_by_day(dated):
    async with serving(dated) as replay:
        text = await page(replay.app_at, f"/web/*/{URL}")
    assert "5 captures, from 2024-02-29 08:00:00 to 2026-03-10 11:11:11 (UTC)" in text
    assert bars(text) == {2024: 1, 2025: 2, 2026: 2} and current_year(text) == 2026
    assert f'href="{replay.app}/web/2024*/{URL}"' in text
    assert '<h2 id="calendar">2026</h2>' in text and text.count('<table class="month"') == 12
    assert day(text, "5 January 2026") == (
        '<a href="#d20260105" title="1 capture (UTC): 10:00:00" aria-label="5 January 2026: 1 capture">5</a>')
    assert '<tr class="day" id="d20260105"><th>2026-01-05</th>' in text
    assert f'href="{replay.content}/web/20260105100000/{URL}"' in text
    assert f'href="{replay.content}/web/20250601090000/{URL}"' not in text  # another year's
    assert '<h2 id="y2026">' in text and '<h2 id="y2025">' not in text
    assert f'href="{replay.app}/calendar/cal.test"' in text


async def test_a_year_in_the_path_chooses_the_calendar(dated):
    async with serving(dated) as replay:
        leap = await page(replay.app_at, f"/web/2024*/{URL}")
        busy = await page(replay.app_at, f"/web/2025*/{URL}")
    assert current_year(leap) == 2024 and bars(leap) == {2024: 1, 2025: 2, 2026: 2}
    assert 'href="#d20240229"' in day(leap, "29 February 2024")
    one = day(busy, "1 June 2025")
    assert 'title="2 captures (UTC): 09:00:00, 17:30:00"' in one
    assert 'aria-label="1 June 2025: 2 captures"' in one
    assert '<td class="l2"><a href="#d20250601"' in busy


async def test_a_day_in_the_path_lists_that_day_and_links_the_others(dated):
    async with serving(dated) as replay:
        text = await page(replay.app_at, f"/web/20260105*/{URL}")
    assert current_year(text) == 2026
    assert "1 capture whose timestamp starts with 20260105" in text
    assert 'aria-current="date"' in day(text, "5 January 2026")
    assert f'href="{replay.app}/web/20260310*/{URL}#d20260310"' in day(text, "10 March 2026")
    assert re.findall(r'<tr class="day" id="(d\d+)">', text) == ["d20260105"]


async def test_nothing_captured_is_a_404_that_still_shows_the_years(dated):
    async with serving(dated) as replay:
        text = await page(replay.app_at, f"/web/1999*/{URL}", 404)
        nowhere = await page(replay.app_at, "/web/*/http://nowhere.test/", 404)
    assert bars(text) == {2024: 1, 2025: 2, 2026: 2} and "0 captures whose timestamp starts with 1999" in text
    assert "0 captures" in nowhere and '<table class="month"' not in nowhere


async def test_a_hosts_calendar_counts_pages_per_day(dated):
    async with serving(dated) as replay:
        text = await page(replay.app_at, "/calendar/cal.test")
    assert "5 URLs captured 10 times, from 2024-02-29 08:00:00 to 2026-03-10 11:11:11 (UTC)" in text
    assert bars(text) == {2024: 1, 2025: 2, 2026: 4} and current_year(text) == 2026
    assert f'href="{replay.app}/calendar/cal.test?year=2025"' in text
    january = day(text, "5 January 2026")
    assert f'href="{replay.app}/calendar/cal.test?day=20260105#day"' in january
    assert 'title="4 pages, 4 captures"' in january and 'aria-label="5 January 2026: 4 pages"' in january
    assert 'id="day"' not in text


async def test_a_hosts_calendar_of_a_year_and_of_a_day(dated):
    async with serving(dated) as replay:
        year = await page(replay.app_at, "/calendar/cal.test?year=2025")
        one = await page(replay.app_at, "/calendar/cal.test?day=20250601")
        empty = await page(replay.app_at, "/calendar/cal.test?day=20250602")
    assert current_year(year) == 2025 and 'title="2 pages, 4 captures"' in day(year, "1 June 2025")
    assert current_year(one) == 2025 and 'aria-current="date"' in day(one, "1 June 2025")
    listed = re.findall(r'<td><a href="([^"]+)">(\d\d:\d\d:\d\d)</a></td>', one)
    assert listed == [(f"{replay.content}/web/20250601090000/{URL}", "09:00:00"),
                      (f"{replay.content}/web/20250601100000/http://cal.test/a", "10:00:00"),
                      (f"{replay.content}/web/20250601110000/http://cal.test/a", "11:00:00"),
                      (f"{replay.content}/web/20250601173000/{URL}", "17:30:00")]  # fmt: skip
    assert "2025-06-01 <span" in one and "(2 pages)" in one
    assert "No capture of cal.test on that day." in empty


@pytest.mark.parametrize(
    "path",
    ["/calendar/cal.test?year=abc", "/calendar/cal.test?year=20250", "/calendar/cal.test?year=0000",
     "/calendar/cal.test?day=20250230", "/calendar/cal.test?day=2025",
     "/calendar/cal.test?year=2024&day=20250601",
     "/calendar/cal.test:99999", "/calendar/[zz]"],
)  # fmt: skip
async def test_bad_calendar_requests_are_a_400(dated, path):
    async with serving(dated) as replay:
        status, headers, body = await get(replay.app_at, path)
    assert status == 400, (path, body[:200])
    assert headers["content-type"].startswith("text/plain") and body.startswith(b"400 Bad Request: ")


async def test_a_host_without_captures_is_a_404(dated):
    async with serving(dated) as replay:
        text = await page(replay.app_at, "/calendar/nowhere.test", 404)
    assert "0 URLs captured 0 times" in text


async def test_calendars_read_within_the_row_cap(dated):
    async with serving(dated, scan_max_rows=4) as replay:
        for path in ("/calendar/cal.test", f"/web/*/{URL}", f"/web/2024*/{URL}"):
            status, _, body = await get(replay.app_at, path)
            assert status == 400 and b"examines more than 4 catalog rows" in body, path
        assert (await get(replay.app_at, "/calendar/other.test"))[0] == 200
