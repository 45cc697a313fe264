"""What the verbs share: the options declared once (``--config``, ``--json``, the URL selector,
the dates), the way a verb is added to the parser, and the way it reports a failure.

Only light modules are imported here: every verb module imports this one, and ``archiver --help``
builds the whole parser (``tests/integration/test_cli_imports.py``).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from archiver import config
from archiver.stores import StoreUnavailable, check_stores, open_stores
from archiver.web import urls
from archiver.web.timestamps import parse_date

if TYPE_CHECKING:
    from archiver.store.interfaces import CatalogStore

Verbs = argparse._SubParsersAction  # what ``add_subparsers`` returns
Run = Callable[[argparse.Namespace], int]

SELECTOR_OPTIONS = {"exact": "--url", "prefix": "--prefix", "host": "--host", "domain": "--domain"}
DATE_HELP = "ISO 8601 (2026-11-22T03:15:00Z) or an archive timestamp of 4 to 14 digits"
USAGE_EXITS = {2: "bad usage or bad input (config, arguments, files)"}


class InputError(Exception):
    """Bad input on the command line: reported with exit code 2."""


def verb(verbs: Verbs, name: str, description: str, *, exits: dict[int, str],
         run: Run | None = None) -> argparse.ArgumentParser:
    """Add the verb ``name`` to ``verbs``: ``description`` (one line) as its help and description,
    its exit codes as its epilog, ``run`` as what it does (None: a group of sub-verbs)."""
    sub = verbs.add_parser(name, help=description, description=description[0].upper() + description[1:] + ".",
                           epilog=exit_codes(exits), formatter_class=argparse.RawDescriptionHelpFormatter)
    if run is not None:
        sub.set_defaults(func=run)
    return sub


def group(verbs: Verbs, name: str, description: str, dest: str) -> Verbs:
    """Add ``name``, a verb made of sub-verbs (each with its own exit codes), to ``verbs``."""
    sub = verb(verbs, name, description, exits=USAGE_EXITS)
    return sub.add_subparsers(dest=dest, required=True, metavar="VERB")


def exit_codes(exits: dict[int, str]) -> str:
    """The epilog of a verb's help: each exit status and what it means."""
    codes = {**exits, **USAGE_EXITS} if 2 not in exits else exits
    return "exit status:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in sorted(codes.items()))


def add_config(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--config FILE``, the TOML config of the archive."""
    parser.add_argument("--config", required=required, metavar="FILE",
                        help="the TOML config file of the archive (config/archiver.toml is the "
                             "commented reference)")


def add_json(parser: argparse.ArgumentParser, what: str = "the answer as JSON") -> None:
    parser.add_argument("--json", action="store_true", help=what)


def add_at(parser: argparse.ArgumentParser, *, required: bool = False, default: str = "now") -> None:
    parser.add_argument("--at", required=required, metavar="DATE",
                        help=DATE_HELP + ("" if required else f" (default: {default})"))


def add_dates(parser: argparse.ArgumentParser) -> None:
    """``--from DATE`` and ``--to DATE``: the only meaning of ``--from`` on the command line."""
    parser.add_argument("--from", dest="from_", metavar="DATE", help="from this date: " + DATE_HELP)
    parser.add_argument("--to", metavar="DATE", help="to this date (inclusive): " + DATE_HELP)


def add_selector(parser: argparse.ArgumentParser, *, required: bool, matches: tuple[str, ...]
                 ) -> argparse._MutuallyExclusiveGroup:
    """The URL selector: exactly one of ``--url``, ``--prefix``, ``--host`` (and ``--domain``
    where ``matches`` has it); ``selected`` reads it."""
    which = parser.add_mutually_exclusive_group(required=required)
    helps = {"exact": ("URL", "this URL"),
             "prefix": ("URL", "every URL under this one (a URL ending in / : that folder)"),
             "host": ("HOST", "every URL of this host, any scheme and port (HOST:PORT: that port "
                              "only)"),
             "domain": ("DOMAIN", "every URL of this domain and its subdomains, any port")}
    for match in matches:
        metavar, help_ = helps[match]
        which.add_argument(SELECTOR_OPTIONS[match], dest=f"select_{match}", metavar=metavar, help=help_)
    return which


def selected(args: argparse.Namespace) -> tuple[str, str] | None:
    """The URL selector's (match, URL as given), or None if none was given."""
    for match in SELECTOR_OPTIONS:
        given = getattr(args, f"select_{match}", None)
        if given is not None:
            return match, given
    return None


def load_config(args: argparse.Namespace, *, stores_built: bool = True) -> config.Config:
    """The config of ``--config``; ``stores_built`` also refuses stores this version cannot open yet."""
    if not getattr(args, "config", None):
        raise SystemExit(fail("--config FILE is required"))
    try:
        cfg = config.load(args.config)
        if stores_built:
            check_stores(cfg)
    except (config.ConfigError, StoreUnavailable) as e:
        raise SystemExit(fail(str(e))) from None
    for notice in cfg.notices:
        print(f"archiver: warning: {notice}", file=sys.stderr)
    return cfg


def fail(message: str) -> int:
    """Report bad usage or bad input: one line on stderr, exit status 2."""
    print(f"archiver: {message}", file=sys.stderr)
    return 2


def deprecated(old: str, new: str) -> None:
    """Say once on stderr that the spelling ``old`` is going: the next release drops it."""
    print(f"archiver: warning: `{old}` is deprecated and goes in the next release; use `{new}`",
          file=sys.stderr)


class _Renamed(argparse.Action):
    """The old spelling of an option: sets what the new one sets, and says it is deprecated."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)  # type: ignore[arg-type]
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        deprecated(f"{parser.prog} {option_string}", f"{parser.prog} {self.new}")
        setattr(namespace, self.dest, values)


def add_renamed(parser: argparse.ArgumentParser, old: str, new: str, dest: str,
                **kwargs: Any) -> None:
    """Accept ``old``, the option's spelling of the last release (hidden from the help), as ``new``
    (``kwargs``: what ``new`` is declared with, its ``type`` say)."""
    parser.add_argument(old, dest=dest, action=_Renamed, new=new, metavar=new.upper().lstrip("-"),
                        **kwargs)


def storage_errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    """``more``, and what the stores raise when a file, a database or the object store fails:
    evaluated by an ``except`` clause only once something was raised, so psycopg and boto3 load
    only then."""
    import psycopg

    from archiver.store.objectstore import ObjectStoreError

    return *more, OSError, sqlite3.Error, psycopg.Error, ObjectStoreError


def file_error(error: OSError) -> OSError | str:
    """An OSError as a reader wants it: "FILE: what went wrong" (``[Errno 20] ...`` dropped)."""
    if error.filename is None or not error.strerror:
        return error
    return f"{error.filename}: {error.strerror}"


def store_failure(verb: str, error: Exception | str) -> int:
    """Report a store's failure of ``verb`` (any password in a database URL masked): exit status 1."""
    from archiver.store.postgres.schema import redact

    print(f"archiver: {verb}: {redact(str(error)).strip()}", file=sys.stderr)
    return 1


def date(text: str, *, upper: bool = False) -> str:
    try:
        return parse_date(text, upper=upper)
    except ValueError as e:
        raise InputError(str(e)) from None


def url(text: str) -> str:
    """A URL to look up (``example.org/x`` means ``http://example.org/x``), normalised."""
    from archiver.store.catalogkeys import surt_key

    found = urls.normalize(text if "://" in text else "http://" + text)
    if found is None:
        raise InputError(f"cannot parse URL {text!r} (want an http or https URL)")
    try:
        surt_key(found)
    except ValueError as e:
        raise InputError(str(e)) from None
    return found


def catalog(cfg: config.Config) -> CatalogStore:
    """The catalog, read-only; InputError if there is none to read."""
    from archiver.store.models import CatalogError

    try:
        return open_stores(cfg).catalog(readonly=True)
    except CatalogError as e:
        raise InputError(str(e)) from None


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def iso(t: float | None) -> str:
    """A Unix time as ISO 8601 UTC to the second ("-" for None)."""
    from datetime import UTC, datetime

    if t is None:
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
