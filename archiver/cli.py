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
    site,
    status,
    store,
    why,
)
from archiver.commands.common import InputError, deprecated, fail, file_error, store_failure
from archiver.stores import StoreUnavailable

# In the order ``archiver --help`` lists them.
VERBS = (crawl, seeds, links, replay, status, site, robots, why, scope, focus, search, imports,
         export, catalog, store, dns)
# The verbs whose old spelling had no sub-verb (``archiver crawl --config F``, ``archiver dns
# --config F``, ``archiver search WORDS``): the sub-verb that spelling means now. It keeps working,
# with a warning, until the next release.
FIRST_WORDS = {"crawl": "run", "dns": "run", "replay": "run", "search": "query"}


def parser() -> argparse.ArgumentParser:
    """The whole command line: every verb and its arguments."""
    p = argparse.ArgumentParser(prog="archiver", description="An archival web crawler.")
    p.add_argument("--version", action="version", version=f"archiver {__version__}")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in VERBS:
        module.add(verbs)
    return p


def new_spelling(p: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` in the current spelling: the sub-verb ``FIRST_WORDS`` names put in where an old
    spelling leaves it out (saying so on stderr), and a sub-verb given after options put first."""
    if not argv or argv[0] not in FIRST_WORDS:
        return argv
    name, rest = argv[0], argv[1:]
    sub_verbs = _sub_verbs(p, name)
    taking_values = {option for sub in sub_verbs.values() for action in sub._actions
                     if action.nargs != 0 for option in action.option_strings}
    first = _first_positional(rest, taking_values)
    if first is not None and rest[first] in sub_verbs:
        return [name, rest[first], *rest[:first], *rest[first + 1:]]
    if not rest or (first is None and {"-h", "--help"} & set(rest)):
        return argv  # the verb's own help, or its usage error
    word = FIRST_WORDS[name]
    rest_shown = " WORDS" if word == "query" else " ..."
    deprecated(f"archiver {name}{rest_shown}", f"archiver {name} {word}{rest_shown}")
    return [name, word, *rest]


def _sub_verbs(p: argparse.ArgumentParser, name: str) -> dict[str, argparse.ArgumentParser]:
    """The sub-verbs of the verb ``name``, by name."""
    verbs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    group = next(a for a in verbs.choices[name]._actions if isinstance(a, argparse._SubParsersAction))
    return dict(group.choices)


def _first_positional(args: list[str], taking_values: set[str]) -> int | None:
    """The index of the first argument that is neither an option nor an option's value."""
    skip = False
    for n, arg in enumerate(args):
        if skip:
            skip = False
        elif arg == "--":
            return n + 1 if n + 1 < len(args) else None
        elif arg.startswith("-") and len(arg) > 1:
            skip = arg in taking_values
        else:
            return n
    return None


def _store_errors() -> tuple[type[Exception], ...]:
    """The errors of a store the config names that cannot be used: StoreUnavailable, and the
    PostgreSQL stores' StoreError if a verb has loaded them (nothing raises it before), so that
    ``main`` catches it without importing psycopg."""
    pgschema = sys.modules.get("archiver.store.postgres.schema")
    return (StoreUnavailable,) if pgschema is None else (StoreUnavailable, pgschema.StoreError)


def main(argv: list[str] | None = None) -> int:
    # What archiver creates is readable by its own user and group only (directories 0750, files
    # 0640): an archive holds whatever the crawled web served, cookies and all.
    os.umask(0o027)
    p = parser()
    args = p.parse_args(new_spelling(p, sys.argv[1:] if argv is None else list(argv)))
    try:
        return args.func(args)
    except _store_errors() as e:
        # a store the config names cannot be used
        return fail(str(e))
    except InputError as e:  # bad input a verb found past its own checks (no catalog yet, ...)
        return fail(str(e))
    except sqlite3.DatabaseError as e:  # an archive's SQLite file that cannot be read (corrupt)
        return store_failure(args.verb, e)
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
    except OSError as e:  # a file or folder that cannot be made, written or read (archive.root...)
        return store_failure(args.verb, file_error(e))


if __name__ == "__main__":
    sys.exit(main())
