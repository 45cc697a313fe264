"""The loopback web of sessions and gatekeepers (tests/support/sessionweb.py) over real sockets:
each host answers as the crawl tests of issue 41 rely on."""

from __future__ import annotations

import base64
import gzip
import re
import urllib.request
import xml.etree.ElementTree as ET

import pytest
import trio

from tests.support.rawhttp import get
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
    FORM_PAGES,
    FORM_PASSWORD,
    FORM_USER,
    FORMS,
    GATED,
    GATED_PAGES,
    HOSTS,
    LOGGED_IN,
    LOGIN_FAILED,
    OTHER,
    PSL_SHOPS,
    REALM,
    SITEMAP_PAGES,
    SITEMAPS,
    SessionWeb,
    session_web,
)

Answer = tuple[int, dict[str, str], bytes]
FORM = "application/x-www-form-urlencoded"


async def fetch(web: SessionWeb, host: str, target: str, method: str = "GET", body: bytes = b"",
                **headers: str) -> Answer:
    """``target`` of ``host`` (by its Host header) on the web's port."""
    return await get(f"http://127.0.0.1:{web.port}", target, method, body,
                     Host=f"{host}:{web.port}", **headers)


async def answer_headers(web: SessionWeb, host: str, target: str) -> list[tuple[str, str]]:
    """Every header line of the answer to a GET of ``target`` (repeated names kept)."""
    async with await trio.open_tcp_stream("127.0.0.1", web.port) as stream:
        await stream.send_all(f"GET {target} HTTP/1.1\r\nHost: {host}:{web.port}\r\n"
                              "Connection: close\r\n\r\n".encode())
        received = b""
        while data := await stream.receive_some(65536):
            received += data
    head = received.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return [(name.lower(), value.strip()) for name, _, value in (line.partition(":") for line in head)]


def hrefs(body: bytes) -> list[str]:
    return re.findall(r'href="([^"]+)"', body.decode())


def cookie(headers: dict[str, str]) -> str:
    """``name=value`` of the Set-Cookie header (one per answer here)."""
    return headers["set-cookie"].split(";", 1)[0]


async def test_every_host_serves_robots_txt_unguarded():
    async with session_web(gated_always=True) as web:
        for host in HOSTS:
            status, _, body = await fetch(web, host, "/robots.txt")
            assert (status, body.startswith(b"User-agent: *\nAllow: /\n")) == (200, True), host
            assert (b"Sitemap:" in body) == (host == SITEMAPS), host
        assert web.challenges == 0
        assert [r.host for r in web.requests] == list(HOSTS)
        assert {r.status for r in web.requests} == {200}


async def test_cookies_redirect_until_the_issued_cookie_comes_back():
    async with session_web() as web:
        first = await fetch(web, COOKIES, "/page2.html")
        second = await fetch(web, COOKIES, "/page2.html")
        for status, headers, _ in (first, second):
            assert (status, headers["location"]) == (302, "/page2.html")
            assert headers["set-cookie"].endswith("; Path=/; HttpOnly")
        assert cookie(first[1]) != cookie(second[1])  # a client keeping no cookie loops
        status, _, _ = await fetch(web, COOKIES, "/", Cookie="visitor=made-up")
        assert status == 302
        visitor = cookie(first[1])
        status, _, home = await fetch(web, COOKIES, "/", Cookie=f"theme=dark; {visitor}")
        assert status == 200
        pages = [f"/page{n}.html" for n in range(1, COOKIE_PAGES + 1)]
        assert hrefs(home) == [*pages, web.origin(OTHER) + "/"]
        for page in pages:
            status, _, body = await fetch(web, COOKIES, page, Cookie=visitor)
            assert status == 200 and f"cookie page {page}".encode() in body
        status, _, _ = await fetch(web, OTHER, "/")
        await fetch(web, OTHER, "/", Cookie=visitor)
        assert status == 200
        assert [r.cookies() for r in web.to(OTHER)] == [{}, {"visitor": visitor.split("=")[1]}]


@pytest.mark.parametrize("shop", list(PSL_SHOPS))
async def test_a_shop_sets_a_cookie_for_its_public_suffix(shop):
    domain, sibling = PSL_SHOPS[shop]
    async with session_web() as web:
        status, _, body = await fetch(web, shop, "/")
        assert status == 200
        assert hrefs(body) == ["/basket.html", web.origin(sibling) + "/"]
        cookies = [v for k, v in await answer_headers(web, shop, "/") if k == "set-cookie"]
        assert cookies == [f"tracker=1; Domain={domain}; Path=/", "basket=1; Path=/"]
        status, _, _ = await fetch(web, sibling, "/", Cookie="tracker=1")
        assert status == 200 and web.to(sibling)[0].cookies() == {"tracker": "1"}


async def test_basic_guards_the_members_area():
    good = base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
    bad = base64.b64encode(f"{BASIC_USER}:wrong".encode()).decode()
    async with session_web() as web:
        status, _, home = await fetch(web, BASIC, "/")
        assert status == 200 and hrefs(home) == ["/members/"]
        for headers in ({}, {"Authorization": f"Basic {bad}"}, {"Authorization": f"Bearer {good}"}):
            status, answered, _ = await fetch(web, BASIC, "/members/", **headers)
            assert status == 401 and answered["www-authenticate"] == f'Basic realm="{REALM}"'
        members = web.member_urls(BASIC)
        assert len(members) == 5
        for url in members:
            path = url.removeprefix(web.origin(BASIC))
            status, _, body = await fetch(web, BASIC, path, Authorization=f"Basic {good}")
            assert status == 200 and sorted(hrefs(body)) == sorted(
                u.removeprefix(web.origin(BASIC)) for u in members)
        assert web.to(BASIC)[-1].header("authorization") == f"Basic {good}"


class DigestClient:
    """urllib's own Digest client: the Authorization header it computes for a challenge (its
    nonce count grows with each header it makes for the same nonce)."""

    def __init__(self, url: str, password: str = DIGEST_PASSWORD) -> None:
        passwords = urllib.request.HTTPPasswordMgr()
        passwords.add_password(REALM, url, DIGEST_USER, password)
        self.handler = urllib.request.HTTPDigestAuthHandler(passwords)

    def authorization(self, challenge: str, url: str) -> str:
        fields = urllib.request.parse_keqv_list(
            urllib.request.parse_http_list(challenge.removeprefix("Digest ")))
        answer = self.handler.get_authorization(urllib.request.Request(url), fields)
        assert answer is not None
        return "Digest " + answer


async def test_digest_checks_the_response_the_uri_and_the_nonce_count():
    async with session_web() as web:
        members = web.origin(DIGEST) + "/members/"
        status, headers, _ = await fetch(web, DIGEST, "/members/p2.html")
        challenge = headers["www-authenticate"]
        assert status == 401 and challenge.startswith(f'Digest realm="{REALM}", qop="auth"')
        client = DigestClient(members)
        right = client.authorization(challenge, members + "p2.html")
        status, _, body = await fetch(web, DIGEST, "/members/p2.html", Authorization=right)
        assert status == 200 and b"member page /members/p2.html" in body
        # The same header again (its nonce count not grown), one made for another URI, with
        # another password, or for a nonce never issued: refused.
        status, _, _ = await fetch(web, DIGEST, "/members/p2.html", Authorization=right)
        assert status == 401
        other_uri = client.authorization(challenge, members + "p2.html")
        status, _, _ = await fetch(web, DIGEST, "/members/p3.html", Authorization=other_uri)
        assert status == 401
        wrong = DigestClient(members, "wrong").authorization(challenge, members)
        status, _, _ = await fetch(web, DIGEST, "/members/", Authorization=wrong)
        assert status == 401
        nonce = re.search(r'nonce="(\w+)"', challenge)
        assert nonce is not None
        forged = challenge.replace(nonce[1], "0" * len(nonce[1]))
        status, _, _ = await fetch(web, DIGEST, "/members/",
                                   Authorization=DigestClient(members).authorization(forged, members))
        assert status == 401
        # The count grown: accepted.
        status, _, _ = await fetch(web, DIGEST, "/members/",
                                   Authorization=client.authorization(challenge, members))
        assert status == 200


async def log_in(web: SessionWeb, user: str = FORM_USER, password: str = FORM_PASSWORD) -> Answer:
    """Get the form, post it back with its cookie and token."""
    status, headers, form = await fetch(web, FORMS, "/login")
    assert status == 200 and 'action="/session"' in form.decode()
    csrf = re.search(r'name="csrf" type="hidden" value="(\w+)"', form.decode())
    assert csrf is not None
    body = f"user={user}&pass={password}&csrf={csrf[1]}".encode()
    return await fetch(web, FORMS, "/session", "POST", body, Cookie=cookie(headers),
                       **{"Content-Type": FORM})


async def test_a_form_login_needs_its_token_and_cookie():
    async with session_web() as web:
        status, headers, form = await fetch(web, FORMS, "/login")
        token = re.search(r'value="(\w+)"', form.decode())
        assert token is not None
        post = f"user={FORM_USER}&pass={FORM_PASSWORD}&csrf={token[1]}".encode()
        status, _, _ = await fetch(web, FORMS, "/session", "POST", post, **{"Content-Type": FORM})
        assert status == 403  # no login cookie
        status, _, _ = await fetch(web, FORMS, "/session", "POST", post, Cookie=cookie(headers),
                                   **{"Content-Type": FORM})
        assert status == 403  # the token was spent
        status, _, body = await log_in(web, password="wrong")
        assert status == 200 and LOGIN_FAILED.encode() in body
        assert b"&pass=wrong&" in web.requests[-1].body
        status, headers, _ = await log_in(web)
        assert (status, headers["location"]) == (303, "/members/")
        assert headers["set-cookie"].startswith("sid=")
        assert web.requests[-1].method == "POST"
        assert f"pass={FORM_PASSWORD}".encode() in web.requests[-1].body


async def test_members_pages_need_a_session_and_link_the_next():
    async with session_web() as web:
        status, headers, _ = await fetch(web, FORMS, "/members/p3.html")
        assert (status, headers["location"]) == (302, "/login?next=/members/p3.html")
        _, headers, _ = await log_in(web)
        sid = cookie(headers)
        path, seen = "/members/", []
        while True:
            status, _, body = await fetch(web, FORMS, path, Cookie=sid)
            assert status == 200 and LOGGED_IN.encode() in body
            seen.append(path)
            if not hrefs(body):
                break
            [path] = hrefs(body)
        assert {web.origin(FORMS) + p for p in seen} == web.member_urls(FORMS)
        assert len(seen) == FORM_PAGES


async def test_a_session_expires_after_n_pages_and_revive_ends_the_trouble():
    async with session_web(expire_after=2) as web:
        _, headers, _ = await log_in(web)
        sid = cookie(headers)
        for path in ("/members/", "/members/p1.html"):
            status, _, _ = await fetch(web, FORMS, path, Cookie=sid)
            assert status == 200
        for _ in range(2):  # expired, and stays so
            status, headers, _ = await fetch(web, FORMS, "/members/p2.html", Cookie=sid)
            assert (status, headers["location"]) == (302, "/login?next=/members/p2.html")
        web.logins_fail = True
        status, _, body = await log_in(web)
        assert status == 200 and LOGIN_FAILED.encode() in body
        web.revive()
        status, headers, _ = await log_in(web)
        assert status == 303
        fresh = cookie(headers)
        for n in range(1, FORM_PAGES):
            status, _, _ = await fetch(web, FORMS, f"/members/p{n}.html", Cookie=fresh)
            assert status == 200


def locs(xml: bytes) -> list[str]:
    return [e.text or "" for e in ET.fromstring(xml).iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")]


async def test_sitemaps_list_pages_no_link_reaches():
    async with session_web() as web:
        origin = web.origin(SITEMAPS)
        _, _, home = await fetch(web, SITEMAPS, "/")
        assert hrefs(home) == []
        _, _, robots = await fetch(web, SITEMAPS, "/robots.txt")
        [index_url] = re.findall(r"Sitemap: (\S+)", robots.decode())
        status, headers, packed = await fetch(web, SITEMAPS, index_url.removeprefix(origin))
        assert (status, headers["content-type"], "content-encoding" in headers) == (
            200, "application/gzip", False)
        listed: list[str] = []
        for sitemap in locs(gzip.decompress(packed)):
            _, _, data = await fetch(web, SITEMAPS, sitemap.removeprefix(origin))
            if sitemap.endswith(".gz"):
                data = gzip.decompress(data)
            listed += data.decode().split() if sitemap.endswith(".txt") else locs(data)
        assert sorted(listed) == sorted([origin + p for p in SITEMAP_PAGES]
                                        + [web.origin(ELSEWHERE) + "/stray.html"])
        _, _, plain = await fetch(web, SITEMAPS, "/sitemap.xml")
        assert locs(plain) == [origin + DEFAULT_SITEMAP_PAGE]
        for page in [*SITEMAP_PAGES, DEFAULT_SITEMAP_PAGE]:
            status, _, body = await fetch(web, SITEMAPS, page)
            assert status == 200 and f"sitemap page {page}".encode() in body


def kind(answer: Answer) -> str:
    status, headers, body = answer
    if headers.get("cf-mitigated") == "challenge":
        return f"{status} cf-mitigated"
    if b"window._cf_chl_opt" in body and b"<title>Just a moment...</title>" in body:
        return f"{status} just-a-moment"
    return f"{status} page"


async def test_gated_challenges_every_second_request_alternately():
    async with session_web() as web:
        answers = []
        for target in ["/", "/robots.txt", *(f"/page{n}.html" for n in range(1, 8))]:
            answers.append(await fetch(web, GATED, target))
        assert [kind(a) for a in answers] == [
            "200 page", "200 page", "403 cf-mitigated", "200 page", "200 just-a-moment",
            "200 page", "403 cf-mitigated", "200 page", "200 just-a-moment"]
        assert b"page 4 content" in answers[5][2]
        assert hrefs(answers[0][2]) == [f"/page{n}.html" for n in range(1, GATED_PAGES + 1)]
        assert (web.gated_count, web.challenges) == (8, 4)


async def test_gated_always_challenges_every_page_request():
    async with session_web(gated_always=True) as web:
        answers = [await fetch(web, GATED, "/") for _ in range(4)]
        assert [kind(a) for a in answers] == ["403 cf-mitigated", "200 just-a-moment"] * 2
        assert [r.status for r in web.to(GATED)] == [403, 200, 403, 200]
        times = [r.at for r in web.to(GATED)]
        assert times == sorted(times)


async def test_unknown_hosts_and_oversized_bodies_are_refused():
    async with session_web() as web:
        status, _, _ = await fetch(web, "nowhere.test", "/")
        assert status == 404
        status, _, _ = await fetch(web, FORMS, "/session", "POST", b"x" * (64 * 1024 + 1))
        assert status == 413
