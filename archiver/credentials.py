"""The credentials file: the usernames and passwords of logins, kept out of the main config.

A sheet names a table of it (``credentials = "<table name>"``); the file is named by
``crawl.credentials_file`` or, when that key is empty, by the environment variable
``ARCHIVER_CREDENTIALS_FILE`` (`credentials_path`). It is TOML, one table per login, each with
exactly ``username`` and ``password``::

    [members]
    username = "archive-bot"
    password = "..."

It must be a regular file that neither group nor others may read, write or execute
(``chmod 600``): anything else is refused with a `CredentialsError` naming the file and the fix.
No message, ``repr`` or ``str`` here ever holds a password (see docs/sessions.md).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENVIRONMENT_VARIABLE = "ARCHIVER_CREDENTIALS_FILE"
MAX_CREDENTIALS_BYTES = 1024 * 1024
_KEYS = ("username", "password")
_FORMAT = "TOML tables, each with username and password"
_WHERE = re.compile(r"\(at line (\d+), column (\d+)\)$")


class CredentialsError(ValueError):
    """A credentials file that cannot be used; the message names the file and the fix."""


@dataclass(frozen=True)
class Credential:
    """One login's username and password; its ``repr`` and ``str`` leave the password out."""

    username: str
    password: str = field(repr=False)


def credentials_path(configured: str | None, environ: Mapping[str, str]) -> Path | None:
    """The credentials file to read: ``crawl.credentials_file`` when set (not empty), else
    ``ARCHIVER_CREDENTIALS_FILE`` from ``environ`` when set, else None (no logins)."""
    if configured:
        return Path(configured)
    named = environ.get(ENVIRONMENT_VARIABLE, "")
    return Path(named) if named else None


def load_credentials(path: Path) -> dict[str, Credential]:
    """The file's tables by name; CredentialsError if the file is missing, not a regular file,
    open to group or others, larger than `MAX_CREDENTIALS_BYTES`, not TOML, or not tables of
    exactly a non-empty ``username`` and ``password``."""
    data = _parse(_read(path), path)
    tables = {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise CredentialsError(
                f"credentials file {path}: {name!r} is not a table: write it as [{name}] with "
                "username and password")
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise CredentialsError(
                f"credentials file {path}: table [{name}] has unknown keys "
                f"{', '.join(map(repr, unknown))}: only username and password are allowed")
        for key in _KEYS:
            if not isinstance(table.get(key), str) or not table[key]:
                raise CredentialsError(
                    f"credentials file {path}: table [{name}] needs {key} as a non-empty string")
        tables[name] = Credential(table["username"], table["password"])
    if not tables:
        raise CredentialsError(f"credentials file {path} has no table: write {_FORMAT}")
    return tables


def _read(path: Path) -> bytes:
    """The file's bytes, checked on the descriptor read (no race between check and read)."""
    try:
        # Non-blocking: opening a FIFO must not wait for a writer (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise CredentialsError(
            f"credentials file {path} does not exist: create it ({_FORMAT}) and chmod 600 it"
        ) from None
    except OSError as exc:
        raise CredentialsError(
            f"credentials file {path} cannot be opened ({os.strerror(exc.errno or 0)}): it must "
            "be a regular file readable by the service user") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise CredentialsError(
                f"credentials file {path} is not a regular file: name a file of {_FORMAT}")
        if status.st_mode & 0o077:
            raise CredentialsError(
                f"credentials file {path} is open to group or others "
                f"(mode {stat.S_IMODE(status.st_mode):04o}): chmod 600 {path}")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as file:
        content = file.read(MAX_CREDENTIALS_BYTES + 1)
    if len(content) > MAX_CREDENTIALS_BYTES:
        raise CredentialsError(
            f"credentials file {path} is larger than {MAX_CREDENTIALS_BYTES} bytes: it holds "
            f"{_FORMAT} only")
    return content


def _parse(content: bytes, path: Path) -> dict[str, object]:
    # Only where the error is: tomllib's message may quote a character of the text (a password).
    try:
        return tomllib.loads(content.decode("utf-8"))
    except UnicodeDecodeError:
        raise CredentialsError(f"credentials file {path} is not UTF-8 text: write {_FORMAT}"
                               ) from None
    except tomllib.TOMLDecodeError as exc:
        where = _WHERE.search(str(exc))
        at = f" (line {where[1]}, column {where[2]})" if where else ""
        raise CredentialsError(f"credentials file {path} is not TOML{at}: write {_FORMAT}"
                               ) from None
