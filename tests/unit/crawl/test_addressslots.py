"""Per-address politeness: address slots, one holder per address at a time."""

from __future__ import annotations

import trio

from archiver.crawl.addressslots import AddressSlots


async def test_slots_are_per_address_and_forgotten_when_free():
    slots = AddressSlots(1)
    await slots.acquire("127.0.0.1")
    await slots.acquire("127.0.0.2")                         # another address: no wait
    got = trio.Event()

    async def second():
        await slots.acquire("127.0.0.1")
        got.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        await trio.testing.wait_all_tasks_blocked()
        assert not got.is_set() and slots.contended("127.0.0.1")
        slots.release("127.0.0.1")
        await got.wait()
    slots.release("127.0.0.1")
    slots.release("127.0.0.2")
    assert not slots._slots and not slots._users
