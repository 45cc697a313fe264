"""Structured logging: one line per event on stderr, in logfmt (``key=value``).

journald keeps each line as one entry; ``level``, ``event``, ``site`` and ``url`` are always in the
same form so ``journalctl -u archiver-crawl@0 | grep site=http://example.org`` finds a site's story.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


# Characters a value may hold unquoted; anything else (space, quote, "=", backslash, and every
# C0 or C1 control, DEL and the Unicode line separators) sends it through _escape, so a hostile
# URL or server reply cannot move the cursor of an operator's terminal or forge a log line.
_PLAIN = re.compile(r'[^\x00-\x20"=\\\x7f-\x9f\u2028\u2029]+\Z')
_SPECIAL = re.compile(r'["\\\x00-\x1f\x7f-\x9f\u2028\u2029]')
_NAMED = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def _quote(value: Any) -> str:
    text = str(value)
    if _PLAIN.match(text):
        return text
    return '"' + _SPECIAL.sub(_escape, text) + '"'


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
    """Send archiver's log lines to stderr at ``level`` (the ``sys.stderr`` of now: a command run
    again in the same process, as the tests do, logs to its own)."""
    root = logging.getLogger("archiver")
    for stale in [h for h in root.handlers if getattr(h, "_archiver", False)]:
        root.removeHandler(stale)  # its stream may be closed: not flushed
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
