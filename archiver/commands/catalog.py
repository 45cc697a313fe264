"""``archiver catalog ...``: query and maintain the card catalog."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING

from archiver import config
from archiver.commands.common import (
    DATE_HELP,
    SELECTOR_OPTIONS,
    InputError,
    Run,
    Verbs,
    add_config,
    add_json,
    add_selector,
    catalog,
    date,
    deprecated,
    fail,
    group,
    load_config,
    selected,
    url,
    verb,
)
from archiver.stores import open_stores

if TYPE_CHECKING:
    from archiver.store.models import Capture

_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
FOUND = {0: "captures were found", 1: "none"}
WARCS_HELP = ("glob of WARC files (default: every closed bundle): a file-system glob, or with an "
              "object store (warc.store = \"s3://...\") a glob on the bundles' names")
JSON_HELP = "one CDXJ-style JSON object a line"
URL_HELP = "the URL (example.org/x means http://example.org/x)"


def add(verbs: Verbs) -> None:
    catalog_verbs = group(verbs, "catalog", "query and maintain the card catalog", "catalog_verb")

    def sub(name: str, description: str, exits: dict[int, str],
            action: Callable[[config.Config, argparse.Namespace], int]) -> argparse.ArgumentParser:
        parser = verb(catalog_verbs, name, description, exits=exits, run=_with_config(action))
        add_config(parser)
        return parser

    closest_ = sub("closest", "the capture nearest to a date (ties go to the earlier)",
                   {0: "a capture was found", 1: "none"}, closest)
    closest_.add_argument("url", metavar="URL", help=URL_HELP)
    closest_.add_argument("--at", required=True, metavar="DATE", help=DATE_HELP)
    add_json(closest_, JSON_HELP)
    captures_ = sub("captures", "all captures of a URL, in time order", FOUND, captures)
    captures_.add_argument("url", metavar="URL", help=URL_HELP)
    captures_.add_argument("--from", dest="from_", metavar="DATE", help=DATE_HELP)
    captures_.add_argument("--to", metavar="DATE", help=DATE_HELP)
    captures_.add_argument("--limit", type=int, metavar="N", help="at most N captures")
    add_json(captures_, JSON_HELP)
    listing = sub("list", "captures of a URL, under a URL prefix, of a host, or of a domain",
                  FOUND, list_)
    add_selector(listing, required=False, matches=("exact", "prefix", "host", "domain"))
    # The last release's spelling: URL [--match exact|prefix|host|domain].
    listing.add_argument("url", nargs="?", help=argparse.SUPPRESS)
    listing.add_argument("--match", choices=("exact", "prefix", "host", "domain"), help=argparse.SUPPRESS)
    listing.add_argument("--limit", type=int, metavar="N", help="at most N captures")
    add_json(listing, JSON_HELP)
    get_ = sub("get", "the archived payload of the capture nearest to a date",
               {0: "the payload was written", 1: "no capture"}, get)
    get_.add_argument("url", metavar="URL", help=URL_HELP)
    get_.add_argument("--at", required=True, metavar="DATE", help=DATE_HELP)
    get_.add_argument("-o", "--output", metavar="FILE", help="write to this file instead of standard output")
    get_.add_argument("--headers", action="store_true", help="the archived HTTP head first")
    export_ = sub("export-cdxj", "one sorted CDXJ index of all shards", {0: "the index was written"},
                  export_cdxj)
    export_.add_argument("-o", "--output", metavar="FILE",
                         help="write to this file instead of standard output")
    reindex_ = sub("reindex", "rebuild the catalog from the WARC files alone",
                   {0: "the catalog was rebuilt"}, reindex)
    reindex_.add_argument("--warcs", metavar="GLOB", help=WARCS_HELP)
    verify_ = sub("verify", "check the catalog against the WARC files",
                  {0: "the catalog and the WARC files agree", 1: "differences were found"}, verify)
    verify_.add_argument("--warcs", metavar="GLOB",
                         help=WARCS_HELP.replace("every closed bundle", "every bundle"))


def _with_config(action: Callable[[config.Config, argparse.Namespace], int]) -> Run:
    def run(args: argparse.Namespace) -> int:
        cfg = load_config(args)
        try:
            return action(cfg, args)
        except InputError as e:
            return fail(str(e))
    return run


def print_captures(captures: list[Capture], as_json: bool) -> None:
    for c in captures:
        if as_json:
            print(json.dumps(c.to_json()))
        else:
            status = c.status if c.status is not None else "-"
            print(f"{c.timestamp} {status} {c.mime} {c.url} {c.filename}:{c.offset}:{c.length}"
                  + (f" -> {c.redirect}" if c.redirect else ""))


def _closest(cfg: config.Config, args: argparse.Namespace) -> Capture | None:
    """The capture of ``args.url`` nearest to ``args.at``; says so on stderr when there is none."""
    wanted, at = url(args.url), date(args.at)
    with contextlib.closing(catalog(cfg)) as opened:
        found = opened.closest(wanted, at)
    if found is None:
        print(f"no capture of {wanted}", file=sys.stderr)
    return found


def closest(cfg: config.Config, args: argparse.Namespace) -> int:
    found = _closest(cfg, args)
    if found is None:
        return 1
    print_captures([found], args.json)
    return 0


def captures(cfg: config.Config, args: argparse.Namespace) -> int:
    wanted = url(args.url)
    start = date(args.from_) if args.from_ else None
    end = date(args.to, upper=True) if args.to else None
    with contextlib.closing(catalog(cfg)) as opened:
        found = opened.captures(wanted, from_=start, to=end, limit=args.limit)
    print_captures(found, args.json)
    return 0 if found else 1


def list_(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.exports import listed

    selection = selected(args)
    if args.url is None:
        if selection is None or args.match is not None:
            raise InputError("catalog list: give one of --url, --prefix, --host or --domain")
        match, wanted = selection[0], url(selection[1])
    else:  # URL [--match MATCH]: the catalog's own listing, as in the last release
        if selection is not None:
            raise InputError("catalog list: give --url, --prefix, --host or --domain, not a URL too")
        match = args.match or "prefix"
        option = SELECTOR_OPTIONS[match]
        deprecated(f"archiver catalog list URL --match {match}", f"archiver catalog list {option} URL")
        wanted = url(args.url)
    with contextlib.closing(catalog(cfg)) as opened:
        taken = opened.list(wanted, match) if args.url is not None else listed(opened, wanted, match)
        found = list(islice(taken, args.limit))
    print_captures(found, args.json)
    return 0 if found else 1


def get(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.warcindex import PIECE, WarcError

    found = _closest(cfg, args)
    if found is None:
        return 1
    try:
        with open_stores(cfg).warcs().open(found.filename, found.offset, found.length) as record:
            head = record.http_head if args.headers else b""
            if not args.output and sys.stdout.isatty():
                data = head + record.read(record.size)
                if not _printable(data):
                    return fail("the archived payload holds control characters or is not UTF-8 "
                                "text: it is not written to a terminal; use -o FILE or a pipe")
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                return 0
            # A file or a pipe: the payload a piece at a time, never held whole.
            with open(args.output, "wb") if args.output else contextlib.nullcontext(sys.stdout.buffer) as out:
                out.write(head)
                while piece := record.read(PIECE):
                    out.write(piece)
                out.flush()
    except WarcError as e:
        return fail(str(e))
    if args.output:
        print(f"{found.timestamp} {found.url}: {len(head) + record.size} bytes written to {args.output}",
              file=sys.stderr)
    return 0


def _printable(data: bytes) -> bool:
    """True for UTF-8 text without controls (tab and line ends aside) that a terminal would act on."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _TERMINAL_CONTROL.search(text) is None


def export_cdxj(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.catalog_maintenance import export_cdxj

    with contextlib.closing(catalog(cfg)) as opened:
        if args.output:
            with open(args.output, "w", encoding="utf-8") as out:
                lines = export_cdxj(opened, out)
            print(f"{lines} CDXJ lines written to {args.output}", file=sys.stderr)
        else:
            export_cdxj(opened, sys.stdout)
    return 0


def reindex(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.catalog_maintenance import Progress
    from archiver.store.warcindex import WarcError

    stores = open_stores(cfg)
    warcs = stores.warcs()
    try:
        names = warcs.names(args.warcs)
        if not names:
            raise InputError(f"no WARC files match {args.warcs or warcs.location('*.warc.gz')}")
        progress = Progress(sum(warcs.size(name) for name in names), "reindex")
        entries = stores.reindex_catalog(warcs, names, progress.update)
    except WarcError as e:
        raise InputError(f"{e} (catalog left as it was)") from None
    progress.update(progress.total, entries, force=True)
    print(f"reindexed {len(names)} WARC file(s): {entries} entries in the catalog")
    return 0


def verify(cfg: config.Config, args: argparse.Namespace) -> int:
    from archiver.store.warcindex import WarcError

    stores = open_stores(cfg)
    warcs = stores.warcs()
    try:
        names = warcs.names(args.warcs, include_open=True)
    except WarcError as e:
        raise InputError(str(e)) from None
    with contextlib.closing(catalog(cfg)) as opened:
        result = stores.verify_catalog(opened, warcs, names)
    for line in result.bad_entries:
        print(f"bad entry: {line}")
    for line in result.unindexed:
        print(f"not indexed: {line}")
    for line in result.unreadable:
        print(f"unreadable: {line}")
    verdict = "OK" if result.ok else "DIFFERENCES FOUND"
    print(f"{verdict}: {result.entries} entries, {result.records} response/revisit records in "
          f"{len(names)} file(s); {len(result.bad_entries)} bad entries, "
          f"{len(result.unindexed)} records not indexed, {len(result.unreadable)} unreadable files")
    return 0 if result.ok else 1
