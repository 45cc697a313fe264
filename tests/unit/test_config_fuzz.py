"""Fuzz tests for archiver.config: any file loads or raises ConfigError, and a loaded config holds
only values a service can use (finite numbers, paths without NUL)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver import config
from archiver.config import NOT_SECTIONS, Config, ConfigError
from tests.support.fuzzing import corpus, examples

_SECTIONS = {config.section_name(f.name): f.default_factory().__class__
             for f in dataclasses.fields(Config) if f.name not in NOT_SECTIONS}


def _toml_string(text: str) -> str:
    """A TOML basic string: everything outside printable ASCII escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            out.append(f"\\U{ord(char):08X}")
    return '"' + "".join(out) + '"'


_STRINGS = st.text(st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["", "~", "~nosuchuser/x", "~/x", "/", "a\x00b", "info", "pause", "exit", "archiver", "a/b", "1.2.3.4:53",
     "[::1]:53", "[::1", "host:0", "host:" + "9" * 5000, "\U0001f600"]
)  # fmt: skip
_SCALARS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["0", "-1", "1", "9223372036854775807", "9223372036854775808", "-9223372036854775809"]),
    st.sampled_from(["nan", "+nan", "-nan", "inf", "-inf", "0.0", "-0.0", "1e308", "1e-308", "0.5", "2.0"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["true", "false", "1979-05-27T07:32:00Z", "1979-05-27", "07:32:00"]),
    _STRINGS.map(_toml_string),
)
_VALUES = st.one_of(
    _SCALARS,
    st.lists(_SCALARS, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    st.lists(_STRINGS.map(_toml_string), max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    st.just("{ a = 1 }"),
)


@st.composite
def _documents(draw: st.DrawFn) -> str:
    lines = []
    names = st.sampled_from([*_SECTIONS, "crawl.x", "unknown", "Crawl"])
    for name in draw(st.lists(names, max_size=4, unique=True)):
        lines.append(f"[{name}]")
        cls = _SECTIONS.get(name)
        known = [f.name for f in dataclasses.fields(cls)] if cls else []
        for key in draw(st.lists(st.sampled_from([*known, "unknown_key"]), max_size=6, unique=True)):
            lines.append(f"{_toml_string(key)} = {draw(_VALUES)}")
    return "\n".join(lines) + "\n"


def _check_config(loaded: Config) -> None:
    """What a service may rely on: every number finite and within TOML's 64-bit integer range,
    every path free of NUL (which no system call takes)."""
    for field in dataclasses.fields(Config):
        if field.name in NOT_SECTIONS:
            continue
        values = dataclasses.asdict(getattr(loaded, field.name))
        for value in values.values():
            if isinstance(value, float):
                assert math.isfinite(value)
            elif isinstance(value, int):
                assert -(2**63) <= value < 2**63
            elif isinstance(value, Path):
                assert "\x00" not in str(value)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config") / "archiver.toml"


def _load(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        loaded = config.load(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    _check_config(loaded)


@settings(max_examples=examples(120), deadline=None)
@given(document=_documents())
def test_any_document_loads_or_raises_config_error(config_file: Path, document: str) -> None:
    _load(config_file, document.encode())


@settings(max_examples=examples(100), deadline=None)
@given(data=st.binary(max_size=300) | _documents().map(lambda d: d.encode("utf-16")))
def test_any_bytes_load_or_raise_config_error(config_file: Path, data: bytes) -> None:
    _load(config_file, data)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
_TABLES = st.dictionaries(
    st.sampled_from([*_SECTIONS, "x"]), _JSON | st.dictionaries(st.text(max_size=9), _JSON)
)


@settings(max_examples=examples(60), deadline=None)
@given(_TABLES)
def test_any_parsed_structure_validates_or_raises_config_error(data: dict[str, Any]) -> None:
    try:
        loaded = config.from_dict(data)
    except ConfigError:
        return
    _check_config(loaded)


@pytest.mark.parametrize("path", corpus("config"), ids=lambda p: p.name)
def test_corpus(path: Path, config_file: Path) -> None:
    _load(config_file, path.read_bytes())
