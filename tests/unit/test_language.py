"""The built-in plugin ``language``: pages labelled with their language from their text, no label
when the text is short or the guess unsure, its table checked, and any document taken."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archiver.crawl.pluginhost import document_of
from archiver.language import LABEL, plugin
from archiver.plugins import CaptureInfo, Document

CAPTURE = CaptureInfo("http://a.example/", "20260101000000", 200, "<urn:uuid:1>", "x.warc.gz", 0,
                      "http://a.example")
TEXTS = {
    "fr": "Les archives du web conservent les pages telles qu'elles étaient, pour que les "
          "historiens puissent les lire encore dans vingt ans, même quand les sites ont disparu.",
    "en": "Web archives keep pages as they were, so that historians can still read them twenty "
          "years from now, even when the sites themselves have long disappeared from the net.",
    "de": "Webarchive bewahren Seiten so auf, wie sie waren, damit Historiker sie auch in zwanzig "
          "Jahren noch lesen können, selbst wenn die Websites längst verschwunden sind.",
}


@pytest.fixture(scope="module")
def language():
    return plugin({"min_chars": 100})


def page(text: str, status: int = 200) -> Document:
    html = f"<html><head><title>t</title><script>var x = 1;</script></head><body><p>{text}</p>"
    return Document("http://a.example/", status, {"content-type": "text/html; charset=utf-8"},
                    html.encode())


@pytest.mark.parametrize("code", sorted(TEXTS))
def test_a_page_gets_its_language(language, code):
    assert language.on_capture(CAPTURE, page(TEXTS[code])) == {LABEL: code}
    plain = Document("http://a.example/a.txt", 200, {"content-type": "text/plain"},
                     TEXTS[code].encode())
    assert language.on_capture(CAPTURE, plain) == {LABEL: code}


def test_no_label_for_short_text_errors_and_other_media(language):
    assert language.on_capture(CAPTURE, page("Bonjour tout le monde")) is None
    assert language.on_capture(CAPTURE, page(TEXTS["fr"], status=404)) is None
    image = Document("http://a.example/x.png", 200, {"content-type": "image/png"}, b"\x89PNG" * 100)
    assert language.on_capture(CAPTURE, image) is None


def test_languages_limit_the_guess_and_confidence_can_refuse_it():
    limited = plugin({"min_chars": 100, "languages": ["en", "de"]})
    assert limited.on_capture(CAPTURE, page(TEXTS["de"])) == {LABEL: "de"}
    assert limited.guess(TEXTS["fr"]) in (None, "en", "de")
    assert plugin({"min_chars": 100, "min_confidence": 1.0}).guess(TEXTS["fr"] * 3) is None


@pytest.mark.parametrize("table, message", [
    ({"min_char": 3}, "unknown key(s) min_char"),
    ({"min_chars": 0}, "min_chars: expected a positive integer"),
    ({"min_confidence": 1.5}, "min_confidence: expected a number from 0 to 1"),
    ({"languages": "fr"}, "languages: expected a list"),
    ({"languages": ["fr", "xx"]}, "languages: unknown code(s) xx"),
])
def test_a_bad_table_is_refused(table, message):
    with pytest.raises(ValueError) as raised:
        plugin(table)
    assert message in str(raised.value)


@given(body=st.binary(max_size=3000) | st.text(max_size=1500).map(str.encode),
       content_type=st.sampled_from(["text/html", "text/html; charset=latin-1", "text/plain",
                                     "text/plain; charset=no-such", "application/xhtml+xml", "",
                                     "image/png"]),
       encoding=st.sampled_from(["", "gzip", "br"]))
def test_any_document_gives_a_known_language_or_none(language, body, content_type, encoding):
    headers = {"content-type": content_type, "content-encoding": encoding}
    answer = language.on_capture(CAPTURE, document_of("http://a.example/", 200, headers, body, False))
    assert answer is None or (set(answer) == {LABEL} and answer[LABEL] in language.identifier.labels)
