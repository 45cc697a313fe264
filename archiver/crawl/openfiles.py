"""The crawler's one budget of open files, checked at start against ``RLIMIT_NOFILE``.

A crawler holds descriptors in a few pools: each site it visits (its socket, its crawl queue's log,
cursor, decision log and day budget, and the duplicates a group commit fsyncs), a fixed set (stdio,
trio's epoll and wake-up pair, the WARC bundle, the site queue, DNS history, inbox database, digest
index, spool, status and lock files), and the catalog: two handles (the group commit's writer and
a recrawl's lookups), each keeping shard connections open in an LRU at three descriptors each
(database, -wal, -shm). Sites are bounded by ``crawl.sites_per_process``; the shards a crawl
touches are not (a breadth crawl of 2,000 sites touched 435 and held 2,577 descriptors for them).
So each handle keeps at most ``CONNECTIONS_PER_SITE`` shard connections per site visited at once
(a visit writes to and looks up in its host's shard; the others serve sites that just finished,
whose entries the next group commit adds), and ``budget`` checks that this fits in the limit with
``1/SPARE`` of it free, giving the handles less if it does not. A crawl of any size then keeps a
flat descriptor count well inside the limit.

At start the soft limit is raised to the hard one where allowed (systemd's default is 1024 soft,
524288 hard), and the outcome logged (``open-files``); a limit too low for the configured sites
and ``MIN_CONNECTIONS`` per handle is refused with a message saying what to raise.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

PER_SITE = 8  # socket, crawl-queue log (writer, reader), cursor, decisions, budget, fsync duplicates
FIXED = 48  # descriptors of the process whatever it visits
PER_CONNECTION = 3  # a WAL database: the file, -wal and -shm
CATALOG_HANDLES = 2  # the group commit's writer, a recrawl's lookups
MIN_CONNECTIONS = 8  # shard connections per handle below which every group commit would churn
CONNECTIONS_PER_SITE = 2  # shard connections per handle for each site visited at once
SPARE = 8  # 1/SPARE of the limit stays free: SQLite's temporary files, imports, a burst of sockets
# Asked for when the hard limit is unlimited: more than any crawler uses, and not so many that a
# runaway leak goes unnoticed.
UNLIMITED = 1 << 20


class FileLimitError(Exception):
    """``RLIMIT_NOFILE`` is too low for the configured crawl."""


@dataclass(frozen=True)
class FileBudget:
    """The limit the crawler runs under, and the shard connections each catalog handle keeps."""

    limit: int
    catalog_connections: int


def budget(limit: int, sites: int, shards: int) -> FileBudget:
    """Split ``limit`` descriptors for ``sites`` sites at once and a catalog of ``shards`` shards;
    FileLimitError if the catalog handles would get fewer than ``MIN_CONNECTIONS`` each."""
    spare = limit - limit // SPARE - FIXED - PER_SITE * sites
    connections = min(shards, max(MIN_CONNECTIONS, CONNECTIONS_PER_SITE * sites),
                      spare // (PER_CONNECTION * CATALOG_HANDLES))
    if connections < min(shards, MIN_CONNECTIONS):
        fixed = FIXED + PER_SITE * sites + PER_CONNECTION * CATALOG_HANDLES * min(shards,
                                                                                  MIN_CONNECTIONS)
        needed = -(-fixed * SPARE // (SPARE - 1))  # fixed plus the spare part, rounded up
        raise FileLimitError(
            f"the open-files limit (RLIMIT_NOFILE) is {limit}: crawl.sites_per_process = {sites} "
            f"needs at least {needed} (raise LimitNOFILE= in the unit, or ulimit -n, or lower "
            "crawl.sites_per_process)")
    return FileBudget(limit, connections)


def raise_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one where allowed: (soft before, soft now, hard),
    an unlimited one given as ``UNLIMITED``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft, wanted = (UNLIMITED if n == resource.RLIM_INFINITY else n for n in (soft, hard))
    if soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):  # a hard limit above the kernel's nr_open, a sandbox
            return soft, soft, wanted
        return soft, wanted, wanted
    return soft, soft, wanted
