"""A plugin package for the tests, installed for real: a module and its ``.dist-info`` (METADATA,
``entry_points.txt``) written into a folder that goes on ``sys.path``, so importlib.metadata finds
its entry points exactly as it finds an installed wheel's.

Two plugins (entry points of group ``archiver.plugins``):

- ``labeller``: should_visit refuses URLs containing its table's ``refuse``; on_capture labels
  every response ``kind`` (``page`` for HTML, else ``file``) and ``status``; site_priority gives
  its table's ``priority`` to sites linked from a page it labelled ``kind = page``.
- ``broken``: every hook raises while visiting the site (origin) its table's ``site`` names; on
  other sites should_visit and site_priority have no objection and on_capture labels
  ``checked = yes``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

DISTRIBUTION = "archiver_test_plugins"
MODULE = "archiver_test_plugins"

SOURCE = '''
"""Test plugins for archiver (tests/support/plugins.py)."""

from archiver.web import urls


class Labeller:
    def __init__(self, table):
        self.refuse = table["refuse"]
        self.priority = float(table.get("priority", 0.0))

    def should_visit(self, url, context):
        return self.refuse not in url

    def on_capture(self, capture, document):
        kind = "page" if document.media_type == "text/html" else "file"
        return {"kind": kind, "status": str(capture.status)}

    def site_priority(self, site, context):
        return self.priority if context.labels.get("kind") == "page" else None


class Broken:
    def __init__(self, table):
        self.site = table["site"]

    def _check(self, site):
        if site == self.site:
            raise RuntimeError("broken on purpose")

    def should_visit(self, url, context):
        self._check(context.site)
        return None

    def on_capture(self, capture, document):
        self._check(capture.site)
        return {"checked": "yes"}

    def site_priority(self, site, context):
        self._check(urls.origin(context.source))
        return None


def labeller(table):
    return Labeller(table)


def broken(table):
    return Broken(table)


def failing(table):
    raise ValueError("cannot start: " + table.get("why", "no reason"))


def hookless(table):
    return object()
'''

ENTRY_POINTS = f"""
[archiver.plugins]
labeller = {MODULE}:labeller
broken = {MODULE}:broken
failing = {MODULE}:failing
hookless = {MODULE}:hookless
"""


def install(directory: Path) -> Path:
    """Write the package into ``directory`` (to be put on sys.path / PYTHONPATH); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{MODULE}.py").write_text(textwrap.dedent(SOURCE))
    info = directory / f"{DISTRIBUTION}-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS.lstrip())
    return directory


IMPOSTOR = "archiver_impostor_plugins"


def install_impostor(directory: Path, names: tuple[str, ...]) -> Path:
    """Another distribution, registering entry points ``names`` of group ``archiver.plugins``
    (names other plugins have), written into ``directory`` as :func:`install` does."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{IMPOSTOR}.py").write_text("def impostor(table):\n    return object()\n")
    info = directory / f"{IMPOSTOR}-6.6.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {IMPOSTOR}\nVersion: 6.6\n")
    points = "".join(f"{name} = {IMPOSTOR}:impostor\n" for name in names)
    (info / "entry_points.txt").write_text(f"[archiver.plugins]\n{points}")
    return directory
