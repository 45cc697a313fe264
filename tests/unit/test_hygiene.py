"""Terminal hygiene: log lines carry no control characters."""

from __future__ import annotations

import logging

from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.logs import LogfmtFormatter
from tests.support.fuzzing import examples

CONTROLS = {*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), "\u2028", "\u2029"}


def formatted(**fields: object) -> str:
    record = logging.LogRecord("archiver.test", logging.WARNING, __file__, 1, "fetched", (), None)
    record.fields = fields
    return LogfmtFormatter().format(record)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=60), st.text(max_size=20))
def test_log_lines_hold_no_control_characters(value, other):
    line = formatted(url=value, error=other)
    assert not CONTROLS & set(line)
    assert line.count(" url=") == 1                   # one field, however the value looks


def test_log_escapes_are_readable():
    line = formatted(url="http://a.b/\x1b[2J\r\n\x9b")
    assert line.partition(" event=")[2] == 'fetched url="http://a.b/\\x1b[2J\\r\\n\\x9b"'
