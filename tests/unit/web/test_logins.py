"""archiver.web.logins: login forms, Basic and Digest credentials."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from requests.auth import HTTPDigestAuth

from archiver.web.logins import (
    MAX_READ,
    DigestChallenge,
    LoginForm,
    basic_authorization,
    digest_authorization,
    digest_challenge,
    find_login_form,
)
from tests.support.fuzzing import CHARSETS, assert_cost_bounded, examples, html_documents, repeat_to

PAGE = "http://example.org/account/login"


def form_of(html: str, page: str = PAGE) -> LoginForm | None:
    return find_login_form(html.encode(), page, "user", "pass")


# --- forms ------------------------------------------------------------------------------------

def test_a_typical_login_form() -> None:
    form = form_of("""<html><head><base href="/app/"></head><body>
      <form action="/search"><input name="q"></form>
      <form method="POST" action="session?next=%2F" class="login">
        <input type="hidden" name="csrf" value="tok&amp;en/=">
        <label>User <input name="user" autocomplete="username"></label>
        <input type="password" name="pass">
        <input type="checkbox" name="remember" checked> <input type="checkbox" name="spam">
        <input type="radio" name="kind" value="a"><input type="radio" name="kind" value="b" checked>
        <select name="lang"><option>en</option><option value="fr" selected>Fran&ccedil;ais</option></select>
        <textarea name="note">a
b</textarea>
        <input type="file" name="f"><input type="reset" name="r"><input type="button" name="b">
        <button name="login" value="yes">Log in</button><input type="submit" name="other" value="x">
      </form></body></html>""")
    assert form == LoginForm(
        action="http://example.org/app/session?next=%2F", method="POST",
        fields=(("csrf", "tok&en/="), ("user", ""), ("pass", ""), ("remember", "on"),
                ("kind", "b"), ("lang", "fr"), ("note", "a\nb"), ("login", "yes")),
        username_field="user", password_field="pass")
    assert form.body("ann", "s3cr\u00e9t &=+ ~*") == (
        b"csrf=tok%26en%2F%3D&user=ann&pass=s3cr%C3%A9t+%26%3D%2B+~%2A&remember=on&kind=b"
        b"&lang=fr&note=a%0Ab&login=yes")


def test_body_extra_fields_replace_or_are_added() -> None:
    form = LoginForm("http://example.org/l", "POST",
                     (("a", "1"), ("user", "x"), ("a", "2"), ("pass", "y"), ("b", "3")), "user", "pass")
    assert form.body("u", "p", {"a": "9", "c": "new", "user": "ignored"}) == (
        b"a=9&user=u&pass=p&b=3&c=new")
    assert form.body("u", "p") == b"a=1&user=u&a=2&pass=p&b=3"


def test_the_form_needs_both_inputs() -> None:
    assert form_of('<form><input name="user"></form><form><input name="pass"></form>') is None
    assert form_of('<form><input name="user"><select name="pass"></select></form>') is None
    assert form_of("no form at all") is None
    assert form_of("") is None
    found = form_of('<form><input name="pass"></form><form id="2"><input name="user">'
                    '<input name="pass" type="password"></form>')
    assert found is not None and found.fields == (("user", ""), ("pass", ""))


def test_action_and_method_defaults_and_the_submitter() -> None:
    bare = form_of('<form><input name="user"><input name="pass"></form>')
    assert bare is not None and (bare.action, bare.method) == (PAGE, "GET")
    blank = form_of('<form action="  " method="bogus"><input name="user"><input name="pass"></form>')
    assert blank is not None and (blank.action, blank.method) == (PAGE, "GET")
    chosen = form_of('<form action="/a" method="get"><input name="user"><input name="pass">'
                     '<button type="button" name="x">no</button>'
                     '<button formaction="/b" formmethod="post" name="go">go</button></form>')
    assert chosen is not None and (chosen.action, chosen.method) == ("http://example.org/b", "POST")
    assert chosen.fields == (("user", ""), ("pass", ""), ("go", ""))
    image = form_of('<form method=post><input name="user"><input name="pass">'
                    '<input type="image" name="pic" src="b.png"><input type=submit name=s></form>')
    assert image is not None and image.fields[2:] == (("pic.x", "0"), ("pic.y", "0"))


def test_forms_that_are_not_sent_by_http_are_skipped() -> None:
    scripted = form_of('<form action="javascript:login()"><input name="user"><input name="pass">'
                       '</form><form action="/real" method="post"><input name="user">'
                       '<input name="pass"></form>')
    assert scripted is not None and scripted.action == "http://example.org/real"
    assert form_of('<form method="dialog"><input name="user"><input name="pass"></form>') is None


def test_controls_bound_by_the_form_attribute() -> None:
    form = form_of('<input name="token" value="t" form="login">'
                   '<form id="login" method="post"><input name="user">'
                   '<input name="elsewhere" form="other"></form>'
                   '<input name="pass" type="password" form="login"><input name="free">'
                   '<form id="other"></form>')
    assert form is not None and form.fields == (("token", "t"), ("user", ""), ("pass", ""))


def test_a_form_opened_in_a_table_owns_the_table_s_controls() -> None:
    # The parser leaves such a form empty and associates the controls through its form pointer.
    form = form_of('<table><form method="post" action="/in"><tr><td><input name="user"></td>'
                   '<td><input name="pass" type="password"><input type="submit" name="go" value="Go">'
                   '</td></tr></form></table><input name="outside">')
    assert form is not None and form.action == "http://example.org/in"
    assert form.fields == (("user", ""), ("pass", ""), ("go", "Go"))


def test_disabled_controls_and_fieldsets_are_not_sent() -> None:
    form = form_of('<form><input name="user"><input name="pass"><input name="d" disabled>'
                   '<fieldset disabled><legend><input name="spared" value="1"></legend>'
                   '<input name="gone" value="2"><legend><input name="gone2"></legend></fieldset>'
                   '<button disabled name="off">x</button><button name="on">y</button>'
                   '<input type="hidden" name="_charset_" value="latin1"></form>')
    assert form is not None
    assert form.fields == (("user", ""), ("pass", ""), ("spared", "1"), ("on", ""), ("_charset_", "UTF-8"))


def test_select_defaults() -> None:
    form = form_of('<form><input name="user"><input name="pass">'
                   '<select name="first"><option disabled>x</option><option>  a\n b </option></select>'
                   '<select name="many" multiple><option>1</option></select>'
                   '<select name="picked" multiple><option selected>1</option><option>2</option>'
                   '<option selected value="3">three</option></select><select name="empty"></select></form>')
    assert form is not None
    assert form.fields[2:] == (("first", "a b"), ("picked", "1"), ("picked", "3"))


def test_the_page_charset_decodes_default_values() -> None:
    html = '<form><input name="user" value="caf\u00e9"><input name="pass"></form>'.encode("cp1252")
    form = find_login_form(html, PAGE, "user", "pass", charset="windows-1252")
    assert form is not None and form.fields[0] == ("user", "caf\u00e9")


def test_a_form_longer_than_a_parsed_part_keeps_its_controls() -> None:
    filler = "<span>text</span>" * 600  # extract.linear_parts cuts after 512 tags
    form = form_of(f'<form method="post" action="/in"><input name="user">{filler}'
                   f'<input name="pass" type="password">{filler}<input type="hidden" name="t" '
                   f'value="v"></form>{filler}<input name="after"><form><input name="q"></form>')
    assert form is not None and (form.action, form.method) == ("http://example.org/in", "POST")
    assert form.fields == (("user", ""), ("pass", ""), ("t", "v"))


def test_only_the_first_mib_is_read() -> None:
    filler = b"<p>" + b"x" * MAX_READ
    assert find_login_form(filler + b'<form><input name="user"><input name="pass"></form>',
                           PAGE, "user", "pass") is None


_FORM_PIECES = st.sampled_from([
    "<form>", "<form method=post action=/x>", "</form>", "<form id=f action=javascript:x>",
    "<input name=user>", "<input name=pass form=f>", "<input type=submit name=s>", "<fieldset disabled>",
    "<legend>", "<select name=s><option>1", "<textarea name=t>", "<button formaction=/y>", "<base href=/b/>"])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_FORM_PIECES | st.text(max_size=8), max_size=16).map("".join) | html_documents(),
       st.sampled_from(["user", "s", "", "a b"]), CHARSETS)
def test_any_page_gives_a_form_or_none(html: str, name: str, charset: str | None) -> None:
    form = find_login_form(html.encode(), PAGE, name, "pass", charset)
    if form is not None:
        assert form.action.startswith("http://") and form.method in ("GET", "POST")
        assert form.body("u", "p").isascii()


_LOGIN = b'<form method=post><input type=hidden name=t value=x><input name=user><input name=pass></form>'
_PATHOLOGICAL = {
    "controls bound to a form": b"<form id=f></form>" + b"<input name=a form=f>" * 40_000,
    "nested disabled fieldsets": b"<form>" + b"<fieldset disabled><input name=a>" * 20_000,
    "many forms": b"<form><input name=user></form>" * 30_000,
    "forms opened in a table": b"<table>" + b"<form><tr><td><input name=a></td></tr>" * 20_000,
    "deep nesting": b"<form>" + b"<div>" * 100_000 + b"<input name=user><input name=pass>",
}


@pytest.mark.parametrize("name", _PATHOLOGICAL)
def test_hostile_pages_cost_what_a_benign_page_of_their_size_does(name: str) -> None:
    page = _PATHOLOGICAL[name]
    assert_cost_bounded(lambda body: find_login_form(body, PAGE, "user", "pass"), page,
                        repeat_to(b"<p>Some text <a href=/x>a link</a></p>" + _LOGIN, len(page)),
                        factor=10, label=name)


# --- Basic ------------------------------------------------------------------------------------

def test_basic_per_rfc_7617() -> None:
    assert basic_authorization("Aladdin", "open sesame") == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
    assert basic_authorization("test", "123\u00a3") == "Basic dGVzdDoxMjPCow=="  # 2.1: UTF-8
    assert basic_authorization("a", "p:q") == "Basic YTpwOnE="


@pytest.mark.parametrize(("username", "password"), [("a:b", "secret-pw"), ("a", "secret\r\npw"),
                                                    ("a\x00", "secret-pw")])
def test_basic_refuses_what_it_cannot_carry_without_naming_it(username: str, password: str) -> None:
    with pytest.raises(ValueError) as caught:
        basic_authorization(username, password)
    assert "secret" not in str(caught.value)


# --- Digest -----------------------------------------------------------------------------------

# RFC 7616 3.9.1: the server offers SHA-256 first, then MD5.
RFC_CHALLENGES = [
    'Digest\r\n    realm="http-auth@example.org",\r\n    qop="auth, auth-int",\r\n'
    '    algorithm=SHA-256,\r\n    nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",\r\n'
    '    opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"',
    'Digest\r\n    realm="http-auth@example.org",\r\n    qop="auth, auth-int",\r\n'
    '    algorithm=MD5,\r\n    nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",\r\n'
    '    opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"',
]
RFC_CNONCE = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ"


def rfc_authorization(algorithm: str, response: str) -> str:
    return ('Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", '
            f'algorithm={algorithm}, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", '
            f'nc=00000001, cnonce="{RFC_CNONCE}", qop=auth, response="{response}", '
            'opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"')


def test_digest_matches_the_rfc_7616_example() -> None:
    sha = digest_challenge(RFC_CHALLENGES)
    assert sha == DigestChallenge(
        realm="http-auth@example.org", nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v",
        algorithm="SHA-256", qop=True, opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS")
    assert digest_authorization("Mufasa", "Circle of Life", sha, "GET", "/dir/index.html",
                                cnonce=RFC_CNONCE) == rfc_authorization(
        "SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1")
    md5 = digest_challenge(RFC_CHALLENGES[1:])
    assert md5 == dataclasses.replace(sha, algorithm="MD5")
    assert digest_authorization("Mufasa", "Circle of Life", md5, "GET", "/dir/index.html",
                                cnonce=RFC_CNONCE) == rfc_authorization(
        "MD5", "8ca523f5e9506fed4657c9700eebdbec")


def _fields(authorization: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="?([^",]*)"?', authorization))


def _requests_answer(challenge: dict[str, str], method: str, target: str) -> dict[str, str]:
    """The fields requests' HTTPDigestAuth answers with (set up through its thread-local
    state): an independent implementation to check ours against."""
    auth = HTTPDigestAuth("ann", "p\u00e4ss word")
    auth.init_per_thread_state()
    auth._thread_local.chal = challenge
    return _fields(auth.build_digest_header(method, f"http://example.org{target}") or "")


@pytest.mark.parametrize(("algorithm", "qop"), [("MD5", "auth"), ("SHA-256", "auth,auth-int"),
                                                ("MD5-sess", "auth"), ("MD5", None)])
def test_digest_agrees_with_requests(algorithm: str, qop: str | None) -> None:
    params = {"realm": "r\u00e9alm", "nonce": "n0nce==", "algorithm": algorithm, "opaque": "op"}
    if qop is not None:
        params["qop"] = qop
    theirs = _requests_answer(params, "POST", "/a/b?c=d")
    challenge = digest_challenge(["Digest " + ", ".join(f'{k}="{v}"' for k, v in params.items())])
    assert challenge is not None and ("cnonce" in theirs) == (qop is not None)
    ours = _fields(digest_authorization("ann", "p\u00e4ss word", challenge, "POST", "/a/b?c=d",
                                        cnonce=theirs.get("cnonce")))
    assert ours["response"] == theirs["response"] and ours["uri"] == theirs["uri"]


def test_digest_session_variants_nonce_count_and_userhash() -> None:
    challenge = DigestChallenge(realm="r", nonce="n", algorithm="SHA-256-sess", qop=True)
    first = digest_authorization("u", "p", challenge, "GET", "/", nc=1, cnonce="c")
    third = digest_authorization("u", "p", challenge, "GET", "/", nc=3, cnonce="c")
    assert "nc=00000001" in first and "nc=00000003" in third and first != third

    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    secret = sha(sha("u:r:p") + ":n:c")
    exchange = sha("GET:/")
    assert f'response="{sha(f"{secret}:n:00000001:c:auth:{exchange}")}"' in first
    hashed = digest_authorization("Mufasa", "p", dataclasses.replace(challenge, userhash=True),
                                  "GET", "/", cnonce="c")
    assert hashed.startswith(f'Digest username="{sha("Mufasa:r")}", ') and hashed.endswith(", userhash=true")


def test_digest_non_ascii_username_uses_the_extended_notation() -> None:
    challenge = DigestChallenge(realm='a "quoted" realm', nonce="n", algorithm="MD5", qop=True)
    value = digest_authorization("J\u00e4s\u00f8n Doe", "p", challenge, "GET", "/", cnonce="c")
    assert value.startswith("Digest username*=UTF-8''J%C3%A4s%C3%B8n%20Doe, "
                            'realm="a \\"quoted\\" realm", ')


def test_digest_cnonce_is_random() -> None:
    challenge = DigestChallenge(realm="r", nonce="n", qop=True)
    cnonces = {re.search(r'cnonce="([^"]+)"', digest_authorization("u", "p", challenge, "GET", "/"))[1]
               for _ in range(20)}  # type: ignore[index]
    assert len(cnonces) == 20 and min(map(len, cnonces)) >= 32


@pytest.mark.parametrize(("values", "expected"), [
    (['Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple", '
      'Negotiate abc==, Digest realm=r, nonce=n, STALE=TRUE, qop="AUTH"'],
     DigestChallenge(realm="r", nonce="n", qop=True, stale=True)),
    (['Basic realm="x"', 'digest realm="r", nonce="n", algorithm=md5-SESS'],
     DigestChallenge(realm="r", nonce="n", algorithm="MD5-sess")),
    (['Digest realm="r", nonce="n", algorithm=SHA-1', 'Digest realm="r", nonce="m", qop=auth-int',
      'Digest realm="r"', 'Digest nonce="n"', 'Digest realm="", nonce="n"',
      'Digest realm="r", nonce="n2", algorithm=SHA-256, userhash=true'],
     DigestChallenge(realm="r", nonce="n2", algorithm="SHA-256", userhash=True)),
    (["Basic realm=x", "Bearer", ""], None),
    ([], None),
])
def test_digest_challenge_picks_the_first_usable(values: list[str], expected: DigestChallenge | None) -> None:
    assert digest_challenge(values) == expected


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from('Digest realm="\\,= \tnonce qop auth-sess md5'),
                        max_size=80), max_size=4))
def test_any_challenge_text_gives_a_challenge_or_none(values: list[str]) -> None:
    challenge = digest_challenge(values)
    if challenge is not None:
        assert digest_authorization("u", "p", challenge, "GET", "/").startswith("Digest ")


def test_hostile_challenges_cost_what_a_plain_one_does() -> None:
    hostile = ['"' + "\\x" * 200_000, "=" * 400_000, ", " * 200_000 + "Digest"]
    plain = [('Digest realm="r", nonce="n", opaque="o", ' * 10_000)[:400_000]]
    assert_cost_bounded(digest_challenge, hostile, plain, factor=10)
