"""Site queues written by earlier releases, for the tests of their upgrade on open."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def first_site_queue(path: Path, sites: list[tuple[str, str, int]]) -> None:
    """A site queue as the first release wrote it (no recrawl, revisit, hops or priority columns),
    holding ``sites`` as (origin, state, in-links)."""
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE sites (origin TEXT PRIMARY KEY, state TEXT NOT NULL DEFAULT 'waiting', "
               "due REAL NOT NULL DEFAULT 0, inlinks INTEGER NOT NULL DEFAULT 0, attempts INTEGER "
               "NOT NULL DEFAULT 0, added REAL NOT NULL, visits INTEGER NOT NULL DEFAULT 0, "
               "note TEXT NOT NULL DEFAULT '')")
    db.execute("CREATE INDEX sites_ready ON sites (state, inlinks DESC, due)")
    db.executemany("INSERT INTO sites (origin, state, inlinks, added) VALUES (?, ?, ?, 0)", sites)
    db.commit()
    db.close()
