"""The replay's catalog turns (archiver.replay.scan): lookups go before listings at every turn, a
listing past the bound is refused at once with a Retry-After, and reads run on a real SQLite
catalog in worker threads of their own."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from archiver.replay.scan import RETRY_AFTER, Scan, ScanBusy, Scanner, Turns
from archiver.store.catalogkeys import surt_key
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture

URL = "http://example.org/"


async def test_the_turn_goes_to_lookups_first_then_to_listings_in_arrival_order():
    turns = Turns()
    order: list[str] = []
    await turns.acquire(lookup=False)

    async def wait(name: str, lookup: bool) -> None:
        await turns.acquire(lookup)
        order.append(name)
        turns.release()

    async with trio.open_nursery() as nursery:
        arrivals = [("listing 1", False), ("lookup 1", True), ("listing 2", False), ("lookup 2", True)]
        for name, lookup in arrivals:
            nursery.start_soon(wait, name, lookup)
            await trio.testing.wait_all_tasks_blocked()
        turns.release()
    assert order == ["lookup 1", "lookup 2", "listing 1", "listing 2"]
    await turns.acquire(lookup=False)  # free again: taken at once
    turns.release()


async def test_a_waiter_cancelled_leaves_the_turn_to_the_next():
    turns = Turns()
    await turns.acquire(lookup=True)
    order: list[str] = []
    gone = trio.CancelScope()

    async def wait(name: str, scope: trio.CancelScope) -> None:
        with scope:
            await turns.acquire(lookup=False)
            order.append(name)
            turns.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, "cancelled", gone)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(wait, "next", trio.CancelScope())
        await trio.testing.wait_all_tasks_blocked()
        gone.cancel()
        await trio.testing.wait_all_tasks_blocked()
        turns.release()
    assert order == ["next"]


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    catalog = Catalog(tmp_path / "catalog", 1)
    catalog.add(Capture(surt_key(URL), f"2020010100{n // 60:02d}{n % 60:02d}", URL, 200, "text/html", "d",
                        None, "a.warc.gz", n, 1) for n in range(3000))
    return catalog


async def test_a_listing_past_the_bound_is_refused_at_once_and_a_lookup_still_runs(catalog):
    scanner = Scanner(catalog, slice_rows=100, max_rows=10**6, deadline=60, listings=1)
    release = threading.Event()

    def held(scan: Scan) -> int:
        count = sum(1 for _ in scan.rows(scan.catalog.walk(URL, "0" * 14, forward=True)))
        release.wait(30)
        return count

    def one(scan: Scan) -> str:
        return next(scan.rows(scan.catalog.walk(URL, "9" * 14, forward=False))).timestamp

    first: list[int] = []

    async def hold() -> None:
        first.append(await scanner.collect(held))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(ScanBusy) as refused:
            await scanner.collect(one)
        assert (refused.value.status, refused.value.retry_after) == (503, RETRY_AFTER)
        release.set()
    assert first == [3000]
    assert await scanner.look_up(one) == "20200101004959"
    assert await scanner.collect(one) == "20200101004959"  # room again

