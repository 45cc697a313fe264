"""SIGHUP for every service: read the config file again, keep the old one if the new one is bad."""

from __future__ import annotations

import logging

from archiver import logs
from archiver.config import Config, ConfigError, load, reloaded
from archiver.logs import event

log = logging.getLogger("archiver.reload")


def reread(config: Config) -> Config | None:
    """The config file read again, with the settings a running process cannot change kept (and
    named in the log); None, with a clear log line, if the file fails validation."""
    if config.path is None:
        return None
    try:
        new = load(config.path)
    except ConfigError as e:
        event(log, logging.ERROR, "reload-refused", error=str(e), keeping="the running config")
        return None
    new, kept = reloaded(config, new)
    logs.set_level(new.log.level)
    # Warning level, so the line shows whatever log level the new config chose.
    event(log, logging.WARNING, "reloaded", config=str(config.path),
          needs_restart=",".join(kept) or None)
    return new
