"""The crawler's side of the plugin API (archiver.plugins): loading the enabled plugins and calling
their hooks with each failure isolated.

``load_plugins`` finds each name of ``plugins.enable`` among the installed entry points of group
``archiver.plugins`` and calls its factory with the plugin's table; a missing name, a name two
installed distributions register (one would silently replace the other) or a failing factory is
a ``PluginError`` (the crawler does not start). ``PluginHost`` holds the loaded plugins
for a process (with ``load_focus``: the built-in focus plugin, when ``crawl.focus`` names a
relevance model); ``PluginHost.for_site`` gives one visit its ``SitePlugins``, which call the hooks:
a hook that raises, or answers something the API does not allow (labels that are not short
strings, a priority that is not a finite number), is logged once (plugin, hook, site, error),
counted as ``errors=plugin`` in the crawl's status, and that plugin is left out for the rest of
the visit. Other sites, and other plugins of this site, go on as before.

Hooks run on the event loop: a slow hook delays every visit of the process by its own time (the
status's ``loop_stall_max_ms`` shows it). on_capture sees a document of at most
``MAX_DOCUMENT_BYTES`` decoded bytes, so the page text it may ask for stays bounded too; the visit
makes the document of a large body, and its text, in a worker thread before the hook runs
(``read_document``; archiver.crawl.bodies). A body with more content codings than
``web.http.MAX_CODINGS`` gives an empty document, marked truncated.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from archiver.config import PluginsConfig
from archiver.plugins import (
    ENTRY_POINT_GROUP,
    HOOKS,
    LABEL_NAME,
    MAX_DOCUMENT_BYTES,
    MAX_LABEL_VALUE,
    MAX_LABELS,
    CaptureInfo,
    Document,
    LinkContext,
    VisitContext,
)
from archiver.web.http import CodingError, content_codings, decode_body
from archiver.web.pagelinks import decoded_within

log = logging.getLogger("archiver.crawl.plugins")


class PluginError(Exception):
    """An enabled plugin cannot be loaded: no such entry point, or its factory failed."""


class _BadAnswer(Exception):
    """A hook returned something the plugin API does not allow."""


@dataclass(frozen=True)
class LoadedPlugin:
    """One enabled plugin: its entry point name and the hooks its object has."""

    name: str
    hooks: Mapping[str, Callable[..., Any]]


def load_plugins(config: PluginsConfig) -> tuple[LoadedPlugin, ...]:
    """The plugins ``config.enable`` names, in its order, each made by its entry point's factory;
    PluginError naming both distributions when two register an enabled name."""
    found: dict[str, list[EntryPoint]] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, []).append(point)
    loaded = []
    for name in config.enable:
        if name not in found:
            known = ", ".join(sorted(found)) or "none"
            raise PluginError(f"plugins.enable: no installed plugin {name!r} (entry points of group "
                              f"{ENTRY_POINT_GROUP!r}: {known})")
        if len(found[name]) > 1:
            both = " and ".join(f"{_distribution(p)} ({p.value})" for p in found[name])
            raise PluginError(f"plugins.enable: plugin {name!r} is registered by {both}: "
                              "uninstall all but the one you mean")
        (point,) = found[name]
        try:
            factory = point.load()
            plugin = factory(dict(config.tables.get(name, {})))
        except Exception as e:
            raise PluginError(f"plugin {name!r} ({point.value}) failed to start: "
                              f"{type(e).__name__}: {e}") from e
        hooks = {hook: method for hook in HOOKS if callable(method := getattr(plugin, hook, None))}
        if not hooks:
            raise PluginError(f"plugin {name!r} ({point.value}) has none of the hooks "
                              f"{', '.join(HOOKS)}")
        loaded.append(LoadedPlugin(name, hooks))
    return tuple(loaded)


def _distribution(point: EntryPoint) -> str:
    """The installed distribution (name and version) that registers ``point``."""
    dist = point.dist
    return f"{dist.name} {dist.version}" if dist is not None else "a distribution of unknown name"


def load_focus(model: Path | None) -> tuple[LoadedPlugin, ...]:
    """The built-in focus plugin (archiver.crawl.focus) when ``crawl.focus`` names a model file;
    a model that cannot be read is a ``PluginError``, as a plugin that cannot start."""
    if model is None:
        return ()
    from archiver.crawl.focus import focus_plugin  # numpy: only for a focused crawl
    from archiver.web.relevance import ModelError

    try:
        plugin = focus_plugin(model)
    except ModelError as e:
        raise PluginError(str(e)) from None
    return (LoadedPlugin("focus", {"on_capture": plugin.on_capture,
                                   "site_priority": plugin.site_priority}),)


class PluginHost:
    """A process's plugins; ``errors`` is the crawl's error counter (``errors["plugin"]``)."""

    def __init__(self, plugins: tuple[LoadedPlugin, ...], errors: Counter[str]) -> None:
        self.plugins = plugins
        self.errors = errors

    def for_site(self, site: str) -> SitePlugins:
        """The hooks for one visit of ``site``, none disabled yet."""
        return SitePlugins(site, self)


class SitePlugins:
    """One visit's view of the plugins: the hooks of those not disabled for the site yet."""

    def __init__(self, site: str, host: PluginHost) -> None:
        self.site = site
        self._host = host
        self._disabled: set[str] = set()

    def wants(self, hook: str) -> bool:
        """Does any plugin still enabled for this site have ``hook``?"""
        return any(hook in p.hooks and p.name not in self._disabled for p in self._host.plugins)

    def refusal(self, url: str, context: VisitContext) -> str | None:
        """The name of the first plugin whose should_visit refuses ``url`` (answers False), or None."""
        for plugin, answer in self._ask("should_visit", url, context):
            if answer is False:
                return plugin
            if answer is not None and answer is not True:
                self._failed(plugin, "should_visit", _BadAnswer(f"answered {answer!r}, not a bool or None"))
        return None

    def labels(self, capture: CaptureInfo, document: Document) -> dict[str, str]:
        """The labels all plugins give a capture (on a name two give, the first plugin's)."""
        labels: dict[str, str] = {}
        for plugin, answer in self._ask("on_capture", capture, document):
            try:
                given = _checked_labels(answer)
            except _BadAnswer as e:
                self._failed(plugin, "on_capture", e)
                continue
            for name, value in given.items():
                if name not in labels and len(labels) < MAX_LABELS:
                    labels[name] = value
        return labels

    def priority(self, site: str, context: LinkContext) -> float:
        """The highest site_priority any plugin gives ``site`` (0.0 if none answers)."""
        best: float | None = None
        for plugin, answer in self._ask("site_priority", site, context):
            if answer is None:
                continue
            if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not math.isfinite(answer):
                self._failed(plugin, "site_priority", _BadAnswer(f"answered {answer!r}, not a finite number"))
                continue
            best = float(answer) if best is None else max(best, float(answer))
        return 0.0 if best is None else best

    def _ask(self, hook: str, *args: object) -> list[tuple[str, Any]]:
        """(plugin, answer) of every plugin still enabled here that has ``hook``; a raising one
        is disabled for the site."""
        answers = []
        for plugin in self._host.plugins:
            method = plugin.hooks.get(hook)
            if method is None or plugin.name in self._disabled:
                continue
            try:
                answers.append((plugin.name, method(*args)))
            except Exception as e:
                self._failed(plugin.name, hook, e)
        return answers

    def _failed(self, plugin: str, hook: str, error: Exception) -> None:
        self._disabled.add(plugin)
        self._host.errors["plugin"] += 1
        log.warning("plugin-failed", exc_info=not isinstance(error, _BadAnswer), extra={"fields": {
            "plugin": plugin, "hook": hook, "site": self.site,
            "error": f"{type(error).__name__}: {error}", "disabled": "for this visit of the site"}})


def _checked_labels(answer: object) -> Mapping[str, str]:
    """on_capture's answer as labels; _BadAnswer if it is not None or a mapping of label names
    (``LABEL_NAME``) to printable strings of at most ``MAX_LABEL_VALUE`` characters."""
    if answer is None:
        return {}
    if not isinstance(answer, Mapping):
        raise _BadAnswer(f"answered a {type(answer).__name__}, not a mapping of labels")
    for name, value in answer.items():
        if not isinstance(name, str) or not LABEL_NAME.fullmatch(name):
            raise _BadAnswer(f"label name {name!r} is not lower-case letters, digits, '_', '-', '.'")
        if not isinstance(value, str) or len(value) > MAX_LABEL_VALUE or not value.isprintable():
            raise _BadAnswer(f"label {name}: {value!r} is not a printable string of at most "
                             f"{MAX_LABEL_VALUE} characters")
    return answer


def document_of(url: str, status: int, headers: Mapping[str, str], body: bytes,
                truncated: bool) -> Document:
    """The Document on_capture sees: the body with its content coding undone, bounded."""
    encoding = headers.get("content-encoding")
    try:
        content_codings(encoding)
    except CodingError:
        return Document(url=url, status=status, headers=headers, body=b"", truncated=True)
    decoded = decode_body(body, encoding, MAX_DOCUMENT_BYTES + 1)
    return Document(url=url, status=status, headers=headers, body=decoded[:MAX_DOCUMENT_BYTES],
                    truncated=truncated or len(decoded) > MAX_DOCUMENT_BYTES)


def small_document(url: str, status: int, headers: Mapping[str, str], body: bytes,
                   truncated: bool, bound: int) -> Document | None:
    """:func:`document_of` when the body decodes to at most ``bound`` bytes (``bound`` at most
    ``MAX_DOCUMENT_BYTES``); None when it is larger."""
    encoding = headers.get("content-encoding")
    try:
        content_codings(encoding)
    except CodingError:
        return document_of(url, status, headers, body, truncated)
    decoded = decoded_within(body, encoding, bound)
    if decoded is None:
        return None
    return Document(url=url, status=status, headers=headers, body=decoded, truncated=truncated)


def read_document(url: str, status: int, headers: Mapping[str, str], body: bytes,
                  truncated: bool) -> Document:
    """:func:`document_of` with its text read already (for a worker thread)."""
    document = document_of(url, status, headers, body, truncated)
    document.text  # noqa: B018 (a cached property, computed here)
    return document


def no_plugins(errors: Counter[str] | None = None) -> PluginHost:
    """A host with no plugins (every hook a no-op)."""
    return PluginHost((), errors if errors is not None else Counter())


def describe(plugins: tuple[LoadedPlugin, ...]) -> str:
    """``name (hook, hook)`` per plugin, for the crawler's start line."""
    return ", ".join(f"{p.name} ({', '.join(p.hooks)})" for p in plugins) or "none"

