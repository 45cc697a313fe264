"""``archiver store init|migrate|upgrade``: the stores themselves: the shared stores' schema
(``store.url``), moving an embedded archive into them, and an archive's on-disk layout."""

from __future__ import annotations

import argparse
import sys

from archiver import config
from archiver.commands.common import Verbs, add_config, add_renamed, fail, group, load_config, verb

INIT_EXITS = {0: "the schema is at the current version", 1: "the database failed, named on stderr"}
MIGRATE_EXITS = {0: "the archive was moved and verified",
                 1: "the move failed (run it again to resume), named on stderr",
                 2: "bad usage, bad configs, or the move was refused"}
UPGRADE_EXITS = {0: "the archive is laid out as this release writes it",
                 1: "a folder could not be moved, named on stderr",
                 2: "bad config, a service still runs, or a folder exists under both names"}


def add(verbs: Verbs) -> None:
    store = group(verbs, "store", "the stores themselves: the shared stores' schema, moving an "
                  "embedded archive into them, an archive's folder layout", "store_verb")
    init_ = verb(store, "init", "create or upgrade the PostgreSQL schema (idempotent; nothing to "
                 "do for sqlite)", exits=INIT_EXITS, run=init)
    add_config(init_)
    migrate_ = verb(store, "migrate", "move an embedded archive into PostgreSQL and object storage "
                    "(resumable, verified)", exits=MIGRATE_EXITS, run=migrate)
    migrate_.add_argument("--source", dest="old", metavar="OLD.toml",
                          help="the config of the embedded archive (store.url = \"sqlite\"); "
                               "required")
    migrate_.add_argument("--target", dest="new", metavar="NEW.toml",
                          help="the config naming the PostgreSQL store.url and warc.store; required")
    add_renamed(migrate_, "--from", "--source", "old")  # --from and --to are dates elsewhere
    add_renamed(migrate_, "--to", "--target", "new")
    upgrade_ = verb(store, "upgrade", "move the embedded archive's folders to this release's "
                    "names (frontier/ -> crawl-queues/, outlinks/ -> spool/) while no service "
                    "runs", exits=UPGRADE_EXITS, run=upgrade)
    add_config(upgrade_)


def init(args: argparse.Namespace) -> int:
    """Create or upgrade the PostgreSQL schema of ``store.url``."""
    from archiver.store.postgres.schema import CURRENT_VERSION, StoreError, init_schema

    cfg = load_config(args, stores_built=False)
    url = config.database_url(cfg.store.url)
    if url is None:
        print(f'store init: store.url is "sqlite": the embedded store has nothing to initialise '
              f"(its files under {cfg.root} are made on first use)")
        return 0
    try:
        applied = init_schema(url)
    except StoreError as e:
        print(f"archiver: store init: {e}", file=sys.stderr)
        return 1
    if not applied:
        print(f"store init: {url} is at schema version {CURRENT_VERSION} already; nothing to do")
    for migration in applied:
        print(f"store init: {url}: applied version {migration.version}: {migration.description}")
    return 0


def migrate(args: argparse.Namespace) -> int:
    """Move the embedded archive of one config into the stores of the other."""
    from archiver.migrate import Migration, MigrationFailed, MigrationRefused
    from archiver.store.models import CatalogError

    missing = [option for option, path in (("--source", args.old), ("--target", args.new)) if not path]
    if missing:
        return fail(f"store migrate: {' and '.join(missing)} required (the configs to move from and to)")
    configs = []
    for path in (args.old, args.new):
        try:
            configs.append(config.load(path))
        except config.ConfigError as e:
            return fail(str(e))
    try:
        Migration(*configs, out=sys.stdout, err=sys.stderr).run()
    except MigrationRefused as e:
        return fail(f"store migrate: {e}")
    except (MigrationFailed, CatalogError, OSError) as e:
        print(f"archiver: store migrate: {e}", file=sys.stderr)
        return 1
    return 0


def upgrade(args: argparse.Namespace) -> int:
    """Move the archive under ``archive.root`` to the current layout (archiver.store.layout)."""
    from archiver.store import layout

    cfg = load_config(args)
    try:
        moved = layout.upgrade(cfg.root)
    except layout.LayoutError as e:
        return fail(f"store upgrade: {e}")
    for old, new in moved:
        print(f"store upgrade: {cfg.root / old} -> {cfg.root / new}")
    print(f"store upgrade: {cfg.root} is at layout version {layout.VERSION}"
          + ("" if moved else "; nothing to move"))
    return 0
