"""The systemd units in systemd/ and their directives, for the unit-file tests."""

from __future__ import annotations

from tests.support.repo import ROOT

UNITS = ROOT / "systemd"
SERVICES = sorted(p.name for p in UNITS.glob("*.service"))
UNIT_FILES = sorted(p.name for p in UNITS.iterdir() if p.suffix in (".service", ".timer", ".target"))
INSTALLED = "/opt/archiver/venv/bin/archiver"


def directives(name: str) -> dict[str, list[str]]:
    """``Section.Key`` -> every value given, in order, for the unit file ``name``."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return found


def one(name: str, key: str) -> str:
    (value,) = directives(name)[key]
    return value
