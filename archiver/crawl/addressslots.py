"""Per-address politeness: at most N connections to one IP address across a crawler process.

Names are not merged by address (virtual hosting and CDNs make that wrong today), but many names
on one address are one machine to its operator. A site visit takes a slot of its address before it
connects and keeps it, with its kept-alive connection, while nobody else waits for that address;
when another site waits, the holder closes its connection after the fetch and hands the slot over.
"""

from __future__ import annotations

import trio


class AddressSlots:
    """Connection slots per IP address (``per_address`` each), created on first use."""

    def __init__(self, per_address: int) -> None:
        self.per_address = per_address
        self._slots: dict[str, trio.Semaphore] = {}
        self._users: dict[str, int] = {}

    async def acquire(self, ip: str) -> None:
        slot = self._slots.get(ip)
        if slot is None:
            slot = self._slots[ip] = trio.Semaphore(self.per_address)
        self._users[ip] = self._users.get(ip, 0) + 1
        try:
            await slot.acquire()
        except BaseException:
            self._forget(ip)
            raise

    def release(self, ip: str) -> None:
        self._slots[ip].release()
        self._forget(ip)

    def contended(self, ip: str) -> bool:
        """True when a site is waiting for a slot of ``ip``."""
        slot = self._slots.get(ip)
        return slot is not None and slot.statistics().tasks_waiting > 0

    def _forget(self, ip: str) -> None:
        """Drop an address nobody holds or waits for, so memory follows active sites."""
        self._users[ip] -= 1
        if not self._users[ip]:
            del self._users[ip], self._slots[ip]
