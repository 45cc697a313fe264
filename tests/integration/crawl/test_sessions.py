"""Sessions and gatekeepers (issue 41), crawled on the loopback web of tests/support/sessionweb.py.

One test per bullet of the issue's tests: a site that redirects until its cookie comes back; a
cookie for a public suffix refused; Basic, Digest and form logins with the password absent from
every log line, WARC record, status output and error; a session that expires after N pages
pauses the site and ``site resume`` finishes it (and a login that fails does the same); pages
reachable only from a nested gzip sitemap index; challenges on every second request kept,
labelled and never replayed, and a site answering only challenges backing off. Each crawl runs in
this process with the fast rests of tests/support/crawls.py, logging at debug into ``caplog``.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import trio
from warcio.archiveiterator import ArchiveIterator

from archiver.config import Config, ConfigError
from archiver.crawl.crawler import Crawler, enqueue_seeds
from archiver.logs import LogfmtFormatter
from archiver.store.embedded.catalog import Catalog
from archiver.store.models import Capture
from tests.support.crawls import load, warc_files, write_config
from tests.support.rawhttp import get
from tests.support.replayarchive import serving
from tests.support.repo import archiver_here_text
from tests.support.sessionweb import (
    BASIC,
    BASIC_PASSWORD,
    BASIC_USER,
    COOKIE_PAGES,
    COOKIES,
    DEFAULT_SITEMAP_PAGE,
    DIGEST,
    DIGEST_PASSWORD,
    DIGEST_USER,
    ELSEWHERE,
    FORM_PASSWORD,
    FORM_USER,
    FORMS,
    GATED,
    GATED_PAGES,
    LOGGED_IN,
    OTHER,
    PSL_SHOPS,
    REALM,
    SITEMAP_PAGES,
    SITEMAPS,
    SessionWeb,
    session_web,
)

GUARD = 120  # seconds: a crawl that never ends fails the test instead of hanging it
# A back-off that starts small and clears fast (as tests/integration/crawl/test_rate_limits.py).
GENTLE = {"backoff_start": 0.05, "max_backoff": 1.0, "backoff_recovery_fetches": 8}
LOGIN_FORM = b'action="/session"'  # in the login page only
CHALLENGE_MARKS = (b"window._cf_chl_opt", b"Attention Required! | Cloudflare", b"Just a moment...")


# -- running a crawl, reading what it left -----------------------------------------------------


class Run:
    """One crawl of the session web: its config, and the log lines it wrote (logfmt)."""

    def __init__(self, tmp_path: Path, web: SessionWeb, *, sheets: str = "",
                 credentials: dict[str, tuple[str, str]] | None = None, **crawl: object) -> None:
        if credentials is not None:
            write_credentials(tmp_path / "credentials.toml", credentials)
            crawl["credentials_file"] = "credentials.toml"
        path = write_config(tmp_path, web, **{**GENTLE, **crawl})
        path.write_text(path.read_text() + sheets)
        self.path = path
        self.config: Config = load(path)
        self.log_lines: list[str] = []

    async def crawl(self, seeds: list[str], caplog: pytest.LogCaptureFixture, *,
                    recrawl: bool = False) -> None:
        """Crawl until idle (a paused site counts as idle), keeping every log line. The config
        is read again, as a crawler started anew reads it (the credentials file too)."""
        self.config = load(self.path)
        enqueue_seeds(self.config, 0, seeds, recrawl=recrawl)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="archiver"), trio.fail_after(GUARD):
            await Crawler(self.config, until_idle=True).run()
        formatter = LogfmtFormatter()
        self.log_lines += [formatter.format(record) for record in caplog.records]

    def cli(self, *args: str, expect: int | None = 0) -> str:
        """``archiver ARGS --config FILE`` in this process: what it printed (both streams),
        having checked its exit status (unless ``expect`` is None) and that no traceback shows."""
        done = archiver_here_text(*args, "--config", str(self.path))
        assert expect is None or done.returncode == expect, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        return done.stdout + done.stderr

    def catalog(self) -> list[Capture]:
        with Catalog(self.config.root / "catalog", self.config.catalog.shards,
                     readonly=True) as catalog:
            return list(catalog.iter_all())

    def site_rows(self) -> dict[str, dict]:
        """``status --sites --json``, by origin."""
        printed = archiver_here_text("status", "--sites", "--json", "--config", str(self.path))
        assert printed.returncode == 0, printed.stderr
        return {row["origin"]: row for row in map(json.loads, printed.stdout.splitlines())}


def write_credentials(path: Path, tables: dict[str, tuple[str, str]], mode: int = 0o600) -> None:
    path.write_text("".join(f'[{name}]\nusername = "{user}"\npassword = "{password}"\n'
                            for name, (user, password) in tables.items()))
    path.chmod(mode)


def sheet(host: str, **keys: object) -> str:
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
    return f'\n[[sheets]]\nmatch = ["host:{host}"]\n{lines}'


def by_url(captures: list[Capture], origin: str) -> dict[str, list[Capture]]:
    found: dict[str, list[Capture]] = {}
    for capture in captures:
        if capture.url.startswith(origin + "/"):
            found.setdefault(capture.url, []).append(capture)
    return found


def content(captures: list[Capture]) -> list[Capture]:
    """The captures replay may show as a page: no gatekeeper, login or lost-session label."""
    return [c for c in captures
            if not {"gatekeeper", "login", "session-lost"} & set(c.label_map)]


def warc_payloads(root: Path) -> Iterator[tuple[str, str, bytes]]:
    """(record type, target URI, bytes as stored) of every record of every WARC file."""
    for path in warc_files(root):
        with path.open("rb") as f:
            for record in ArchiveIterator(f, no_record_parse=True):  # the whole block
                yield (record.rec_type, record.rec_headers.get_header("WARC-Target-URI") or "",
                       record.raw_stream.read())


def stored_files(directory: Path) -> Iterator[tuple[Path, bytes]]:
    """Every file under ``directory``, gzip files uncompressed (WARC bundles, sitemaps)."""
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        yield path, gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def secret_forms(user: str, password: str, *, realm: str | None = None) -> set[bytes]:
    """What would give ``password`` away: as given, percent-encoded (both ways a form body may
    be), in a Basic header, and (Digest) the password-equivalent HA1."""
    forms = {password, quote(password, safe=""), quote_plus(password),
             base64.b64encode(f"{user}:{password}".encode()).decode()}
    if realm is not None:
        forms.add(hashlib.md5(f"{user}:{realm}:{password}".encode()).hexdigest())
    return {form.encode() for form in forms}


def assert_secret_absent(forms: set[bytes], run: Run, texts: list[str], root: Path) -> None:
    """No form of the secret in any log line, CLI output or error, WARC record or archive file
    (the credentials file aside); and there was something to search in each."""
    assert any("event=fetched" in line for line in run.log_lines) and texts
    for number, line in enumerate(run.log_lines):
        assert not any(form in line.encode() for form in forms), f"log line {number}: {line}"
    for number, text in enumerate(texts):
        assert not any(form in text.encode() for form in forms), f"output {number}"
    records = list(warc_payloads(root))
    assert records
    for rec_type, uri, data in records:
        assert not any(form in data for form in forms), f"{rec_type} record of {uri}"
    for path, data in stored_files(root):
        assert not any(form in data for form in forms), str(path)


async def replayed(content_at: str, url: str, at: str = "2100") -> tuple[int, bytes]:
    """What replay shows for ``url`` near ``at``: status and body, its redirect to the chosen
    capture followed."""
    status, headers, body = await get(content_at, f"/web/{at}id_/{url}")
    if status == 302:
        status, _, body = await get(content_at, headers["location"].removeprefix(content_at))
    return status, body


# -- cookies ---------------------------------------------------------------------------------


async def test_a_site_redirecting_until_its_cookie_returns_is_captured_whole(tmp_path, caplog):
    async with session_web() as web:
        run = Run(tmp_path, web)  # crawl.cookies is on by default
        await run.crawl([web.origin(COOKIES) + "/", web.origin(OTHER) + "/"], caplog)
        first_visit = len(web.to(COOKIES))
        # The next visit starts with the jar the last one kept in the site's state.
        await run.crawl([web.origin(COOKIES) + "/"], caplog, recrawl=True)
        again = [r for r in web.to(COOKIES)[first_visit:] if r.target != "/robots.txt"]
        assert again and all("visitor" in r.cookies() for r in again)
    pages = [web.origin(COOKIES) + p
             for p in ["/", *(f"/page{n}.html" for n in range(1, COOKIE_PAGES + 1))]]
    found = by_url(run.catalog(), web.origin(COOKIES))
    for url in pages:
        assert any(c.status == 200 for c in found.get(url, [])), url
    # One visitor cookie issued and kept, across both visits: every later request carried it.
    assert len(web.visitors) == 1
    page_requests = [r for r in web.to(COOKIES) if r.target != "/robots.txt"]
    assert all("visitor" in r.cookies() for r in page_requests[1:])
    # other.test was crawled (seeded, and linked) and never got a cookie of cookies.test.
    assert web.to(OTHER)
    assert [r for r in web.to(OTHER) if r.header("Cookie") is not None] == []


async def test_a_cookie_set_for_a_public_suffix_is_refused(tmp_path, caplog):
    shops = list(PSL_SHOPS)
    siblings = [sibling for _, sibling in PSL_SHOPS.values()]
    async with session_web() as web:
        run = Run(tmp_path, web)
        await run.crawl([web.origin(host) + "/" for host in shops + siblings], caplog)
    for shop in shops:
        # The control: the shop's own cookie came back to it (the jar works)...
        basket = [r for r in web.to(shop) if r.target == "/basket.html"]
        assert basket and all(r.cookies().get("basket") == "1" for r in basket), shop
    for host in shops + siblings:
        requests = web.to(host)
        assert any(r.target == "/" and r.status == 200 for r in requests), host
        # ... and the suffix's went neither to the sibling nor back to the shop that set it.
        assert [r.target for r in requests if "tracker" in r.cookies()] == [], host
    for sibling in siblings:
        assert [r.target for r in web.to(sibling) if r.header("Cookie") is not None] == []
    assert any("event=cookie-refused" in line and "tracker: public-suffix" in line
               for line in run.log_lines)


# -- logins ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["basic", "digest"])
async def test_a_members_area_behind_http_authentication_is_captured_without_its_password(
        tmp_path, caplog, scheme):
    host, user, password = ((BASIC, BASIC_USER, BASIC_PASSWORD) if scheme == "basic"
                            else (DIGEST, DIGEST_USER, DIGEST_PASSWORD))
    async with session_web() as web:
        run = Run(tmp_path, web, credentials={"members": (user, password)},
                  sheets=sheet(host, login=scheme, credentials="members"))
        await run.crawl([web.origin(host) + "/"], caplog)
        captured = run.catalog()
        texts = [run.cli("status"), run.cli("status", "--json"), run.cli("status", "--sites"),
                 run.cli("status", "--sites", "--json"),
                 run.cli("why", web.origin(host) + "/members/p2.html", expect=None)]
        async with serving(run.config) as replay:
            for url in web.member_urls(host):
                status, body = await replayed(replay.content_at, url)
                assert status == 200 and b"member page" in body, url
    found = by_url(captured, web.origin(host))
    for url in web.member_urls(host):
        assert any(c.status == 200 for c in found.get(url, [])), url
        assert all("session" in c.label_map for c in found[url] if c.status == 200), url
    # The Authorization headers are recorded, with the secret replaced.
    authorized = [data for rec_type, uri, data in warc_payloads(run.config.root)
                  if rec_type == "request" and b"\r\nauthorization: " in data.lower()]
    assert authorized
    realm = REALM if scheme == "digest" else None
    assert_secret_absent(secret_forms(user, password, realm=realm), run, texts, run.config.root)


FORM_SHEET = dict(login="form", credentials="archive", login_url="/login", username_field="user",
                  password_field="pass", login_success=LOGGED_IN, logged_in=LOGGED_IN,
                  logged_out_url="/login", session_scope=[r"re:http://forms\.test:\d+/members/.*"])


def form_run(tmp_path: Path, web: SessionWeb, password: str = FORM_PASSWORD, *,
             login_url: str = "", browser: bool = False) -> Run:
    """A crawl of forms.test logging in with a form (at ``login_url``, a path; /login as a
    whole URL by default), scripted in the browser if ``browser``."""
    keys: dict[str, object] = {**FORM_SHEET, "login_url": login_url or web.origin(FORMS) + "/login"}
    if browser:
        keys["capture"] = "browser"
    return Run(tmp_path, web, credentials={"archive": (FORM_USER, password)},
               sheets=sheet(FORMS, **keys) + (
                   "[browser]\nquiet = 0.1\nembed_rest = 0.05\npage_timeout = 20.0\n"
                   if browser else ""))


async def test_a_form_login_captures_the_members_area_without_its_password(tmp_path, caplog):
    async with session_web() as web:
        run = form_run(tmp_path, web)
        await run.crawl([web.origin(FORMS) + "/members/"], caplog)
        captured = run.catalog()
        texts = [run.cli("status", "--json"), run.cli("status", "--sites", "--json"),
                 run.cli("why", web.origin(FORMS) + "/members/p3.html", expect=None)]
        async with serving(run.config) as replay:
            for url in web.member_urls(FORMS):
                status, body = await replayed(replay.content_at, url)
                assert status == 200 and LOGGED_IN.encode() in body, url
            # The login exchange is recorded but not replayed as content.
            status, body = await replayed(replay.content_at, web.origin(FORMS) + "/login")
            assert status != 200 or LOGIN_FORM not in body
    assert [r.target for r in web.to(FORMS) if r.method == "POST"] == ["/session"]  # one login
    found = by_url(captured, web.origin(FORMS))
    sessions = set()
    for url in web.member_urls(FORMS):
        [page] = [c for c in content(found.get(url, [])) if c.status == 200]
        sessions.add(page.label_map["session"])
    logins = {c.label_map["login"] for c in captured if "login" in c.label_map}
    assert len(sessions) == 1 and logins == sessions  # one id for the login and its session
    # The login POST is in the WARC, its password field replaced.
    [posted] = [data for rec_type, uri, data in warc_payloads(run.config.root)
                if rec_type == "request" and data.startswith(b"POST /session ")]
    assert b"user=archivist" in posted and b"pass=" in posted
    assert_secret_absent(secret_forms(FORM_USER, FORM_PASSWORD), run, texts, run.config.root)


async def test_a_scripted_browser_login_fills_in_a_form_built_by_a_script(tmp_path, caplog):
    async with session_web() as web:
        origin = web.origin(FORMS)
        run = form_run(tmp_path, web, login_url="/login-js", browser=True)
        await run.crawl([origin + "/members/"], caplog)
        texts = [run.cli("status", "--sites", "--json")]
    # The login page as sent holds no form (a script builds it): only the browser could fill it
    # in, and it did, once.
    [login_page] = [data for rec_type, uri, data in warc_payloads(run.config.root)
                    if rec_type == "response" and uri == origin + "/login-js"]
    assert b"<script>" in login_page and b"<form" not in login_page
    [posted] = [r for r in web.to(FORMS) if r.method == "POST"]
    assert posted.target == "/session"
    pages = {c.url for c in content(run.catalog())
             if c.url.startswith(origin + "/members/") and c.status == 200}
    assert pages == web.member_urls(FORMS)
    # The form's POST went through archiver's client: in the WARC, its password replaced.
    [request] = [data for rec_type, uri, data in warc_payloads(run.config.root)
                 if rec_type == "request" and data.startswith(b"POST /session ")]
    assert b"user=archivist" in request and b"pass=REDACTED" in request
    assert_secret_absent(secret_forms(FORM_USER, FORM_PASSWORD), run, texts, run.config.root)


async def test_a_scripted_login_whose_form_sends_by_get_sends_no_password(tmp_path, caplog):
    async with session_web() as web:
        origin = web.origin(FORMS)
        run = form_run(tmp_path, web, login_url="/login-get", browser=True)
        await run.crawl([origin + "/members/"], caplog)
        row = run.site_rows()[origin]
    assert row["state"] == "paused" and "sends with GET" in row["note"]
    assert [r.target for r in web.to(FORMS) if r.target.startswith("/session")] == []
    assert_secret_absent(secret_forms(FORM_USER, FORM_PASSWORD), run, [json.dumps(row)],
                         run.config.root)


async def test_a_session_expiring_after_n_pages_pauses_the_site_and_resume_finishes_it(
        tmp_path, caplog):
    async with session_web(expire_after=3) as web:
        origin = web.origin(FORMS)
        run = form_run(tmp_path, web)
        await run.crawl([origin + "/members/"], caplog)  # returns: a paused site is idle
        first = run.catalog()
        row = run.site_rows()[origin]
        assert row["state"] == "paused"
        assert row["note"].startswith("session lost: ") and "/members/" in row["note"]
        texts = [run.cli("status", "--sites"), json.dumps(row),
                 run.cli("why", origin + "/members/p5.html", expect=None)]
        # Three members' pages captured as content, then nothing that is a login page or a
        # redirect to it: those are labelled login or session-lost.
        shown = [c for c in content(first) if c.url.startswith(origin + "/members/")]
        # The login's own redirect to /members/ was the first of the 3 pages the session served.
        assert len([c for c in shown if c.status == 200]) == 3 - 1
        assert [c.url for c in shown if c.redirect and "/login" in c.redirect] == []
        login_pages = {uri for rec_type, uri, data in warc_payloads(run.config.root)
                       if rec_type == "response" and LOGIN_FORM in data}
        assert login_pages  # the login exchange is recorded
        assert [c.url for c in content(first) if c.url in login_pages] == []

        web.revive()  # the operator's fix
        texts.append(run.cli("site", "resume", origin))
        await run.crawl([], caplog)
        assert run.site_rows()[origin]["state"] != "paused"
        async with serving(run.config) as replay:
            for url in web.member_urls(FORMS):
                status, body = await replayed(replay.content_at, url)
                assert status == 200 and LOGGED_IN.encode() in body and LOGIN_FORM not in body, url
            lost = [c for c in run.catalog() if "session-lost" in c.label_map]
            for capture in lost:  # replay skips what was fetched after the session was lost
                status, body = await replayed(replay.content_at, capture.url, capture.timestamp)
                assert status != 200 or LOGIN_FORM not in body, capture.url
    # Two logins in all (one per session), each member page fetched whole once as content.
    assert len([r for r in web.to(FORMS) if r.method == "POST"]) == 2
    pages = [c.url for c in content(run.catalog()) if "/members/" in c.url and c.status == 200]
    assert sorted(pages) == sorted(web.member_urls(FORMS))
    texts.append(run.cli("status", "--sites", "--json"))
    assert_secret_absent(secret_forms(FORM_USER, FORM_PASSWORD), run, texts, run.config.root)


async def test_a_login_that_fails_pauses_the_site_until_resumed(tmp_path, caplog):
    async with session_web() as web:
        origin = web.origin(FORMS)
        run = form_run(tmp_path, web, password="not-the-password")
        await run.crawl([origin + "/members/"], caplog)
        row = run.site_rows()[origin]
        assert row["state"] == "paused" and row["note"].startswith("login failed: ")
        assert not [c for c in content(run.catalog()) if "/members/" in c.url and c.status == 200]
        write_credentials(tmp_path / "credentials.toml", {"archive": (FORM_USER, FORM_PASSWORD)})
        texts = [run.cli("site", "resume", origin)]
        await run.crawl([], caplog)
    pages = [c.url for c in content(run.catalog()) if "/members/" in c.url and c.status == 200]
    assert sorted(pages) == sorted(web.member_urls(FORMS))
    texts.append(run.cli("status", "--sites", "--json"))
    for password in (FORM_PASSWORD, "not-the-password"):
        assert_secret_absent(secret_forms(FORM_USER, password), run, texts, run.config.root)


def test_a_credentials_file_others_can_read_is_refused_without_showing_it(tmp_path, monkeypatch):
    path = tmp_path / "credentials.toml"
    write_credentials(path, {"archive": (FORM_USER, FORM_PASSWORD)}, mode=0o644)

    class NoWeb:
        def hosts_file(self) -> str:
            return ""

    config = write_config(tmp_path, NoWeb(), credentials_file="credentials.toml")
    with pytest.raises(ConfigError) as refused:
        load(config)
    assert "credentials.toml" in str(refused.value) and FORM_PASSWORD not in str(refused.value)
    done = archiver_here_text("status", "--config", str(config))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert FORM_PASSWORD not in done.stdout + done.stderr
    # Named by the environment instead: the same rule; once private, accepted.
    monkeypatch.setenv("ARCHIVER_CREDENTIALS_FILE", str(path))
    config.write_text(config.read_text().replace('credentials_file = "credentials.toml"\n', ""))
    with pytest.raises(ConfigError):
        load(config)
    path.chmod(0o600)
    load(config)


# -- sitemaps --------------------------------------------------------------------------------


async def test_pages_reachable_only_from_a_nested_gzip_sitemap_index_are_captured(tmp_path, caplog):
    async with session_web() as web:
        origin = web.origin(SITEMAPS)
        run = Run(tmp_path, web, sheets='\n[scope]\nexclude = ["re:.*/p2\\\\.html"]\n',
                  sitemaps=True)  # the default (tests/support/crawls.py turns it off)
        await run.crawl([origin + "/"], caplog)
        why = archiver_here_text("why", origin + "/p2.html", "--config", str(run.path))
    found = by_url(run.catalog(), origin)
    for path in [*SITEMAP_PAGES, DEFAULT_SITEMAP_PAGE]:
        if path != "/p2.html":
            assert any(c.status == 200 for c in found.get(origin + path, [])), path
    assert origin + "/p2.html" not in found
    # A sitemap may not speak for another host: its stray entry was not crawled as this site's.
    assert web.to(ELSEWHERE) == []
    # Each sitemap fetched once (robots.txt's, and the default /sitemap.xml).
    maps = [r.target for r in web.to(SITEMAPS) if r.target.startswith(("/sitemap", "/maps/"))]
    assert sorted(maps) == sorted(["/sitemap_index.xml.gz", "/maps/first.xml.gz",
                                   "/maps/second.xml", "/maps/third.txt", "/sitemap.xml"])
    # Routed as links are: the scope rule's decision names the sitemap that listed the URL.
    assert why.returncode == 1, why.stdout + why.stderr  # not captured
    assert "out of scope" in why.stdout and "/maps/first.xml.gz" in why.stdout, why.stdout


async def test_a_page_whose_lastmod_is_newer_than_its_capture_comes_first_on_a_revisit(
        tmp_path, caplog):
    async with session_web() as web:
        origin = web.origin(SITEMAPS)
        run = Run(tmp_path, web, sitemaps=True)
        await run.crawl([origin + "/"], caplog)
        before = len(web.to(SITEMAPS))
        web.lastmod["/p5.html"] = "2100-01-01"  # changed since its capture, its sitemap says
        await run.crawl([origin + "/"], caplog, recrawl=True)
    pages = [r.target for r in web.to(SITEMAPS)[before:] if r.target.startswith("/p")]
    # Due first: before the crawl queue's walk (which starts at /p1.html), and fetched once.
    assert pages[0] == "/p5.html" and pages.count("/p5.html") == 1
    assert sorted(pages) == sorted([*SITEMAP_PAGES, DEFAULT_SITEMAP_PAGE])


# -- gatekeepers -----------------------------------------------------------------------------


async def test_challenges_on_every_second_request_are_kept_labelled_and_never_replayed(
        tmp_path, caplog):
    async with session_web() as web:
        origin = web.origin(GATED)
        run = Run(tmp_path, web)
        await run.crawl([origin + "/"], caplog)
        captured = run.catalog()
        pages = {origin + "/": b"gated home content"} | {
            f"{origin}/page{n}.html": f"page {n} content".encode() for n in range(1, GATED_PAGES + 1)}
        async with serving(run.config) as replay:
            for url, text in pages.items():
                for at in ["2100", *(c.timestamp for c in captured if c.url == url)]:
                    status, body = await replayed(replay.content_at, url, at)
                    assert status == 200 and text in body, (url, at)
                    assert not any(mark in body for mark in CHALLENGE_MARKS), (url, at)
            status, _, listed = await get(replay.app_at, f"/cdx?url={quote(origin + '/*', safe='')}"
                                          "&filter==label.gatekeeper:challenge&output=json")
            assert status == 200
            status, _, metrics = await get(replay.app_at, "/metrics")
            assert status == 200
        status_json = run.cli("status", "--json")
        row = run.site_rows()[origin]
    # Every page eventually captured as content.
    for url in pages:
        assert [c for c in content(captured) if c.url == url and c.status == 200], url
    # Every challenge the server sent is in the WARC and the catalog, labelled; none is content.
    assert web.challenges >= 3
    labelled = [c for c in captured if "gatekeeper" in c.label_map]
    assert len(labelled) == web.challenges
    assert {c.label_map["gatekeeper"] for c in labelled} == {"challenge"}
    assert {c.status for c in labelled} == {200, 403}  # both kinds: header and page alone
    assert len(listed.decode().splitlines()) == web.challenges
    challenges_in_warc = [uri for rec_type, uri, data in warc_payloads(run.config.root)
                          if rec_type == "response" and any(m in data for m in CHALLENGE_MARKS)]
    assert len(challenges_in_warc) == web.challenges
    # Counted per site in status, and in the process's status.
    assert row["gatekeepers"] == {"challenge": web.challenges}
    [process] = json.loads(status_json)
    assert process["gatekeepers"] == {"challenge": web.challenges}
    assert (f'archiver_gatekeepers_total{{process="0",kind="challenge"}} {web.challenges}'
            in metrics.decode())


async def test_a_site_answering_only_challenges_backs_off_and_is_reported(tmp_path, caplog):
    async with session_web(gated_always=True) as web:
        origin = web.origin(GATED)
        run = Run(tmp_path, web, site_retries=1, sitemaps=True, max_backoff=0.4)
        await run.crawl([origin + "/"], caplog)
        row = run.site_rows()[origin]
    page_requests = [r for r in web.to(GATED) if r.target != "/robots.txt"]
    # Not hammered: a handful of tries (a challenge is no capture: the URL stays to fetch),
    # backing off more each time: /sitemap.xml, then crawl.max_rate_limited (10) tries of the
    # home page in a row end the visit, and site_retries = 1 defers the site after it.
    assert [r.target for r in page_requests] == ["/sitemap.xml"] + ["/"] * 10
    gaps = [b.at - a.at for a, b in itertools.pairwise(page_requests)]
    assert all(gap >= GENTLE["backoff_start"] * 0.9 for gap in gaps), gaps
    assert gaps[-1] > gaps[0], gaps  # growing
    assert content([c for c in run.catalog() if c.url.startswith(origin)
                    and c.url != origin + "/robots.txt"]) == []
    assert row["state"] == "deferred" and row["gatekeepers"] == {"challenge": 11}  # reported
    assert row["note"] == "10 answers gatekeeper (challenge) in a row"
    assert any("gatekeeper" in line for line in run.log_lines)
