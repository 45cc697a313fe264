"""``archiver import FILE...``: WARC (or ARC) files other tools wrote, into the WARC store and the
catalog."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from archiver.commands.common import Verbs, add_config, count, load_config, verb
from archiver.stores import open_stores

EXITS = {0: "every file was imported", 2: "bad usage, or a file was refused (named on stderr)"}


def add(verbs: Verbs) -> None:
    imports = verb(verbs, "import", "index WARC (or ARC) files other tools wrote into the catalog, "
                   "copied into the WARC store", exits=EXITS, run=run)
    imports.add_argument("files", nargs="+", metavar="FILE", help="the WARC or ARC files")
    where = imports.add_mutually_exclusive_group()
    where.add_argument("--copy", dest="in_place", action="store_false",
                       help="copy each file into the WARC store (the default)")
    where.add_argument("--in-place", dest="in_place", action="store_true",
                       help="index files that already lie in the WARC folder, where they are")
    add_config(imports)
    imports.set_defaults(in_place=False)


def run(args: argparse.Namespace) -> int:
    from archiver.store.imports import ImportRefused, import_file, shown
    cfg = load_config(args)
    stores = open_stores(cfg)
    warcs = stores.warc_store()
    refused = 0

    def say(line: str) -> None:
        print(f"archiver import: {line}", file=sys.stderr, flush=True)

    with contextlib.closing(stores.catalog()) as catalog:
        for name in args.files:
            try:
                done = import_file(Path(name), warcs=warcs, catalog=catalog,
                                   in_place=args.in_place, progress=say,
                                   max_temp_bytes=cfg.import_.max_temp_bytes)
            except ImportRefused as e:
                refused += 1
                print(f"archiver: {e} (nothing imported from it)", file=sys.stderr)
                continue
            how = ("rewritten as one gzip member per record, " if done.rewritten else "") + (
                f"stored as {warcs.location(done.name)}" if done.stored else
                "indexed in place" if args.in_place else f"already in the store as {done.name}")
            skipped = ", ".join(f"{n} {kind}" for kind, n in done.skipped.items())
            print(f"{shown(done.source)}: {count(done.records, 'record')}, {done.added} catalog entries "
                  f"added, {done.duplicates} already in the catalog; {how}"
                  + (f"; not catalogued: {skipped}" if skipped else ""))
    return 2 if refused else 0
