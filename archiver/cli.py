"""The ``archiver`` command: a dispatcher to its verbs, one module each in ``archiver.commands``.

Exit codes: 0 success, 1 a failure while running, 2 bad usage or bad input (config, seeds); each
verb's ``--help`` lists its own.

Each verb imports what it needs inside its ``run``, not at the top of its module: every command
starts a Python process, and a lookup (``catalog closest``, ``dns lookup``, ``status``) should not
wait for the crawler, trio, the DNS service, psycopg, boto3 or numpy to load
(``tests/integration/test_cli_imports.py`` holds that line).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys

from archiver import __version__
from archiver.commands import (
    catalog,
    crawl,
    dns,
    export,
    focus,
    imports,
    links,
    replay,
    robots,
    scope,
    search,
    seeds,
    status,
    store,
    why,
)
from archiver.commands.common import fail, store_failure
from archiver.stores import StoreUnavailable

# In the order ``archiver --help`` lists them.
VERBS = (crawl, seeds, links, replay, status, robots, why, scope, focus, search, imports, export,
         catalog, store, dns)


def parser() -> argparse.ArgumentParser:
    """The whole command line: every verb and its arguments."""
    p = argparse.ArgumentParser(prog="archiver", description="An archival web crawler.")
    p.add_argument("--version", action="version", version=f"archiver {__version__}")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in VERBS:
        module.add(verbs)
    return p


def _store_errors() -> tuple[type[Exception], ...]:
    """The errors of a store the config names that cannot be used: StoreUnavailable, and the
    PostgreSQL stores' StoreError if a verb has loaded them (nothing raises it before), so that
    ``main`` catches it without importing psycopg."""
    pgschema = sys.modules.get("archiver.store.pgschema")
    return (StoreUnavailable,) if pgschema is None else (StoreUnavailable, pgschema.StoreError)


def main(argv: list[str] | None = None) -> int:
    # What archiver creates is readable by its own user and group only (directories 0750, files
    # 0640): an archive holds whatever the crawled web served, cookies and all.
    os.umask(0o027)
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except _store_errors() as e:
        # a store the config names cannot be used
        return fail(str(e))
    except sqlite3.DatabaseError as e:  # an archive's SQLite file that cannot be read (corrupt)
        return store_failure(args.verb, e)
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it


if __name__ == "__main__":
    sys.exit(main())
