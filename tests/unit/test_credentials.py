"""The credentials file: what is accepted, what is refused and why, and that no password leaks."""

from __future__ import annotations

import os
import tempfile
import traceback
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.credentials import (
    MAX_CREDENTIALS_BYTES,
    Credential,
    CredentialsError,
    credentials_path,
    load_credentials,
)

SECRET = "Tr0ub4dor&3-secret"


def write(tmp_path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "credentials.toml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    path.chmod(mode)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(CredentialsError) as caught:
        load_credentials(path)
    message = str(caught.value)
    assert str(path) in message and SECRET not in message
    return message


def test_tables_load_as_credentials(tmp_path: Path) -> None:
    path = write(tmp_path, f'[members]\nusername = "ann"\npassword = "{SECRET}"\n\n'
                           '["intranet.example"]\nusername = "b\u00e9a"\npassword = "p w"\n')
    assert load_credentials(path) == {
        "members": Credential("ann", SECRET), "intranet.example": Credential("b\u00e9a", "p w")}


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o610, 0o601, 0o644, 0o666])
def test_open_to_group_or_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path, f'[a]\nusername = "u"\npassword = "{SECRET}"\n', mode)
    message = refusal(path)
    assert f"(mode {mode:04o})" in message and f"chmod 600 {path}" in message


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_owner_only_is_accepted(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path, f'[a]\nusername = "u"\npassword = "{SECRET}"\n', mode)
    assert load_credentials(path) == {"a": Credential("u", SECRET)}


def test_missing_file(tmp_path: Path) -> None:
    message = refusal(tmp_path / "nowhere.toml")
    assert "does not exist" in message and "chmod 600" in message


def test_not_a_regular_file(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o700)
    assert "not a regular file" in refusal(folder)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    assert "not a regular file" in refusal(fifo)  # and opening it did not wait for a writer


@pytest.mark.parametrize(("text", "expected"), [
    ("", "has no table"),
    ("# only a comment\n", "has no table"),
    (f'password = "{SECRET}"\n', "'password' is not a table"),
    (f'[a]\nusername = "u"\npassword = "{SECRET}"\nrealm = "r"\n', "table [a] has unknown keys 'realm'"),
    (f'[a]\nusername = "u"\npassword = "{SECRET}"\n[a.b]\n', "table [a] has unknown keys 'b'"),
    ('[a]\nusername = "u"\n', "table [a] needs password as a non-empty string"),
    ('[a]\nusername = "u"\npassword = ""\n', "table [a] needs password as a non-empty string"),
    ('[a]\nusername = "u"\npassword = 1234\n', "table [a] needs password as a non-empty string"),
    (f'[a]\npassword = "{SECRET}"\n', "table [a] needs username as a non-empty string"),
    (f'[a]\nusername = "u"\npassword = "{SECRET}\n', "is not TOML (line 3, column"),
    (f'[a]\nusername = "u"\npassword = {SECRET}\n', "is not TOML (line 3, column"),
])
def test_bad_content_is_refused_with_the_fix(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in refusal(write(tmp_path, text))


def test_a_toml_error_says_where_not_what(tmp_path: Path) -> None:
    path = write(tmp_path, '[a]\nusername = "u"\npassword = "x\x01y"\n')
    # tomllib's own message would quote the character: "Illegal character '\\x01'".
    assert refusal(path) == (f"credentials file {path} is not TOML (line 3, column 14): "
                             "write TOML tables, each with username and password")


def test_undecodable_and_oversized_files(tmp_path: Path) -> None:
    assert "not UTF-8" in refusal(write(tmp_path, b'[a]\nusername = "\xff"\n'))
    huge = write(tmp_path, "#" * MAX_CREDENTIALS_BYTES + '\n[a]\nusername = "u"\npassword = "p"\n')
    assert "larger than" in refusal(huge)


@given(st.text(), st.text())
def test_no_error_quotes_the_password(before: str, after: str) -> None:
    text = f'[a]\nusername = "u"\npassword = {before}{SECRET}{after}\n'
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "credentials.toml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        path.chmod(0o600)
        try:
            load_credentials(path)
        except CredentialsError as exc:
            assert SECRET not in str(exc)


def test_credential_never_shows_its_password() -> None:
    credential = Credential("ann", SECRET)
    assert repr(credential) == str(credential) == "Credential(username='ann')"
    assert SECRET not in f"{credential} {credential!r} {[credential]} {{'k': credential}}"


def test_a_traceback_mentioning_a_credential_does_not_show_the_password() -> None:
    def log_in(credential: Credential) -> None:
        raise RuntimeError(f"login refused for {credential!r}")

    try:
        log_in(Credential("ann", SECRET))
    except RuntimeError as exc:
        text = "".join(traceback.TracebackException.from_exception(
            exc, capture_locals=True).format())  # with each frame's locals, as pytest can show
    assert "Credential(username='ann')" in text and SECRET not in text


def test_path_from_the_config_key_or_else_the_environment() -> None:
    environ = {"ARCHIVER_CREDENTIALS_FILE": "/etc/archiver/env.toml"}
    assert credentials_path("/etc/archiver/key.toml", environ) == Path("/etc/archiver/key.toml")
    assert credentials_path("", environ) == Path("/etc/archiver/env.toml")
    assert credentials_path(None, environ) == Path("/etc/archiver/env.toml")
    assert credentials_path("", {"ARCHIVER_CREDENTIALS_FILE": ""}) is None
    assert credentials_path(None, {}) is None
