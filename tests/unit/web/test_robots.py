"""Tests for archiver.web.robots: RFC 9309 parsing and matching, status policy, limits."""

import random
import time

import pytest

from archiver.web.robots import (
    MAX_ROBOTS_BYTES,
    MAX_ROBOTS_REDIRECTS,
    RobotsRules,
    RuleLine,
    deciding_rule,
    parse_robots,
    rules_for_status,
    unreachable,
)

AGENT = "archiver"


def rules(text: str | bytes, agent: str = AGENT) -> RobotsRules:
    return parse_robots(text.encode() if isinstance(text, str) else text, agent)


def check(robots: RobotsRules, allowed: list[str], disallowed: list[str]) -> None:
    assert [p for p in allowed if not robots.allowed(p)] == []
    assert [p for p in disallowed if robots.allowed(p)] == []


# RFC 9309 §5.1, verbatim.
RFC_SIMPLE = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""


def test_constants() -> None:
    assert MAX_ROBOTS_BYTES == 500 * 1024
    assert MAX_ROBOTS_REDIRECTS == 5


def test_rfc_simple_example_foobot() -> None:
    check(
        rules(RFC_SIMPLE, "foobot"),
        allowed=["/example/page.html", "/example/allowed.gif", "/robots.txt"],
        disallowed=["/", "/example/", "/publications/", "/example/page.htm", "/a.gif"],
    )


@pytest.mark.parametrize("agent", ["barbot", "bazbot"])
def test_rfc_simple_example_barbot_bazbot(agent: str) -> None:
    check(
        rules(RFC_SIMPLE, agent),
        allowed=["/", "/example/", "/example/other.html", "/a.gif"],
        disallowed=["/example/page.html", "/example/page.html?x=1"],
    )


def test_rfc_simple_example_empty_group_allows_all() -> None:
    check(rules(RFC_SIMPLE, "quxbot"), allowed=["/", "/example/", "/a.gif"], disallowed=[])


def test_rfc_simple_example_other_crawlers_get_star_group() -> None:
    check(
        rules(RFC_SIMPLE),
        # "/publications/" is longer than "*.gif$", so it wins for "/publications/a.gif".
        allowed=["/", "/publications/", "/publications/a.gif", "/a.gif?x", "/a.gifs"],
        disallowed=["/example/", "/example/page.html", "/a.gif", "/x/a.gif"],
    )


def test_rfc_longest_match_example() -> None:
    robots = rules(
        "User-Agent: archiver\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    )
    check(
        robots,
        allowed=["/example/page/", "/example/page/ok.gif", "/other"],
        disallowed=["/example/page/disallowed.gif", "/example/page/disallowed.gif?v=2"],
    )


def test_rfc_group_example() -> None:
    text = (
        "user-agent: a\ndisallow: /c\n\nuser-agent: b\ndisallow: /d\n\n"
        "user-agent: e\nuser-agent: f\ndisallow: /g\n\nuser-agent: h\n"
    )
    check(rules(text, "a"), allowed=["/d", "/g"], disallowed=["/c"])
    check(rules(text, "b"), allowed=["/c", "/g"], disallowed=["/d"])
    for agent in ("e", "f"):
        check(rules(text, agent), allowed=["/c", "/d"], disallowed=["/g"])
    check(rules(text, "h"), allowed=["/c", "/d", "/g"], disallowed=[])
    check(rules(text, "z"), allowed=["/c", "/d", "/g"], disallowed=[])


def test_groups_for_the_same_agent_are_merged() -> None:
    text = (
        "user-agent: archiver\ndisallow: /foo\ndisallow: /bar\n\n"
        "user-agent: other\ndisallow: /other\n\n"
        "user-agent: Archiver\ndisallow: /baz\ncrawl-delay: 3\n"
    )
    check(rules(text), allowed=["/other", "/"], disallowed=["/foo", "/bar", "/baz"])
    assert rules(text).crawl_delay == 3.0


def test_star_groups_are_merged_and_used_as_fallback() -> None:
    text = (
        "user-agent: *\ndisallow: /a\n\n"
        "user-agent: other\ndisallow: /b\n\n"
        "user-agent: *\ndisallow: /c\n"
    )
    check(rules(text), allowed=["/b", "/"], disallowed=["/a", "/c"])


def test_own_group_beats_star_group_even_when_empty() -> None:
    text = "user-agent: *\ndisallow: /\n\nuser-agent: archiver\ndisallow:\n"
    check(rules(text), allowed=["/", "/anything"], disallowed=[])


def test_group_naming_star_and_us_applies_once() -> None:
    text = "user-agent: *\nuser-agent: archiver\ndisallow: /x\n"
    check(rules(text), allowed=["/y"], disallowed=["/x"])
    check(rules(text, "other"), allowed=["/y"], disallowed=["/x"])


def test_no_group_allows_all() -> None:
    check(rules("user-agent: other\ndisallow: /\n"), allowed=["/", "/x"], disallowed=[])
    check(rules(""), allowed=["/", "/x"], disallowed=[])


@pytest.mark.parametrize(
    "value", ["archiver", "ARCHIVER", "Archiver", "archiver/1.0", "archiver 2"]
)
def test_product_token_matches(value: str) -> None:
    check(rules(f"user-agent: {value}\ndisallow: /\n"), allowed=[], disallowed=["/x"])


@pytest.mark.parametrize("value", ["archiverbot", "archiver-bot", "my-archiver", "archive", "*bot"])
def test_other_product_tokens_do_not_match(value: str) -> None:
    check(rules(f"user-agent: {value}\ndisallow: /\n"), allowed=["/x"], disallowed=[])


def test_our_agent_string_is_reduced_to_its_product_token() -> None:
    text = "user-agent: archiver\ndisallow: /x\n"
    check(rules(text, "Archiver/0.1"), allowed=["/y"], disallowed=["/x"])


def test_allow_wins_a_tie() -> None:
    check(rules("user-agent: *\ndisallow: /page\nallow: /page\n"), ["/page", "/page2"], [])
    check(rules("user-agent: *\nallow: /folder\ndisallow: /folder\n"), ["/folder/page"], [])
    # "/page" and "/*.ph" are both five octets long.
    check(rules("user-agent: *\nallow: /page\ndisallow: /*.ph\n"), ["/page.php5"], ["/x.php"])
    check(rules("user-agent: *\ndisallow: /page\nallow: /*age\n"), ["/page", "/pager"], [])
    check(rules("user-agent: *\ndisallow: /*ge\nallow: /*ag\n"), ["/page"], ["/ge"])


def test_longest_match_regardless_of_order() -> None:
    check(rules("user-agent: *\ndisallow: /\nallow: /p\n"), ["/page"], ["/other"])
    check(rules("user-agent: *\nallow: /page\ndisallow: /*.htm\n"), ["/page"], ["/page.htm"])
    check(rules("user-agent: *\nallow: /$\ndisallow: /\n"), ["/"], ["/page.htm", "/?q"])


def test_wildcards() -> None:
    check(
        rules("user-agent: *\ndisallow: /fish*\n"),
        allowed=["/Fish.asp", "/catfish", "/?id=fish"],
        disallowed=["/fish", "/fish.html", "/fishheads/yummy.html", "/fish.php?id=anything"],
    )
    check(
        rules("user-agent: *\ndisallow: /*.php\n"),
        allowed=["/", "/windows.PHP"],
        disallowed=["/index.php", "/filename.php", "/folder/filename.php?p", "/a.php.file.html"],
    )
    check(
        rules("user-agent: *\ndisallow: /*.php$\n"),
        allowed=["/filename.php?parameters", "/filename.php/", "/filename.php5"],
        disallowed=["/filename.php", "/folder/filename.php"],
    )
    check(
        rules("user-agent: *\ndisallow: /fish*.php\n"),
        allowed=["/Fish.PHP", "/fis.php"],
        disallowed=["/fish.php", "/fishheads/catfish.php?parameters"],
    )
    check(
        rules("user-agent: *\ndisallow: /a**b*c$\n"),
        allowed=["/abcd", "/acb", "/a/c"],
        disallowed=["/abc", "/a-b-c", "/abbcc", "/a/b/c"],
    )
    # A segment after a "*" must follow what came before it, never overlap it.
    check(rules("user-agent: *\ndisallow: /x*x\n"), ["/x", "/x/"], ["/xx", "/x/x/"])
    check(rules("user-agent: *\ndisallow: /ab*b$\n"), ["/ab", "/abc"], ["/abb", "/ab/b"])
    check(rules("user-agent: *\ndisallow: /a*b*a\n"), ["/ab", "/aab"], ["/aba", "/a/b/a/"])


def test_anchor_only_at_the_end_and_escaped_specials_are_literal() -> None:
    check(rules("user-agent: *\ndisallow: /a$b\n"), ["/a", "/ab"], ["/a$b", "/a%24b", "/a$bc"])
    # RFC 9309 §2.2.3 examples.
    check(
        rules("user-agent: *\ndisallow: /path/file-with-a-%2A.html\n"),
        allowed=["/path/file-with-a-x.html", "/path/file-with-a-.html"],
        disallowed=["/path/file-with-a-*.html", "/path/file-with-a-%2A.html"],
    )
    check(rules("user-agent: *\ndisallow: /path/foo-%24\n"), ["/path/foo-"], ["/path/foo-$"])


def test_pathological_wildcards_stay_fast() -> None:
    robots = rules("user-agent: *\ndisallow: /" + "*a" * 30 + "*b\n")
    path = "/" + "a" * 5000
    start = time.perf_counter()
    assert robots.allowed(path)
    assert not robots.allowed(path + "b")
    assert time.perf_counter() - start < 0.5


def test_empty_rules() -> None:
    check(rules("user-agent: *\ndisallow:\n"), ["/", "/x"], [])
    check(rules("user-agent: *\nallow:\ndisallow: /x\n"), ["/y"], ["/x"])


def test_robots_txt_is_always_allowed() -> None:
    robots = rules("user-agent: *\ndisallow: /\ndisallow: /robots.txt$\n")
    check(robots, allowed=["/robots.txt"], disallowed=["/", "/robots.txt?x", "/robots.txt2"])


def test_rule_without_leading_slash() -> None:
    check(rules("user-agent: *\ndisallow: private/\n"), ["/public/"], ["/private/x"])


# RFC 9309 §2.2.2 percent-encoding table, each rule tried against both spellings of the URL.
@pytest.mark.parametrize(
    ("rule", "urls"),
    [
        ("/foo/bar?baz=quz", ["/foo/bar?baz=quz"]),
        (
            "/foo/bar?baz=https://foo.bar",
            ["/foo/bar?baz=https%3A%2F%2Ffoo.bar", "/foo/bar?baz=https://foo.bar"],
        ),
        (
            "/foo/bar?baz=https%3A%2F%2Ffoo.bar",
            ["/foo/bar?baz=https%3A%2F%2Ffoo.bar", "/foo/bar?baz=https://foo.bar"],
        ),
        ("/foo/bar/ツ", ["/foo/bar/%E3%83%84", "/foo/bar/%e3%83%84", "/foo/bar/ツ"]),
        ("/foo/bar/%E3%83%84", ["/foo/bar/%E3%83%84", "/foo/bar/%e3%83%84", "/foo/bar/ツ"]),
        ("/foo/bar/%62%61%7A", ["/foo/bar/baz", "/foo/bar/%62%61%7A", "/foo/bar/%62az"]),
        ("/foo/bar/baz", ["/foo/bar/baz", "/foo/bar/%62%61%7A"]),
        ("/a b", ["/a%20b", "/a b"]),
        ("/100%", ["/100%25", "/100%"]),
        ("/%zz", ["/%25zz"]),
    ],
)
def test_percent_encoding_is_normalised_on_both_sides(rule: str, urls: list[str]) -> None:
    robots = rules(f"user-agent: *\ndisallow: {rule}\n")
    check(robots, allowed=["/foo/bar/", "/other", "/100"], disallowed=urls)


def test_non_utf8_octets_in_the_file() -> None:
    robots = rules(b"user-agent: *\ndisallow: /caf\xe9\n")
    check(robots, allowed=["/caf", "/caf%C3%A9"], disallowed=["/caf%E9", "/caf%e9/x"])


def test_priority_counts_octets_not_escapes() -> None:
    # "/%61%62" is the three octets "/ab": a tie with "/ab", which Allow wins.
    check(rules("user-agent: *\ndisallow: /ab\nallow: /%61%62\n"), ["/ab"], [])
    check(rules("user-agent: *\nallow: /%61%62\ndisallow: /abc\n"), ["/ab"], ["/abc"])


def test_keys_are_case_insensitive_and_whitespace_tolerated() -> None:
    text = "uSeR-aGeNt :  ARCHIVER  \n\t DISALLOW\t:\t/a \t\nAlLoW:/a/b\n  disallow  :  /c d  \n"
    check(rules(text), allowed=["/a/b", "/b", "/c"], disallowed=["/a", "/a/c", "/c%20d"])


def test_comments() -> None:
    text = "# header\nuser-agent: archiver # us\ndisallow: /a # not /b\n#disallow: /c\n"
    check(rules(text), allowed=["/b", "/c", "/"], disallowed=["/a", "/a#"])


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_endings(eol: str) -> None:
    text = eol.join(["user-agent: archiver", "disallow: /a", "", "user-agent: *", "disallow: /"])
    check(rules(text), allowed=["/b"], disallowed=["/a"])
    check(rules(text, "other"), allowed=[], disallowed=["/b"])


def test_byte_order_mark() -> None:
    check(rules(b"\xef\xbb\xbfuser-agent: *\ndisallow: /a\n"), ["/b"], ["/a"])


def test_lines_without_colon_are_ignored() -> None:
    text = "user-agent: *\ndisallow /a\nallow /b\ndisallow: /c\n"
    check(rules(text), allowed=["/a", "/b"], disallowed=["/c"])


def test_frequent_typos() -> None:
    text = "useragent: archiver\ndissallow: /a\ndisalow: /b\nalow: /a/ok\n"
    check(rules(text), allowed=["/c"], disallowed=["/a", "/b", "/a/ok"])
    check(rules("user agent: archiver\ndisallow: /a\n"), ["/b"], ["/a"])


def test_rules_before_any_user_agent_are_ignored() -> None:
    text = "disallow: /a\ncrawl-delay: 9\nuser-agent: *\ndisallow: /b\n"
    robots = rules(text)
    check(robots, allowed=["/a"], disallowed=["/b"])
    assert robots.crawl_delay is None


def test_blank_lines_sitemaps_and_unknown_keys_do_not_split_a_group() -> None:
    text = (
        "user-agent: other\n\nsitemap: https://example.org/s.xml\nfoo: bar\n"
        "user-agent: archiver\n\ndisallow: /a\n\nuser-agent: third\ndisallow: /b\n"
    )
    check(rules(text, "other"), allowed=["/b"], disallowed=["/a"])
    check(rules(text), allowed=["/b"], disallowed=["/a"])
    check(rules(text, "third"), allowed=["/a"], disallowed=["/b"])


def test_binary_garbage_does_not_raise() -> None:
    rng = random.Random(9309)
    paths = ["/", "/a", "/%FF", "/ツ", "/robots.txt"]
    for size in (1, 10, 100, 1000, 10000):
        for _ in range(20):
            blob = rng.randbytes(size)
            for prefix in (b"", b"user-agent: *\ndisallow: "):
                robots = parse_robots(prefix + blob, AGENT)
                assert all(isinstance(robots.allowed(p), bool) for p in paths)
                assert robots.allowed("/robots.txt")
    robots = rules(b"user-agent: *\n\x00\ndisallow: /\x00\xff\x80\ndisallow: /b\x7f\n")
    check(robots, allowed=["/", "/a"], disallowed=["/%00%FF%80", "/b%7F"])


def _pad_to(head: bytes, size: int) -> bytes:
    """`head` followed by comment lines making exactly `size` bytes."""
    filler = size - len(head)
    padded = head + b"# padding\n" * ((filler - 1) // 10)
    padded += b"#" * (size - len(padded) - 1) + b"\n"
    assert len(padded) == size
    return padded


def test_content_beyond_the_limit_is_ignored() -> None:
    head = b"user-agent: *\ndisallow: /a\n"
    body = _pad_to(head, MAX_ROBOTS_BYTES)
    assert len(body) == MAX_ROBOTS_BYTES
    robots = parse_robots(body + b"disallow: /b\n", AGENT)
    check(robots, allowed=["/b"], disallowed=["/a"])
    # A rule ending exactly at the limit still counts, even when more follows.
    body = _pad_to(head, MAX_ROBOTS_BYTES - len(b"disallow: /c"))
    robots = parse_robots(body + b"disallow: /c\ndisallow: /d\n", AGENT)
    check(robots, allowed=["/d"], disallowed=["/a", "/c"])


def test_line_cut_by_the_limit_is_dropped() -> None:
    head = b"user-agent: *\ndisallow: /a\n"
    body = _pad_to(head, MAX_ROBOTS_BYTES - len(b"disallow: /s"))
    robots = parse_robots(body + b"disallow: /secret\n", AGENT)
    check(robots, allowed=["/s", "/sa", "/secret"], disallowed=["/a"])
    # A body of exactly the limit may have been capped by its reader: its last line must end.
    body = _pad_to(head, MAX_ROBOTS_BYTES - len(b"disallow: /t"))
    check(parse_robots(body + b"disallow: /t", AGENT), allowed=["/t"], disallowed=["/a"])
    body = _pad_to(head, MAX_ROBOTS_BYTES - len(b"disallow: /t\n"))
    check(parse_robots(body + b"disallow: /t\n", AGENT), allowed=["/s"], disallowed=["/t"])
    # The same file within the limit keeps the rule.
    robots = parse_robots(_pad_to(head, 1000) + b"disallow: /secret\n", AGENT)
    check(robots, allowed=["/s"], disallowed=["/a", "/secret"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2.5", 2.5), ("10", 10.0), (" 0 ", 0.0), (".5", 0.5), ("3.", 3.0)]
    + [(bad, None) for bad in ("-1", "abc", "", "1,5", "nan", "inf", "1e3", "9" * 400, "1 s")],
)
def test_crawl_delay(value: str, expected: float | None) -> None:
    assert rules(f"user-agent: archiver\ncrawl-delay: {value}\n").crawl_delay == expected


def test_crawl_delay_comes_from_the_chosen_group() -> None:
    text = "user-agent: *\ncrawl-delay: 20\n\nuser-agent: archiver\ndisallow: /x\n"
    assert rules(text).crawl_delay is None
    assert rules(text, "other").crawl_delay == 20.0
    text += "crawl-delay: 1\n\nuser-agent: archiver\ncrawl-delay: 4\ncrawl-delay: bad\n"
    assert rules(text).crawl_delay == 4.0


def test_sitemaps_anywhere_in_order_without_duplicates() -> None:
    text = (
        "Sitemap: https://example.org/a.xml\nuser-agent: other\ndisallow: /\n"
        "sitemap: https://example.org/b.xml # second\nSITEMAP:https://example.org/a.xml\n"
        "sitemap:\nsite-map: https://example.org/c.xml\n"
    )
    assert rules(text).sitemaps == [
        "https://example.org/a.xml",
        "https://example.org/b.xml",
        "https://example.org/c.xml",
    ]
    assert rules("user-agent: *\n").sitemaps == []


def test_allow_all_and_disallow_all() -> None:
    everything = RobotsRules.allow_all()
    check(everything, allowed=["/", "/a", "/robots.txt"], disallowed=[])
    nothing = RobotsRules.disallow_all()
    check(nothing, allowed=["/robots.txt"], disallowed=["/", "/a", "/%FF", "/?q"])
    for robots in (everything, nothing):
        assert robots.crawl_delay is None
        assert robots.sitemaps == []


def test_rules_for_status() -> None:
    body = b"user-agent: *\ndisallow: /a\ncrawl-delay: 2\n"
    robots = rules_for_status(200, body, AGENT)
    check(robots, allowed=["/b"], disallowed=["/a"])
    assert robots.crawl_delay == 2.0
    check(rules_for_status(204, b"", AGENT), allowed=["/a"], disallowed=[])
    for status in (301, 302, 308, 400, 401, 403, 404, 410, 451):
        check(rules_for_status(status, body, AGENT), allowed=["/", "/a"], disallowed=[])
    for status in (429, 500, 502, 503, 504, 599, 100, 600):
        check(rules_for_status(status, body, AGENT), allowed=["/robots.txt"], disallowed=["/"])


def test_unreachable_disallows_all() -> None:
    check(unreachable(), allowed=["/robots.txt"], disallowed=["/", "/a"])


def test_many_rules_across_buckets() -> None:
    words = [f"{chr(c)}{i}" for c in range(ord("a"), ord("z") + 1) for i in range(40)]
    text = "user-agent: *\n" + "".join(f"disallow: /{w}/\nallow: /{w}/ok\n" for w in words)
    text += "disallow: /*.tmp$\nallow: /$\ndisallow: /\n"
    robots = rules(text)
    check(
        robots,
        allowed=["/", "/a0/ok", "/z39/ok/x", "/m7/ok"],
        disallowed=["/a0/", "/z39/x", "/m7/okay.tmp", "/q", "/1", "/%FF", "/Z"],
    )
    assert sum(robots.allowed(f"/{w}/ok") for w in words) == len(words)
    assert sum(robots.allowed(f"/{w}/no") for w in words) == 0


def test_the_deciding_rule_is_the_longest_match_with_allow_winning_ties() -> None:
    body = (b"\xef\xbb\xbfUser-agent: *\n"
            b"Disallow: /private   # staff only\n"
            b"Allow: /private/press\n"
            b"Disallow: /*.pdf$\n"
            b"Allow: /p*\n"
            b"User-agent: otherbot\n"
            b"Disallow: /\n")
    private = deciding_rule(body, "archiver", "/private/notes")
    assert private == RuleLine(2, "Disallow: /private   # staff only", allow=False)
    assert deciding_rule(body, "archiver", "/private/press/1") == RuleLine(
        3, "Allow: /private/press", allow=True)
    assert deciding_rule(body, "archiver", "/a.pdf") == RuleLine(
        4, "Disallow: /*.pdf$", allow=False)
    assert deciding_rule(body, "archiver", "/public") == RuleLine(5, "Allow: /p*", allow=True)
    assert deciding_rule(body, "archiver", "/x") is None
    assert deciding_rule(body, "otherbot", "/x") == RuleLine(
        7, "Disallow: /", allow=False)
    assert deciding_rule(body, "archiver", "/robots.txt") is None
