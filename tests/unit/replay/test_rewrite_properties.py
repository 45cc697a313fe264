"""The rewriter never creates markup: whatever the URLs in a page contain, the rewritten page has the
same token structure as the archived one, read by parsers written apart from ours: lexbor (the
HTML Standard's tree builder, through selectolax) for the HTML, tinycss2 (CSS Syntax Level 3) for
every stylesheet, ``<style>`` element and ``style`` attribute. Only values change."""

from __future__ import annotations

import tinycss2
from hypothesis import example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from archiver.replay.rewrite import rewrite_css, rewrite_html_text
from tests.support.fuzzing import examples

DOC = "http://example.org/dir/page.html"
TS = "20261122000000"
# What hostile URLs hold: markup, quotes, CSS syntax, escapes, white space and controls.
TRICKY = ["</style>", "</script>", "<script>", "<!--", "-->", "*/", "/*", '"', "'", "\\", "\\3c ", "(", ")",
          "&", "&amp;", "&lt;", ";", "{", "}", "url(", "\n", "\t", " ", "\x0c", "\x00", "é", "%3C", "#",
          "?", "http://a.b/", "//x.org/", "javascript:"]  # fmt: skip
pieces = st.one_of(st.sampled_from(TRICKY), st.text("ab/.:?=&%<>\"'\\() \n", max_size=4))
urls = st.lists(pieces, max_size=8).map("".join)


def html_attribute(value: str, quote: str) -> str:
    """``value`` written as an attribute value of the archived page, in the given quotes."""
    if not quote:
        return "x" + "".join(c if c.isascii() and c.isalnum() else f"&#x{ord(c):x};" for c in value)
    return quote + value.replace("&", "&amp;").replace(quote, f"&#x{ord(quote):x};") + quote


def css_string(value: str) -> str:
    """``value`` as CSS escapes (it then holds no quote, bracket or "<" whatever it contains)."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\{ord(c) or 0xFFFD:x} " for c in value)


def css_reference(value: str, form: str) -> str:
    escaped = css_string(value)
    return {"dq": f'url("{escaped}")', "sq": f"url('{escaped}')", "bare": f"url({escaped or 'x'})",
            "import": f'@import "{escaped}";'}[form]  # fmt: skip


css_forms = st.sampled_from(["dq", "sq", "bare", "import"])
quotes = st.sampled_from(['"', "'", ""])


@st.composite
def documents(draw: st.DrawFn) -> str:
    parts = []
    for kind in draw(st.lists(st.sampled_from(["style", "svg", "a", "img", "srcset", "attr", "refresh"]),
                              min_size=1, max_size=6)):  # fmt: skip
        url, quote = draw(urls), draw(quotes)
        if kind in ("style", "svg"):
            rule = css_reference(url, draw(css_forms))
            css = rule if rule.startswith("@") else f"a {{ background: {rule} }}"
            parts.append(f"<svg><style>{css}</style></svg>" if kind == "svg" else f"<style>{css}</style>")
        elif kind == "a":
            parts.append(f"<a href={html_attribute(url, quote)}>link</a>")
        elif kind == "img":
            parts.append(f"<img src={html_attribute(url, quote)} alt=x>")
        elif kind == "srcset":
            parts.append(f"<img srcset={html_attribute(url + ' 1x, ' + url + ' 2x', quote)}>")
        elif kind == "attr":
            rule = css_reference(url, draw(css_forms.filter(lambda f: f != "import")))
            parts.append(f"<div style={html_attribute('background: ' + rule, quote)}>x</div>")
        else:
            parts.append(f"<meta http-equiv=refresh content={html_attribute('0; url=' + url, quote)}>")
    return "<!DOCTYPE html><html><head><title>t</title></head><body>" + "".join(parts) + "</body></html>"


def css_shape(tokens: list) -> list:
    """The token structure of CSS: types, names and nesting; the values of URLs and strings left out."""
    shape: list = []
    for token in tokens:
        if token.type in ("url", "string", "whitespace", "comment"):
            shape.append(token.type)
        elif token.type == "function":
            shape.append(("function", token.lower_name, css_shape(token.arguments)))
        elif token.type.endswith("block"):
            shape.append((token.type, css_shape(token.content)))
        elif token.type == "error":
            shape.append(("error", token.kind))
        else:
            shape.append((token.type, token.serialize()))
    return shape


def html_shape(text: str) -> tuple[list, list]:
    """Every node of the tree (tag and attribute names), and the CSS structure of every <style>
    element and style attribute, in document order."""
    tree = LexborHTMLParser(text)
    nodes, styles = [], []
    for node in tree.root.traverse(include_text=True):
        nodes.append((node.tag, tuple(node.attributes)))
        if node.tag == "style":
            styles.append(css_shape(tinycss2.parse_component_value_list(node.text(deep=True))))
        if "style" in node.attributes:
            styles.append(css_shape(tinycss2.parse_component_value_list(node.attributes["style"] or "")))
    return nodes, styles


@given(documents())
@settings(max_examples=examples(300), deadline=None)
@example('<!DOCTYPE html><html><head><title>t</title></head><body><style>a { background: url("?http://a.b/'
         '\\3c/style\\3e\\3cscript\\3e alert(1)\\3c/script\\3e") }</style></body></html>')  # fmt: skip
@example("<style>a { background: url('x.png#\\3c/style\\3e\\3cscript\\3e alert(1)\\3c/script\\3e') }</style>")
def test_rewritten_html_has_the_structure_of_the_archived_html(document: str) -> None:
    out = rewrite_html_text(document, url=DOC, timestamp=TS, prefix="")
    assert html_shape(out) == html_shape(document)


@given(st.lists(st.tuples(urls, css_forms), min_size=1, max_size=5))
@settings(max_examples=examples(300), deadline=None)
def test_rewritten_css_has_the_structure_of_the_archived_css(references: list[tuple[str, str]]) -> None:
    sheet = "\n".join(
        rule if rule.startswith("@") else f"p{n} {{ background: {rule} }}"
        for n, rule in enumerate(css_reference(url, form) for url, form in references)
    )
    out = rewrite_css(sheet.encode(), url="http://example.org/s/site.css", timestamp=TS, prefix="").decode()
    assert css_shape(tinycss2.parse_component_value_list(out)) == css_shape(
        tinycss2.parse_component_value_list(sheet)
    )
