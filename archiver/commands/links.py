"""``archiver links run|reshard``: the external-link batch (it holds the global bitmap)."""

from __future__ import annotations

import argparse
import gc

from archiver import config, logs
from archiver.commands.common import (
    Verbs,
    add_config,
    add_renamed,
    fail,
    group,
    load_config,
    storage_errors,
    store_failure,
    verb,
)
from archiver.links import compiled_loops_ahead, quiet_blas
from archiver.links.slicing import MAX_SLICES
from archiver.stores import ProcessBusy, open_embedded

RUN_EXITS = {0: "the spool files were read (with --once: all there were)",
             1: "a store failed, named on stderr"}
RESHARD_EXITS = {0: "the slices were rebuilt", 1: "a store or a spool file failed, named on stderr"}


def add(verbs: Verbs) -> None:
    links = group(verbs, "links", "the external-link batch (holds the global bitmap)", "links_verb")
    run_ = verb(links, "run", "turn closed spool files into new URLs and sites in the crawl queues",
                exits=RUN_EXITS, run=run)
    add_config(run_)
    run_.add_argument("--once", action="store_true", help="process the spool files there now, then exit")
    reshard_ = verb(links, "reshard", "rebuild the global bitmap's slices for another slice count "
                    "from the spool files done (no links run meanwhile)", exits=RESHARD_EXITS,
                    run=reshard)
    add_config(reshard_)
    reshard_.add_argument("--slices", type=slice_count, metavar="N",
                          help="the new slice count (set links.slices to it too); required")
    add_renamed(reshard_, "--partitions", "--slices", "slices", type=slice_count)
    reshard_.add_argument(
        "--allow-missing", action="store_true",
        help="rebuild even if spool files the ledger lists were pruned from spool/done: their "
             "URLs may be queued again (each site's bitmap drops them) and their site pairs may "
             "count twice as in-links")


def slice_count(text: str) -> int:
    count = int(text)
    if not 1 <= count <= MAX_SLICES:
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_SLICES}")
    return count


def run(args: argparse.Namespace) -> int:
    quiet_blas()
    cfg = load_config(args)
    logs.setup(cfg.log.level)
    # Only the embedded spool: listing an object store's would load boto3 and ask the network.
    embedded = config.database_url(cfg.store.url) is None
    with compiled_loops_ahead(open_embedded(cfg).spool_files() if embedded else None):
        from archiver.links.batch import run_batch

        try:
            totals = run_batch(cfg, once=args.once)
        except (ProcessBusy, config.ConfigError) as e:
            return fail(str(e))
        except storage_errors(RuntimeError) as e:
            return store_failure("links", e)
    print(f"links: {totals.line()}; {totals.new_pairs} new site-to-site links, "
          f"{totals.checkpoints} checkpoints")
    # The batch is closed; its modules' million objects die with the process. Frozen, Python's
    # last collection at exit skips them: the exit takes 0.05 s instead of 0.25-0.30 s.
    gc.freeze()
    return 0


def reshard(args: argparse.Namespace) -> int:
    quiet_blas()
    from archiver.links.batch import ReshardError, reshard_batch

    if args.slices is None:
        return fail("links reshard: --slices N is required (the new slice count)")
    cfg = load_config(args)
    logs.setup(cfg.log.level)
    try:
        totals = reshard_batch(cfg, args.slices, allow_missing=args.allow_missing)
    except (ProcessBusy, config.ConfigError) as e:
        return fail(str(e))
    except storage_errors(ReshardError, RuntimeError) as e:
        return store_failure("links reshard", e)
    print(f"links reshard: {args.slices} slices rebuilt from {totals.files} spool files, "
          f"{totals.lines} URLs read")
    return 0
