"""Checks that a secret (a password given the allowed way) shows in no output, log line or file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote


def assert_no_secret(secret: str, *, texts: Iterable[str] = (), files: Iterable[Path] = ()) -> int:
    """Assert that ``secret``, as given or percent-encoded, is in none of ``texts`` (outputs, log
    lines) and none of ``files``; returns the number of lines read, for the caller to check that
    there was something to read."""
    forms = {secret, quote(secret, safe="")}
    lines = 0
    named = [(f"output {n}", text) for n, text in enumerate(texts)]
    named += [(str(path), path.read_text(errors="replace")) for path in files]
    for where, text in named:
        for number, line in enumerate(text.splitlines(), 1):
            lines += 1
            assert not any(form in line for form in forms), f"the secret is in {where}, line {number}"
    return lines
