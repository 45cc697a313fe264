"""``archiver export``: a slice of the archive as a WARC file or a WACZ package."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from archiver.commands.common import (
    InputError,
    Verbs,
    add_config,
    add_dates,
    add_selector,
    catalog,
    count,
    date,
    fail,
    load_config,
    selected,
    url,
    verb,
)
from archiver.stores import open_stores

EXITS = {0: "the file was written",
         1: "a store failed or the file could not be written, named on stderr",
         2: "bad usage or bad input, no capture matches, or the file exists without --force "
            "(nothing written)"}


def add(verbs: Verbs) -> None:
    export = verb(verbs, "export", "write a slice of the archive (a URL, a prefix or a host, "
                  "between two dates) as a WARC file, or a WACZ package", exits=EXITS, run=run)
    add_selector(export, required=True, matches=("exact", "prefix", "host"))
    add_dates(export)
    export.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the file to write: a WACZ package if it ends in .wacz, else a WARC")
    export.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    add_config(export)


def run(args: argparse.Namespace) -> int:
    from archiver.store.exports import ExportError, export

    cfg = load_config(args)
    selection = selected(args)
    assert selection is not None  # argparse requires one
    match, given = selection
    try:
        wanted = url(given)
        from_ = date(args.from_) if args.from_ else None
        to = date(args.to, upper=True) if args.to else None
    except InputError as e:
        return fail(str(e))
    output = Path(args.output)
    if output.exists() and not args.force:
        return fail(f"{output} exists: give --force to overwrite it (nothing written)")
    stores = open_stores(cfg)
    shown = [time.monotonic()]

    def progress(done: int, total: int) -> None:
        if done == total or time.monotonic() - shown[0] >= 5:
            shown[0] = time.monotonic()
            print(f"archiver export: {done}/{total} records", file=sys.stderr, flush=True)

    try:
        with contextlib.closing(catalog(cfg)) as opened:
            done = export(opened, stores.warcs(), url=wanted, match=match, output=output,
                          from_=from_, to=to, progress=progress)
    except ExportError as e:
        return fail(f"{e} (nothing written)")
    print(f"{done.path}: {count(done.captures, 'capture')} and "
          f"{count(done.originals, 'original response')} of their revisits, "
          f"{count(done.converted, 'server-not-modified revisit')} written whole, "
          f"{done.bytes} bytes")
    return 0
