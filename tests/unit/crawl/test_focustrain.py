"""``archiver focus train`` and the focus plugin's hooks on tiny corpora: the examples' layout,
the model it writes, the report, the refusals, and the scores and priorities the crawl gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from archiver import cli, config
from archiver.crawl.crawler import Crawler
from archiver.crawl.focus import LABEL, FocusPlugin, focus_plugin
from archiver.crawl.focustrain import TrainError, read_examples, train
from archiver.crawl.pluginhost import PluginError, load_focus
from archiver.plugins import CaptureInfo, Document, LinkContext
from archiver.web.relevance import ModelError, model_bytes, parse_model
from demoweb import DemoWeb, WebSpec
from demoweb.examples import write_examples

SKY = ["The comet crossed the night sky near the star.", "A telescope shows the star and a comet.",
       "The planet's orbit around the star, seen in the sky.", "A telescope on the comet's orbit."]
FOOD = ["Simmer the garlic and onion in butter.", "Bake the bread with garlic and butter.",
        "A soup of onion, garlic and bread.", "Butter the bread for the onion soup."]


def corpus(root: Path, relevant: list[str], other: list[str]) -> Path:
    for name, texts in (("relevant", relevant), ("other", other)):
        (root / name).mkdir(parents=True)
        for n, text in enumerate(texts):
            if n % 2:  # every other one as an HTML page, reduced to its text
                (root / name / f"{n}.html").write_text(
                    f"<html><head><title>{n}</title><style>p {{}}</style></head>"
                    f"<body><p>{text}</p><script>var orbit = 1;</script></body></html>")
            else:
                (root / name / f"{n}.txt").write_text(text)
    return root


def test_a_tiny_corpus_trains_a_model_that_tells_the_classes_apart(tmp_path):
    examples = read_examples(corpus(tmp_path / "ex", SKY, FOOD))
    (tmp_path / "ex" / "other" / "notes.md").write_text("skipped")
    assert len(examples.relevant) == len(examples.other) == 4
    assert not any("var orbit" in text for text in examples.relevant)  # scripts are not text
    trained = train(examples)
    assert trained.counts == {"relevant": 4, "other": 4}
    assert trained.folds == 4 and trained.accuracy is not None and trained.accuracy >= 0.75
    model = trained.model
    assert model.score("a comet and a nebula in the sky") > 0.5 > model.score("garlic soup with bread")
    assert model.trained["documents"] == {"relevant": 4, "other": 4}


def test_one_document_per_class_trains_without_an_accuracy(tmp_path):
    trained = train(read_examples(corpus(tmp_path, SKY[:1], FOOD[:1])))
    assert trained.accuracy is None and trained.folds == 0
    assert trained.model.score(SKY[0]) > trained.model.score(FOOD[0])


@pytest.mark.parametrize(("relevant", "other", "message"), [
    ([], FOOD, "relevant: no example document"),
    (SKY, [], "other: no example document"),
    ([" \n"], FOOD, "relevant: no example document"),
])
def test_a_class_without_documents_is_refused(tmp_path, relevant, other, message):
    with pytest.raises(TrainError, match=message):
        read_examples(corpus(tmp_path, relevant, other))


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(TrainError, match="not a folder"):
        read_examples(tmp_path / "nowhere")
    (tmp_path / "relevant").mkdir()
    (tmp_path / "relevant" / "a.txt").write_text("comet")
    with pytest.raises(TrainError, match=r"other: missing"):
        read_examples(tmp_path)


def config_file(tmp_path: Path, focus: str = "") -> Path:
    path = tmp_path / "archiver.toml"
    path.write_text(f'[archive]\nroot = "archive"\n[crawl]\nfocus = "{focus}"\n')
    return path


def test_the_verb_writes_the_model_where_crawl_focus_names_it_and_reports(tmp_path, capsys):
    examples = write_examples(tmp_path / "ex", count=6)
    assert cli.main(["focus", "train", str(examples), "--config",
                     str(config_file(tmp_path, "topic.model"))]) == 0
    out = capsys.readouterr().out
    assert "documents: 6 relevant, 6 other" in out
    assert "accuracy: 1.000 (5-fold cross-validation)" in out
    assert f"model: {tmp_path / 'topic.model'}" in out and "time: " in out
    model = parse_model((tmp_path / "topic.model").read_bytes())
    web = DemoWeb(WebSpec(sites=4, pages_per_site=2, trap=False, topical=True))
    page = web.respond("site-001.demo", "/").body.decode()
    assert web.topic("site-001.demo") == "astronomy" and model.score(page) > 0.5
    assert model.score(web.respond("site-002.demo", "/").body.decode()) < 0.5
    # --out wins over crawl.focus; with neither the verb says what to do.
    (examples / "other" / "notes.md").write_text("not read")
    assert cli.main(["focus", "train", str(examples), "--out", str(tmp_path / "b.model"),
                     "--config", str(config_file(tmp_path))]) == 0
    assert (tmp_path / "b.model").exists()
    assert "documents: 6 relevant, 6 other (1 skipped: no text" in capsys.readouterr().out
    assert cli.main(["focus", "train", str(examples), "--config", str(config_file(tmp_path))]) == 2
    assert "--out FILE, or crawl.focus" in capsys.readouterr().err


def test_the_verb_refuses_a_one_class_folder_and_writes_nothing(tmp_path, capsys):
    corpus(tmp_path / "ex", SKY, [])
    code = cli.main(["focus", "train", str(tmp_path / "ex"), "--config",
                     str(config_file(tmp_path, "m.model"))])
    assert code == 2 and "no example document" in capsys.readouterr().err
    assert not (tmp_path / "m.model").exists()


def capture(url: str) -> CaptureInfo:
    return CaptureInfo(url, "20261124000000", 200, "<urn:uuid:1>", "a.warc.gz", 0, "http://a")


def test_the_plugin_labels_pages_and_gives_their_score_to_the_sites_they_link(tmp_path):
    plugin = FocusPlugin(train(read_examples(corpus(tmp_path, SKY, FOOD))).model)
    html = {"content-type": "text/html; charset=utf-8"}
    sky = Document("http://a/", 200, html, b"<title>x</title><p>comet galaxy nebula telescope</p>")
    labels = plugin.on_capture(capture(sky.url), sky)
    assert labels is not None and set(labels) == {LABEL}
    score = float(labels[LABEL])
    assert 0.5 < score <= 1 and len(labels[LABEL]) == 5  # "0.xyz"
    food = Document("http://a/f", 200, {"content-type": "text/plain"}, b"garlic onion butter soup")
    assert float(plugin.on_capture(capture(food.url), food)[LABEL]) < 0.5
    for unscored in (
        Document("http://a/i", 200, {"content-type": "image/png"}, b"\x89PNG comet"),
        Document("http://a/r", 301, html, b"<p>comet</p>"),
        Document("http://a/e", 200, html, b"<p> </p>"),
    ):
        assert plugin.on_capture(capture(unscored.url), unscored) is None
    link = LinkContext("http://a/", labels, "http://b/")
    assert plugin.site_priority("http://b", link) == score
    assert plugin.site_priority("http://b", LinkContext("http://a/", {}, "http://b/")) is None
    assert plugin.site_priority("http://b", LinkContext("http://a/", {LABEL: "x"}, "b")) is None


def test_a_model_file_that_cannot_be_used_names_itself(tmp_path):
    with pytest.raises(ModelError, match=r"crawl.focus: .*nothing.model: cannot read"):
        focus_plugin(tmp_path / "nothing.model")
    model = train(read_examples(corpus(tmp_path / "ex", SKY, FOOD))).model
    (tmp_path / "cut.model").write_bytes(model_bytes(model)[:-10])
    with pytest.raises(ModelError, match=r"cut.model: the relevance model does not match"):
        focus_plugin(tmp_path / "cut.model")
    (tmp_path / "good.model").write_bytes(model_bytes(model))
    assert focus_plugin(tmp_path / "good.model").model.bias == model.bias


def test_a_crawler_whose_model_cannot_be_used_does_not_start(tmp_path):
    (tmp_path / "bad.model").write_bytes(b"archiver-relevance 1 crc32=00000000\n{}\n")
    cfg = config.load(config_file(tmp_path, "bad.model"))
    with pytest.raises(PluginError, match=r"crawl.focus: .*bad.model: .*does not match its checksum"):
        Crawler(cfg)
    assert not (tmp_path / "archive").exists()  # nothing opened, nothing written
    model = train(read_examples(corpus(tmp_path / "ex", SKY, FOOD))).model
    (tmp_path / "good.model").write_bytes(model_bytes(model))
    (focus,) = load_focus(tmp_path / "good.model")
    assert focus.name == "focus" and set(focus.hooks) == {"on_capture", "site_priority"}
    assert load_focus(None) == ()


def test_crawl_focus_is_read_at_start_only(tmp_path):
    before = config.load(config_file(tmp_path))
    assert before.crawl.focus is None  # empty: unfocused
    after = config.load(config_file(tmp_path, "topic.model"))
    assert after.crawl.focus == tmp_path / "topic.model"  # relative to the config's folder
    kept, changed = config.reloaded(before, after)
    assert changed == ["crawl.focus"] and kept.crawl.focus is None
