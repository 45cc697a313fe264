"""Structured logging: one line per event on stderr, in logfmt (``key=value``).

journald keeps each line as one entry; ``level``, ``event``, ``site`` and ``url`` are always in the
same form so ``journalctl -u archiver-crawl@0 | grep site=http://example.org`` finds a site's story.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def _quote(value: Any) -> str:
    text = str(value)
    if text and not any(c in text for c in ' "=\n\t\\'):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


class LogfmtFormatter(logging.Formatter):
    """``ts=2026-11-22T03:14:15.123Z level=info event=fetch site=... url=... status=200``."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [f"ts={ts}.{int(record.msecs):03d}Z", f"level={record.levelname.lower()}",
                 f"event={_quote(record.getMessage())}"]
        fields = getattr(record, "fields", None)
        if fields:
            parts.extend(f"{k}={_quote(v)}" for k, v in fields.items() if v is not None)
        if record.exc_info:
            parts.append(f"exc={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


def setup(level: str = "info") -> None:
    """Send archiver's log lines to stderr at ``level``."""
    root = logging.getLogger("archiver")
    if not any(getattr(h, "_archiver", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(LogfmtFormatter())
        handler._archiver = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
    set_level(level)


def set_level(level: str) -> None:
    logging.getLogger("archiver").setLevel(_LEVELS[level])


def event(logger: logging.Logger, level: int, name: str, **fields: Any) -> None:
    """Log event ``name`` with ``fields`` (None values are left out)."""
    if logger.isEnabledFor(level):
        logger.log(level, name, extra={"fields": fields})
