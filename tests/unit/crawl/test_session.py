"""A visit's session with its site, without I/O (archiver.crawl.session)."""

from __future__ import annotations

from archiver.crawl.session import SiteSession
from archiver.credentials import Credential
from archiver.web.sheets import make_login

ORIGIN = "http://members.example"
SECRET = Credential("archivist", "s3cret-pass")


def session(method: str = "form", **keys: object) -> SiteSession:
    values: dict[str, object] = {"login": method, "credentials": "members", **keys}
    if method == "form":
        values.update(login_url="/login", username_field="u", password_field="p",
                      login_success="Welcome")
    return SiteSession(ORIGIN, jar=None, login=make_login(values), credential=SECRET)


def test_labels_follow_the_session_from_its_login_to_its_loss():
    s = session(logged_in="Log out")
    assert s.labels() == {}
    sid = s.begin(0.0)
    assert sid == "members@19700101000000" and s.labels() == {}  # the login's own exchanges
    s.open()
    assert s.labels() == {"session": sid}
    s.lost = s.check(ORIGIN + "/p1", 200, None, "<p>Please log in</p>")
    assert "did not contain 'Log out'" in s.lost
    assert s.labels() == {"session-lost": sid}


def test_the_check_reads_redirects_to_the_logged_out_url_and_refused_credentials():
    s = session(logged_in="Log out", logged_out_url="/login")
    s.begin(0.0)
    s.open()
    assert s.check(ORIGIN + "/a", 302, "/login?next=/a", None).startswith("session lost")
    assert s.check(ORIGIN + "/a", 302, ORIGIN + "/other", None) == ""
    assert s.check(ORIGIN + "/a", 200, None, "x Log out y") == ""
    assert s.check(ORIGIN + "/a.png", 200, None, None) == ""          # not HTML: no text check
    assert s.check("http://elsewhere.example/a", 200, None, "nothing") == ""
    basic = session("basic")
    basic.begin(0.0)
    basic.open()
    assert "401" in basic.check(ORIGIN + "/m/", 401, None, None)


def test_the_check_applies_to_the_session_scope_only():
    s = session(logged_in="Log out", session_scope=["re:http://members\\.example/members/.*"])
    s.begin(0.0)
    s.open()
    assert s.check(ORIGIN + "/about", 200, None, "public") == ""
    assert s.check(ORIGIN + "/members/1", 200, None, "public") != ""


def test_credentials_go_to_the_site_alone():
    s = session("basic")
    assert s.request_headers(ORIGIN + "/", 0.0) == []                 # before the session opens
    s.begin(0.0)
    s.open()
    headers = dict(s.request_headers(ORIGIN + "/members/", 0.0))
    assert headers["Authorization"].startswith("Basic ")
    assert s.request_headers("http://other.example/", 0.0) == []
    assert s.secrets == ("s3cret-pass",)
