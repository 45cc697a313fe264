"""The plugin host: plugins found through their entry points (a test package installed for real),
config errors, each hook's failures isolated per site, the highest site priority winning, labels
checked, and the ``[plugins]`` config section."""

from __future__ import annotations

import gzip
import logging
import math
from collections import Counter

import pytest

from archiver import config
from archiver.config import PluginsConfig
from archiver.crawl.pluginhost import (
    LoadedPlugin,
    PluginError,
    PluginHost,
    describe,
    document_of,
    load_plugins,
    read_document,
    small_document,
)
from archiver.plugins import CaptureInfo, Document, LinkContext, VisitContext
from tests.support import plugins as test_plugins

SITE_A, SITE_B = "http://a.example", "http://b.example"
CAPTURE = CaptureInfo(SITE_A + "/", "20260101000000", 200, "<urn:uuid:1>", "x.warc.gz", 0, SITE_A)
PAGE = Document(SITE_A + "/", 200, {"content-type": "text/html"}, b"<title>Hi</title><p>Hello</p>")


@pytest.fixture
def installed(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(test_plugins.install(tmp_path / "site-packages")))


def test_an_enabled_name_two_distributions_register_is_an_error_naming_both(
        installed, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(test_plugins.install_impostor(
        tmp_path / "elsewhere", ("labeller", "language"))))
    for name, first in (("labeller", "archiver_test_plugins 1.0 (archiver_test_plugins:labeller)"),
                        ("language", "archiver ")):
        with pytest.raises(PluginError) as raised:
            load_plugins(PluginsConfig(enable=(name,), tables={name: {"refuse": "/x/"}}))
        message = str(raised.value)
        assert f"plugin {name!r} is registered by " in message and first in message
        assert "archiver_impostor_plugins 6.6 (archiver_impostor_plugins:impostor)" in message
    # A name only one distribution registers loads as before.
    (broken,) = load_plugins(PluginsConfig(enable=("broken",), tables={"broken": {"site": SITE_A}}))
    assert broken.name == "broken"


def host(*plugins: LoadedPlugin) -> PluginHost:
    return PluginHost(plugins, Counter())


def test_enabled_plugins_load_through_their_entry_points_in_order(installed):
    loaded = load_plugins(PluginsConfig(enable=("broken", "labeller"), tables={
        "labeller": {"refuse": "/private/"}, "broken": {"site": SITE_A}}))
    assert [p.name for p in loaded] == ["broken", "labeller"]
    assert describe(loaded) == ("broken (should_visit, on_capture, site_priority), "
                                "labeller (should_visit, on_capture, site_priority)")
    site = host(*loaded).for_site(SITE_B)
    assert site.refusal(SITE_B + "/private/x", VisitContext(SITE_B, None, 0, False)) == "labeller"
    assert site.refusal(SITE_B + "/public", VisitContext(SITE_B, None, 0, False)) is None
    assert load_plugins(PluginsConfig()) == ()


def test_the_built_in_plugin_is_an_entry_point_too():
    (language,) = load_plugins(PluginsConfig(enable=("language",)))
    assert language.name == "language" and list(language.hooks) == ["on_capture"]


@pytest.mark.parametrize("enable, tables, message", [
    (("nosuch",), {}, "no installed plugin 'nosuch'"),
    (("failing",), {"failing": {"why": "no key"}}, "plugin 'failing' (archiver_test_plugins:failing) "
                                                   "failed to start: ValueError: cannot start: no key"),
    (("labeller",), {}, "plugin 'labeller' (archiver_test_plugins:labeller) failed to start: KeyError"),
    (("hookless",), {}, "has none of the hooks should_visit, on_capture, site_priority"),
])
def test_a_plugin_that_cannot_start_is_a_clear_error(installed, enable, tables, message):
    with pytest.raises(PluginError) as raised:
        load_plugins(PluginsConfig(enable=enable, tables=tables))
    assert message in str(raised.value)


def test_a_raising_hook_disables_its_plugin_for_that_site_only(caplog):
    calls: Counter[str] = Counter()

    def should_visit(url: str, context: VisitContext) -> bool | None:
        calls[context.site] += 1
        if context.site == SITE_A:
            raise RuntimeError("boom")
        return None

    other = LoadedPlugin("other", {"should_visit": lambda url, context: "/no" not in url,
                                   "on_capture": lambda capture, document: {"seen": "1"}})
    flaky = LoadedPlugin("flaky", {"should_visit": should_visit,
                                   "on_capture": lambda capture, document: {"flaky": "1"}})
    shared = host(flaky, other)
    a, b = shared.for_site(SITE_A), shared.for_site(SITE_B)
    with caplog.at_level(logging.WARNING, logger="archiver.crawl.plugins"):
        for n in range(3):
            assert a.refusal(f"{SITE_A}/{n}", VisitContext(SITE_A, None, 0, False)) is None
            assert b.refusal(f"{SITE_B}/{n}", VisitContext(SITE_B, None, 0, False)) is None
        assert a.refusal(SITE_A + "/no", VisitContext(SITE_A, None, 0, False)) == "other"
    assert calls == {SITE_A: 1, SITE_B: 3}  # not asked again on site A
    assert shared.errors["plugin"] == 1
    (record,) = caplog.records
    assert record.getMessage() == "plugin-failed"
    assert record.fields["plugin"] == "flaky" and record.fields["hook"] == "should_visit"
    assert record.fields["site"] == SITE_A and "RuntimeError: boom" in record.fields["error"]
    # Disabled for every hook of site A, and for no hook of site B.
    assert a.labels(CAPTURE, PAGE) == {"seen": "1"}
    assert b.labels(CAPTURE, PAGE) == {"flaky": "1", "seen": "1"}
    assert a.wants("on_capture") and not a.wants("site_priority")
    # A new visit of site A starts with every plugin enabled.
    assert shared.for_site(SITE_A).labels(CAPTURE, PAGE) == {"flaky": "1", "seen": "1"}


def test_the_highest_site_priority_wins_and_a_bad_answer_counts_as_an_error():
    link = LinkContext(SITE_A + "/", {"lang": "fr"}, SITE_B + "/")

    def answering(name: str, value: object) -> LoadedPlugin:
        return LoadedPlugin(name, {"site_priority": lambda site, context: value})

    assert host().for_site(SITE_A).priority(SITE_B, link) == 0.0
    assert host(answering("none", None)).for_site(SITE_A).priority(SITE_B, link) == 0.0
    assert host(answering("low", -2)).for_site(SITE_A).priority(SITE_B, link) == -2.0
    three = host(answering("a", 0.5), answering("b", None), answering("c", 2), answering("d", 1.5))
    assert three.for_site(SITE_A).priority(SITE_B, link) == 2.0
    for bad in (math.nan, math.inf, "9", True):
        shared = host(answering("bad", bad), answering("good", 0.25))
        assert shared.for_site(SITE_A).priority(SITE_B, link) == 0.25
        assert shared.errors["plugin"] == 1


def test_labels_are_checked_and_the_first_plugin_wins_a_name():
    def labelling(name: str, labels: object) -> LoadedPlugin:
        return LoadedPlugin(name, {"on_capture": lambda capture, document: labels})

    shared = host(labelling("first", {"lang": "fr"}), labelling("second", {"lang": "de", "x.y": "z"}))
    assert shared.for_site(SITE_A).labels(CAPTURE, PAGE) == {"lang": "fr", "x.y": "z"}
    for bad in ({"Lang": "fr"}, {"lang": 3}, {"lang": "a\nb"}, {"lang": "x" * 257}, ["lang"],
                {"": "x"}):
        shared = host(labelling("bad", bad), labelling("good", {"ok": "1"}))
        assert shared.for_site(SITE_A).labels(CAPTURE, PAGE) == {"ok": "1"}, bad
        assert shared.errors["plugin"] == 1
    assert host(labelling("none", None)).for_site(SITE_A).labels(CAPTURE, PAGE) == {}


def test_should_visit_answers_other_than_a_bool_or_none_count_as_errors():
    odd = LoadedPlugin("odd", {"should_visit": lambda url, context: "no"})
    shared = host(odd)
    assert shared.for_site(SITE_A).refusal(SITE_A + "/", VisitContext(SITE_A, None, 0, False)) is None
    assert shared.errors["plugin"] == 1


def test_a_document_holds_the_decoded_body_and_its_text():
    html = "<html><title>Titre</title><body><h1>Bonjour</h1><script>x()</script><p>le monde</p>"
    document = document_of("http://a.example/", 200, {"content-type": "text/html; charset=utf-8",
                                                      "content-encoding": "gzip"},
                           gzip.compress(html.encode()), truncated=False)
    assert document.body == html.encode() and not document.truncated
    assert document.media_type == "text/html"
    assert document.text == "Titre\nBonjour\nBonjour le monde"
    plain = Document("http://a.example/a.txt", 200, {"content-type": "text/plain; charset=latin-1"},
                     "déjà".encode("latin-1"))
    assert plain.text == "déjà"
    assert Document("http://a.example/x.png", 200, {"content-type": "image/png"}, b"\x89PNG").text == ""
    big = document_of("http://a.example/", 200, {}, b"a" * (3 * 2**20), truncated=False)
    assert big.truncated and len(big.body) == 2 * 2**20


def test_a_small_document_is_made_as_any_other_a_large_one_in_a_thread():
    html = b"<title>T</title>" + b"<p>words and words</p>" * 500
    headers = {"content-type": "text/html", "content-encoding": "gzip"}
    made = document_of(SITE_A + "/", 200, headers, gzip.compress(html), truncated=False)
    assert small_document(SITE_A + "/", 200, headers, gzip.compress(html), False, len(html)) == made
    assert small_document(SITE_A + "/", 200, headers, gzip.compress(html), False, len(html) - 1) \
        is None
    read = read_document(SITE_A + "/", 200, headers, gzip.compress(html), False)
    assert read == made and "text" in vars(read)  # its text read already


def test_a_body_with_too_many_codings_gives_an_empty_document():
    headers = {"content-type": "text/html", "content-encoding": ", ".join(["gzip"] * 6)}
    body = b"<p>hello</p>"
    for _ in range(6):
        body = gzip.compress(body)
    for document in (document_of(SITE_A + "/", 200, headers, body, False),
                     small_document(SITE_A + "/", 200, headers, body, False, 2**16)):
        assert document is not None and document.body == b"" and document.truncated


def test_the_plugins_section(tmp_path):
    path = tmp_path / "archiver.toml"
    path.write_text('[plugins]\nenable = ["language", "mine"]\n[plugins.mine]\nlevel = 3\n'
                    'nested = { a = [1, 2] }\n')
    loaded = config.load(path).plugins
    assert loaded.enable == ("language", "mine")
    assert loaded.tables == {"mine": {"level": 3, "nested": {"a": [1, 2]}}}
    assert config.Config().plugins == PluginsConfig()
    for text, needle in [
        ('[plugins]\nenabled = ["x"]\n', "plugins.enabled: unknown key"),
        ('[plugins]\nenable = "x"\n', "plugins.enable: expected a list of strings"),
        ('[plugins]\nenable = ["a b"]\n', "'a b' is not an entry point name"),
        ('[plugins]\nenable = ["a", "a"]\n', "a plugin is named twice"),
    ]:
        path.write_text(text)
        with pytest.raises(config.ConfigError, match="plugins"):
            config.load(path)
        with pytest.raises(config.ConfigError) as raised:
            config.load(path)
        assert needle in str(raised.value)


def test_plugins_are_kept_from_the_first_config_on_reload():
    old = config.Config(plugins=PluginsConfig(enable=("language",)))
    new, kept = config.reloaded(old, config.Config())
    assert new.plugins == old.plugins and kept == ["[plugins]"]
