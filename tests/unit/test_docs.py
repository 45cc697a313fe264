"""README.md and docs/*.md name real things: every `archiver` command and flag they show exists in
the CLI parser, every config key exists, every repository file and link target exists; and
docs/configuration.md documents every config key."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re
import typing
from pathlib import Path

from archiver import cli, config
from tests.support.repo import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONFIGURATION = ROOT / "docs" / "configuration.md"
SECTIONS = {config.section_name(name): {f.name for f in dataclasses.fields(hint)}
            for name, hint in typing.get_type_hints(config.Config).items()
            if dataclasses.is_dataclass(hint)}
SECTIONS["plugins"] -= {"tables"}                   # [plugins.<name>] tables, not a key
SHEET_KEYS = set(config.SHEET_KEYS + config.SHEET_CRAWL_KEYS)
# Names config still reads (with a notice): retired keys, and the old names of renamed ones.
RETIRED = {f"{section}.{key}" for section, key in config.RETIRED} | {
    f"{section}.{key}" for section, key in config.RENAMED_KEYS}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_SPAN = re.compile(r"`([^`]+)`")
_COMMAND = re.compile(r"(?:^|(?<=[\s(/]))archiver (?=[a-z-])(.*)")
_KEY = re.compile(r"([a-z0-9]+)\.([a-z_]+)(?:\s*=.*)?")
_TOML_TABLE = re.compile(r"\[\[?([\w.]+)\]\]?")
_TOML_KEY = re.compile(r"([\w.]+)\s*=")
_PATH = re.compile(r"(?<![\w/.<>\"'+-])((?:archiver|config|demoweb|docs|systemd|tests|tools|\.ci)/"
                   r"[^\s`'\"()\[\],;:|]*)")
_MODULE = re.compile(r"archiver(?:\.[A-Za-z_]\w*)+")
_FLAG = re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]*")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# Names that end as files do (`dns.sqlite`, `archiver.target`) are neither keys nor modules.
_FILE_ENDINGS = ("py", "json", "sqlite", "md", "toml", "tsv", "bloom", "lock", "commit", "conf",
                 "service", "timer", "target", "yaml")


@functools.cache
def cli_parser() -> argparse.ArgumentParser:
    return cli.parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions
            if isinstance(action, argparse._SubParsersAction) for name, sub in action.choices.items()}


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def code(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The fenced blocks of a page, as (language, text), and its code spans outside them (a span
    wrapped over lines is read as one line)."""
    blocks = [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]
    spans = [" ".join(s.split()) for s in _SPAN.findall(_FENCE.sub("", text))]
    return blocks, spans


def command_lines(blocks: list[tuple[str, str]], spans: list[str]) -> list[str]:
    """Every text after ``archiver `` in spans and shell blocks, up to a pipe, ``&&``, ``;`` or a
    comment outside brackets (``(--url URL | --prefix URL)`` is one command)."""
    lines = [*spans, *(line for lang, body in blocks if lang in ("sh", "") for line in body.splitlines())]
    commands = []
    for line in lines:
        for match in _COMMAND.finditer(line.replace("\\|", "|")):
            text, depth, end = match.group(1), 0, len(match.group(1))
            for i, char in enumerate(text):
                depth += (char in "([") - (char in ")]")
                if depth < 0 or (depth == 0 and text.startswith((" | ", " && ", " ;", " #"), i)):
                    end = i
                    break
            commands.append(text[:end])
    return commands


def command_problems(command: str) -> list[str]:
    """What is wrong with one ``archiver ...`` command: an unknown verb or sub-verb, unknown flags."""
    parser, path = cli_parser(), ["archiver"]
    words = command.split()
    while words and words[0] != "..." and not words[0].startswith("-") and (subs := subcommands(parser)):
        choices = words[0].split("|")
        if not all(choice in subs for choice in choices):
            return [f"`{' '.join(path)} {words[0]}`: no such command"]
        path.append(words.pop(0))
        parser = subs[choices[0]]
    known = flags(parser)
    shown = {flag for word in words for flag in _FLAG.findall(word)}
    return [f"`{' '.join(path)}` has no flag {flag}" for flag in sorted(shown - known)]


def key_problems(blocks: list[tuple[str, str]], spans: list[str]) -> list[str]:
    """Config keys named in spans (``section.key``) and in toml blocks (``key = ...`` under its
    ``[section]``, or ``section.key = ...``) that do not exist; plugins' own tables are free."""
    named = [m.group(0).split("=")[0].strip() for span in spans
             if (m := _KEY.fullmatch(span)) and m.group(1) in SECTIONS
             and m.group(2) not in _FILE_ENDINGS and not _is_module(m.group(1), m.group(2))]
    found = []
    for lang, body in blocks:
        if lang != "toml" or body.startswith("# pyproject.toml"):
            continue
        table = ""
        for line in body.splitlines():
            line = line.split("#")[0].strip()
            if m := _TOML_TABLE.fullmatch(line):
                table = m.group(1)
                if table not in SECTIONS and table != "sheets" and not table.startswith("plugins."):
                    found.append(f"no config section [{table}]")
            elif (m := _TOML_KEY.match(line)) and not table.startswith("plugins."):
                key = m.group(1)
                if table != "sheets":
                    named.append(f"{table}.{key}" if table else key)
                elif key not in SHEET_KEYS:
                    found.append(f"no [[sheets]] key {key}")
    return found + [f"no config key {key}" for key in named if not _is_key(key)]


def _is_key(name: str) -> bool:
    section, _, key = name.partition(".")
    return key in SECTIONS.get(section, ()) or name in RETIRED


def _is_module(section: str, name: str) -> bool:
    room = ROOT / "archiver" / section
    return (room / f"{name}.py").exists() or (room / name).is_dir()


def path_problems(page: Path, text: str, spans: list[str], blocks: list[tuple[str, str]]) -> list[str]:
    """Repository paths, ``archiver.`` modules and link targets that do not exist."""
    problems = []
    texts = [*spans, *(body for lang, body in blocks if lang in ("sh", ""))]
    for path in {p.rstrip(".") for t in texts for p in _PATH.findall(t) if not set(p) & set("*<{")}:
        if not (ROOT / path).exists():
            problems.append(f"no file {path}")
    for name in {m.group(0) for span in spans for m in [_MODULE.fullmatch(span)]
                 if m and not span.endswith(_FILE_ENDINGS)}:
        if not _module_exists(name):
            problems.append(f"no module or name {name}")
    for link in _LINK.findall(_FENCE.sub("", text)):
        if link.startswith(("http:", "https:", "mailto:")):
            continue
        target, _, anchor = link.partition("#")
        file = (page.parent / target).resolve() if target else page
        if not file.exists():
            problems.append(f"no file {target} (linked)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            problems.append(f"no section #{anchor} in {file.name} (linked)")
    return problems


def _module_exists(name: str) -> bool:
    """``archiver.a.b[.Name[.member]]``: the module exists and defines ``Name``."""
    parts = name.split(".")
    for cut in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        if source.exists():
            rest = parts[cut:]
            return not rest or bool(re.search(rf"^\s*(?:def |async def |class )?{rest[0]}\b",
                                              source.read_text(encoding="utf-8"), re.M))
    return False


def anchors(text: str) -> set[str]:
    """The GitHub anchors of a page's headings."""
    headings = re.findall(r"^#+ (.+)$", _FENCE.sub("", text), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def problems(page: Path, text: str) -> list[str]:
    blocks, spans = code(text)
    found = [p for command in command_lines(blocks, spans) for p in command_problems(command)]
    found += key_problems(blocks, spans) + path_problems(page, text, spans, blocks)
    return [f"{page.relative_to(ROOT)}: {p}" for p in dict.fromkeys(found)]


def undocumented(text: str) -> list[str]:
    """The config keys a configuration page does not name in a code span."""
    _, spans = code(text)
    named = {span.split("=")[0].strip() for span in spans}
    return [f"{section}.{key}" for section, keys in SECTIONS.items() for key in sorted(keys)
            if f"{section}.{key}" not in named]


def test_the_docs_name_real_commands_keys_and_files() -> None:
    found = [p for page in DOCS for p in problems(page, page.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_every_config_key_is_in_the_configuration_page() -> None:
    missing = undocumented(CONFIGURATION.read_text(encoding="utf-8"))
    assert not missing, f"docs/configuration.md does not name: {', '.join(missing)}"


STALE = """\
Run `archiver crawl run --config FILE --seed x` and `archiver crawl run --until-idle`, then
`archiver frobnicate --config FILE`, `archiver links walk`, `archiver dns lookup|glance HOST`.

```sh
archiver search query WORDS --json | head -3 --nope    # a pipe ends the command
archiver export (--url URL | --prefix URL | --site D) -o FILE
```

Keys: `crawl.min_rest`, `crawl.min_rested`, `replay.listen = "x"`, `store.bundles` (a module),
`warc.nothing`, files `tools/bench_crawl.py`, `tools/bench_nothing.py`, `docs/nothing.md`,
`archiver.web.urls.normalize`, `archiver.web.urls.denormalize`, `archiver.nowhere`,
[a page](crawling.md#politeness), [a gone page](gone.md), [a gone section](scope.md#nowhere).

```toml
[crawl]
min_rest = 3.0
min_resting = 3.0
[crawling]
max_pages = 1
[[sheets]]
window = "22:00-06:00"
robots = false
[plugins.language]
anything = 1
```
"""


def test_each_check_names_the_page_and_the_wrong_name() -> None:
    found = problems(ROOT / "docs" / "stale.md", STALE)
    assert sorted(found) == sorted(f"docs/stale.md: {p}" for p in [
        "`archiver crawl run` has no flag --seed",
        "`archiver frobnicate`: no such command",
        "`archiver links walk`: no such command",
        "`archiver dns lookup|glance`: no such command",
        "`archiver export` has no flag --site",
        "no config key crawl.min_rested",
        "no config key warc.nothing",
        "no config key crawl.min_resting",
        "no config section [crawling]",
        "no config key crawling.max_pages",
        "no [[sheets]] key robots",
        "no file tools/bench_nothing.py",
        "no file docs/nothing.md",
        "no module or name archiver.web.urls.denormalize",
        "no module or name archiver.nowhere",
        "no file gone.md (linked)",
        "no section #nowhere in scope.md (linked)",
    ])


def test_a_key_missing_from_the_configuration_page_is_named() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8").replace("`crawl.max_per_shape`", "max_per_shape")
    assert undocumented(text) == ["crawl.max_per_shape"]
