"""Which captures are the site's content (Capture.is_content, NOT_CONTENT)."""

from __future__ import annotations

import pytest

from archiver.store.models import NOT_CONTENT, Capture, labels_text


def capture(labels: dict[str, str]) -> Capture:
    return Capture("org,example)/", "20260101000000", "http://example.org/", 200, "text/html",
                   "sha1:X", None, "a.warc.gz", 0, 10, labels=labels_text(labels))


@pytest.mark.parametrize("name", NOT_CONTENT)
def test_a_not_content_label_makes_a_capture_no_content(name: str) -> None:
    assert not capture({name: "challenge", "lang": "en"}).is_content


@pytest.mark.parametrize("labels", [{}, {"session": "s1"}, {"rendered": "scripts"},
                                    {"lang": "login"}, {"note": '"gatekeeper"'}])
def test_other_labels_leave_a_capture_content(labels: dict[str, str]) -> None:
    assert capture(labels).is_content
