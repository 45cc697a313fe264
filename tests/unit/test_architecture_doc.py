"""docs/architecture.md names real code: every module, function, method and config key it cites exists."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

from archiver import config
from tests.support.repo import ROOT

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "archiver"
SECTIONS = {name: hint for name, hint in typing.get_type_hints(config.Config).items()
            if dataclasses.is_dataclass(hint)}
_CITED = re.compile(r"`([^`\s]+)`")
_QUALIFIED = re.compile(r"([a-z_]\w*(?:\.[a-z_]\w*)*):([A-Za-z_]\w*(?:\.\w+)?)")
_MEMBER = re.compile(r"[A-Z]\w*\.\w+")
_DOTTED = re.compile(r"[a-z_]\w*(?:\.[a-z_]\w*)+")
_FILE = re.compile(r".+\.(?:py|md|sqlite|json|bloom|lock|commit|toml|tsv)")


def _names(path: Path) -> set[str]:
    """Top-level names of a module, and ``Class.member`` for methods, fields and ``self.x``."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{inner.name}")
                elif isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                    names.add(f"{node.name}.{inner.target.id}")
                elif (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                      and inner.value.id == "self" and isinstance(inner.ctx, ast.Store)):
                    names.add(f"{node.name}.{inner.attr}")
    return names


def _modules() -> dict[str, set[str]]:
    """``room.module`` (or ``module`` at the top) -> its names."""
    return {".".join(p.relative_to(PACKAGE).with_suffix("").parts): _names(p)
            for p in PACKAGE.rglob("*.py")}


def _is_config_key(token: str) -> bool:
    section, _, key = token.partition(".")
    return section in SECTIONS and key in {f.name for f in dataclasses.fields(SECTIONS[section])}


def unresolved(text: str, modules: dict[str, set[str]]) -> list[str]:
    """The citations in ``text`` that name nothing in the package or the config."""
    members = set().union(*modules.values())
    prefixes = SECTIONS.keys() | {module.partition(".")[0] for module in modules}
    missing = []
    for token in _CITED.findall(text):
        if _FILE.fullmatch(token):
            continue
        if match := _QUALIFIED.fullmatch(token):
            module, name = match.groups()
            found = name in modules.get(module, ())
        elif _MEMBER.fullmatch(token):
            found = token in members
        elif _DOTTED.fullmatch(token) and token.partition(".")[0] in prefixes:
            found = token in modules or _is_config_key(token)
        else:
            continue
        if not found:
            missing.append(token)
    return missing


def test_every_citation_resolves() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert unresolved(text, _modules()) == []


def test_the_check_catches_stale_names() -> None:
    stale = ("`crawl.visit:SiteVisit._gone` `Crawler._nothing` `store.nowhere` `crawl.no_such_key` "
             "`crawl.visit:SiteVisit.run` `store.status` `crawl.min_rest` `queue.log` `signal.signal` "
             "`store.postgres.catalog:PgCatalog` `store.postgres.catalog:Catalog` `store.embedded.nowhere` "
             "`store.s3.objectstore` `store.pgcatalog`")
    assert unresolved(stale, _modules()) == [
        "crawl.visit:SiteVisit._gone", "Crawler._nothing", "store.nowhere", "crawl.no_such_key",
        "store.postgres.catalog:Catalog", "store.embedded.nowhere", "store.pgcatalog"]


def test_every_room_has_a_section() -> None:
    text = DOC.read_text(encoding="utf-8")
    rooms = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert rooms == ["browser", "commands", "crawl", "dns", "links", "queues", "replay", "store", "web"]
    for room in rooms:
        assert f"### `{room}/`" in text
