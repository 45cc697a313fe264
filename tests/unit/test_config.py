"""Config loading: defaults, relative paths, and errors that name the file and key."""

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from archiver import config
from tests.support.repo import ROOT

SHIPPED = ROOT / "config" / "archiver.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "archiver.toml"
    path.write_text(text)
    return path


def test_shipped_config_lists_every_default():
    cfg = config.load(SHIPPED)
    defaults = config.Config()
    for section in ("crawl", "scope", "plugins", "warc", "store", "s3", "catalog", "spool",
                    "links", "replay", "import_", "log"):
        assert getattr(cfg, section) == getattr(defaults, section), section
    assert cfg.root == SHIPPED.parent / "archive"
    assert cfg.dns.hosts_file == Path("/etc/hosts")
    assert dataclasses.replace(cfg.dns, hosts_file=None) == dataclasses.replace(defaults.dns, hosts_file=None)
    assert cfg.sheets == ()


def test_shipped_config_shows_every_key_under_its_policy():
    written = tomllib.loads(SHIPPED.read_text())
    for section in dataclasses.fields(config.Config):
        if section.name in config.NOT_SECTIONS:
            continue
        keys = {f.name for f in dataclasses.fields(getattr(config.Config(), section.name))}
        keys.discard("tables")  # [plugins.<name>] tables: none by default
        assert set(written[config.section_name(section.name)]) == keys, section.name
    text = SHIPPED.read_text()
    headings = [line for line in text.splitlines() if line.startswith("# ==== ")]
    for policy in ("SELECTION POLICY", "REVISIT POLICY", "POLITENESS POLICY",
                   "PARALLELISATION POLICY"):
        assert sum(policy in line for line in headings) == 1, policy
    # Each policy's keys sit in its own section of the file.
    order = ["SELECTION POLICY", "\nscope.include =", "REVISIT POLICY", "\ncrawl.revisit_interval =",
             "POLITENESS POLICY", "\ncrawl.min_rest =", "PARALLELISATION POLICY",
             "\ncrawl.processes =", "\nlinks.engine =", "==== Fetching"]
    places = [text.index(mark) for mark in order]
    assert places == sorted(places)


def test_contract_keys_and_relative_paths(tmp_path):
    cfg = config.load(write(tmp_path, """
[archive]
root = "arc"
[crawl]
agent = "mybot"
sites_per_process = 8
min_rest = 0
max_rest = 2
rest_factor = 0.5
[dns]
hosts_file = "hosts"
nameservers = ["127.0.0.1:5353", "::1", "[::1]:5353"]
[warc]
max_size = 1000000
"""))
    assert cfg.root == tmp_path / "arc"
    assert cfg.crawl.agent == "mybot" and cfg.crawl.sites_per_process == 8
    assert cfg.crawl.min_rest == 0.0 and isinstance(cfg.crawl.min_rest, float)
    assert cfg.dns.hosts_file == tmp_path / "hosts"
    assert cfg.dns.nameservers == ("127.0.0.1:5353", "::1", "[::1]:5353")
    assert cfg.warc.max_size == 1_000_000


def test_empty_hosts_file_means_none(tmp_path):
    assert config.load(write(tmp_path, '[dns]\nhosts_file = ""\n')).dns.hosts_file is None


@pytest.mark.parametrize("text, needle", [
    ("[crawl]\nmin_rets = 1\n", "crawl.min_rets: unknown key"),
    ("[crawl]\nmin_rest = 'fast'\n", "crawl.min_rest: expected a number"),
    ("[crawl]\nsites_per_process = 1.5\n", "crawl.sites_per_process: expected an integer"),
    ("[crawl]\nsites_per_process = 0\n", "crawl.sites_per_process: must be greater than 0"),
    ("[crawl]\nmin_rest = -1\n", "crawl.min_rest: must not be negative"),
    ("[crawl]\nmin_rest = 5\nmax_rest = 1\n", "crawl.max_rest: must be >= crawl.min_rest"),
    ("[crawl]\nrevisit_interval = 3600\n", "crawl.revisit_interval: must lie between"),
    ("[crawl]\nrevisit_min = 0\n", "crawl.revisit_interval: must lie between"),
    ("[crawl]\nrevisit_max = 86400\n", "crawl.revisit_interval: must lie between"),
    ("[crawl]\nrevisit_interval = -1\n", "crawl.revisit_interval: must not be negative"),
    ("[crawl]\ndedupe = 'sha1'\n", "crawl.dedupe: must be"),
    ("[crawl]\nverify_tls = 1\n", "crawl.verify_tls: expected true or false"),
    ("[crawl]\nagent = 'my bot'\n", "crawl.agent"),
    ("[dns]\nnameservers = '127.0.0.1'\n", "dns.nameservers: expected a list of strings"),
    ("[dns]\nnameservers = ['127.0.0.1:99999']\n", "dns.nameservers: bad entry"),
    ("[dns]\nnameservers = ['[::1]:0']\n", "dns.nameservers: bad entry"),
    ("[warc]\ngzip_level = 12\n", "warc.gzip_level"),
    ("[log]\nlevel = 'loud'\n", "log.level"),
    ("[crawler]\nagent = 'x'\n", "unknown section [crawler]"),
    ("[replay]\nfuzzy_rules = ['_']\n", "replay.fuzzy_rules: must be tables"),
    ("[[replay.fuzzy_rules]]\nname = 'r'\n", "replay.fuzzy_rules[0]: give either ignore"),
    ("[[replay.fuzzy_rules]]\nname = 'r'\nignore = ['a']\n[[replay.fuzzy_rules]]\nname = 'r'\nkeep = []\n",
     "replay.fuzzy_rules[1]: name: 'r' is taken"),
    ("[[replay.fuzzy_rules]]\nname = 'epoch-ms'\nignore = ['a']\n", "name: 'epoch-ms' is taken"),
    ("[replay]\nfuzzy = 'no'\n", "replay.fuzzy: expected true or false"),
    ("[crawl]\ngatekeeper_rules = ['x']\n", "crawl.gatekeeper_rules: must be tables"),
    ("[[crawl.gatekeeper_rules]]\nkind = 'block'\nname = 'r'\n",
     "crawl.gatekeeper_rules[0]: give at least one condition"),
    ("[[crawl.gatekeeper_rules]]\nkind = 'wall'\nname = 'r'\nstatus = [403]\n",
     "crawl.gatekeeper_rules[0]: kind: expected one of challenge, rate-limit, block"),
    ("[[crawl.gatekeeper_rules]]\nkind = 'block'\nname = 'r'\nbody = '(x'\n",
     "crawl.gatekeeper_rules[0]: body: not a regular expression"),
    ("[[crawl.gatekeeper_rules]]\nkind = 'block'\nname = 'too-many-requests'\nstatus = [403]\n",
     "name: 'too-many-requests' is taken"),
    ("[crawl]\ngatekeepers = 'no'\n", "crawl.gatekeepers: expected true or false"),
    ("[[sheets]]\nmatch = ['host:a.example']\ngatekeeper_rules = []\n",
     "gatekeeper_rules: unknown key (known in a sheet"),
    ("crawl = 3\n", "[crawl] must be a table"),
    ("[crawl\n", "not valid TOML"),
])
def test_errors_name_file_and_key(tmp_path, text, needle):
    path = write(tmp_path, text)
    with pytest.raises(config.ConfigError) as info:
        config.load(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(config.ConfigError, match="no such file"):
        config.load(tmp_path / "nope.toml")


def test_retired_keys_load_with_a_notice(tmp_path):
    cfg = config.load(write(tmp_path, "[crawl]\nretries_per_url = 2\nbackoff_recovery = 0.8\n"))
    assert len(cfg.notices) == 2
    assert "crawl.retries_per_url" in cfg.notices[0] and "no longer used" in cfg.notices[0]
    assert cfg.crawl == config.CrawlConfig()
    assert config.load(SHIPPED).notices == ()


def test_renamed_section_and_key_are_read_under_their_old_names_with_a_notice(tmp_path):
    cfg = config.load(write(tmp_path, "[outlinks]\nmax_lines = 7\n[links]\npartitions = 3\n"))
    assert cfg.spool.max_lines == 7 and cfg.links.slices == 3
    assert len(cfg.notices) == 2
    assert "[outlinks] is now [spool]" in cfg.notices[0]
    assert "links.partitions is now links.slices" in cfg.notices[1]
    assert config.load(write(tmp_path, "[spool]\nmax_lines = 7\n")).notices == ()


@pytest.mark.parametrize("text, needle", [
    ("[outlinks]\nmax_lines = 7\n[spool]\nmax_age = 1.0\n", "keep [spool] only"),
    ("[links]\npartitions = 3\nslices = 3\n", "keep slices only"),
    ("[outlinks]\nmax_lines = 0\n", "spool.max_lines: must be greater than 0"),
])
def test_a_renamed_name_beside_its_new_one_or_a_bad_value_is_refused(tmp_path, text, needle):
    with pytest.raises(config.ConfigError, match=re.escape(needle)):
        config.load(write(tmp_path, text))


def test_new_robustness_keys_are_checked(tmp_path):
    for key in ("max_per_shape", "max_internal_errors", "max_rate_limited", "backoff_recovery_fetches"):
        with pytest.raises(config.ConfigError, match=f"crawl.{key}: must be greater than 0"):
            config.load(write(tmp_path, f"[crawl]\n{key} = 0\n"))


@pytest.mark.parametrize("text, needle", [
    ('[replay]\nlisten = "localhost:80"\n', "replay.listen: bad listen address"),
    ('[replay]\ncontent_listen = "127.0.0.1:8080"\n', "replay.content_listen: must differ from"),
    ('[replay]\nbase_url = "ftp://a.org/"\n', "replay.base_url: 'ftp://a.org/' is not an http or https URL"),
    ('[replay]\nbase_url = "http://a.org/?q"\n', "replay.base_url: 'http://a.org/?q' must have no"),
    ('[replay]\ncontent_origin = "http://c.org/p"\n', "replay.content_origin: 'http://c.org/p' must be an"),
    ('[replay]\nbase_url = "http://a.org/x"\ncontent_origin = "http://a.org:80"\n',
     "replay.content_origin: must be another origin than replay.base_url"),
    ("[replay]\nscan_deadline = 0\n", "replay.scan_deadline: must be greater than 0"),
    ("[replay]\nscan_slice_rows = 0\n", "replay.scan_slice_rows: must be greater than 0"),
])  # fmt: skip
def test_replay_keys_are_checked(tmp_path, text, needle):
    with pytest.raises(config.ConfigError, match=re.escape(needle)):
        config.load(write(tmp_path, text))


@pytest.mark.parametrize("text, needle", [
    ('[crawl]\ncapture = "js"\n', 'crawl.capture: must be "http", "browser" or "auto"'),
    ('[[sheets]]\nmatch = ["domain:a.org"]\ncapture = "always"\n', 'capture: must be "http", "browser"'),
    ('[browser]\nviewport = "1280"\n', "browser.viewport: expected WIDTHxHEIGHT"),
    ('[browser]\nviewport = "20x900"\n', "browser.viewport: expected WIDTHxHEIGHT"),
    ('[browser]\nscreenshot_format = "gif"\n', 'browser.screenshot_format: must be "png" or "webp"'),
    ("[browser]\nquiet = 30.0\n", "browser.quiet: must be less than browser.page_timeout"),
    ("[browser]\ntabs = 0\n", "browser.tabs: must be greater than 0"),
    ('[browser]\nexecutable = ""\n', "browser.executable: must name a program"),
    ("[browser]\nkept_answers = -1\n", "browser.kept_answers: must not be negative"),
])  # fmt: skip
def test_capture_and_browser_keys_are_checked(tmp_path, text, needle):
    with pytest.raises(config.ConfigError, match=re.escape(needle)):
        config.load(write(tmp_path, text))


def test_capture_and_browser_keys_load(tmp_path):
    cfg = config.load(write(tmp_path, '''
[crawl]
capture = "auto"
[browser]
viewport = "800x600"
tabs = 8
kept_answers = 0
[[sheets]]
match = ["domain:app.example"]
capture = "browser"
'''))
    assert cfg.crawl.capture == "auto" and cfg.browser.tabs == 8 and cfg.browser.kept_answers == 0
    assert config.viewport(cfg.browser.viewport) == (800, 600)
    assert config.site_crawl(cfg.crawl, cfg.sheets[0]).capture == "browser"


def test_replay_keys_load(tmp_path):
    cfg = config.load(write(tmp_path, '''
[replay]
listen = "[::1]:9000"
content_listen = "9001"
base_url = "https://archive.example.org/wayback/"
content_origin = "https://content.example.org"
scan_max_rows = 10
'''))
    assert (cfg.replay.listen, cfg.replay.content_listen) == ("[::1]:9000", "9001")
    assert config.parse_listen(cfg.replay.content_listen) == ("127.0.0.1", 9001)
    assert cfg.replay.base_url == "https://archive.example.org/wayback/"
    assert config.public_url(cfg.replay.base_url, origin_only=False) == "https://archive.example.org/wayback"
    assert cfg.replay.scan_max_rows == 10


@pytest.mark.parametrize("text, needle", [
    ('[store]\nurl = "mysql://db/archive"\n', 'store.url: "sqlite", or a URL postgresql://'),
    ('[store]\nurl = "postgresql://archiver:secret@db/archive"\n', "store.url: no password here"),
    ('[store]\nurl = "postgresql://archiver@db/archive?password=secret"\n',
     "store.url: no password parameter"),
    ('[store]\nurl = "postgresql://archiver@db/archive?sslmode=require&sslpassword=secret"\n',
     "store.url: no sslpassword parameter"),
    ('[store]\nurl = "postgresql://archiver@db/archive?Pass%77ord=secret"\n',
     "store.url: no password parameter"),
    ('[store]\nurl = "postgresql://archiver@db/archive?options=x&PASSWORD="\n',
     "store.url: no password parameter"),
    ('[store]\nurl = "postgresql://archiver@db/archive?dbname=host%3Dh%20password%3Dsecret"\n',
     "store.url: the dbname parameter holds a password setting"),
    ('[store]\nurl = "postgresql://archiver@db/host=h%20password=secret"\n',
     "store.url: the database name holds a password setting"),
    ('[store]\nurl = "host=db dbname=archive password=secret"\n',
     'store.url: "sqlite", or a URL postgresql://'),
    ('[store]\nurl = "postgresql://archiver@db:99999/archive"\n', "store.url: not a URL"),
    ('[store]\nurl = "postgresql://archiver@db1:5432,db2:99999/archive"\n', "store.url: not a URL"),
    ('[store]\nurl = "postgresql://archiver:secret@db1:5432,db2:5433/archive"\n',
     "store.url: no password here"),
    ("[store]\nretry_max = 0\n", "store.retry_max: must be greater than 0"),
    ('[store]\nurl = "postgresql://archiver@db/"\n', "store.url: name the database"),
    ('[warc]\nstore = "s3://A_Bucket/x"\n', "warc.store: 'A_Bucket' is not an S3 bucket name"),
    ('[warc]\nstore = "s3:///x"\n', "warc.store: 's3:///x' is not s3://bucket/prefix"),
    ('[s3]\nendpoint_url = "minio:9000"\n', "s3.endpoint_url:"),
    ("[crawl]\nlease_ttl = 0\n", "crawl.lease_ttl: must be greater than 0"),
    ("[warc]\nmax_age = -1\n", "warc.max_age: must be greater than 0"),
    ("[warc]\nmax_size = 1000\nlocal_limit = 1999\n", "warc.local_limit: must be at least twice"),
    ("[s3]\ntimeout = 0\n", "s3.timeout: must be greater than 0"),
])  # fmt: skip
def test_store_keys_are_checked(tmp_path, text, needle):
    with pytest.raises(config.ConfigError, match=re.escape(needle)) as refused:
        config.load(write(tmp_path, text))
    assert "secret" not in str(refused.value)
    if "password" in needle:
        assert "PGPASSWORD, ~/.pgpass or the file PGPASSFILE names" in str(refused.value)


def test_store_keys_load(tmp_path):
    cfg = config.load(write(tmp_path, '''
[store]
url = "postgresql://archiver@127.0.0.1:5432/archive"
[warc]
store = "s3://archive-bundles/crawl/2026/"
max_age = 600
[s3]
endpoint_url = "http://127.0.0.1:9000"
[crawl]
lease_ttl = 90
'''))
    assert config.database_url(cfg.store.url) == "postgresql://archiver@127.0.0.1:5432/archive"
    assert config.parse_s3_url(cfg.warc.store) == ("archive-bundles", "crawl/2026")
    assert (cfg.warc.max_age, cfg.crawl.lease_ttl) == (600.0, 90.0)
    assert config.database_url(config.Config().store.url) is None
    assert cfg.store.retry_max == 10.0
    # A primary and its standby: libpq connects to the host that takes writes.
    failover = "postgresql://archiver@db1:5432,[::1]:5433,db3/archive?target_session_attrs=read-write"
    assert config.database_url(failover) == failover
    folder = config.load(write(tmp_path, '[warc]\nstore = "bundles"\n'))
    assert folder.warc.store == str(tmp_path / "bundles")


def test_operator_gatekeeper_rules_are_read_in_their_order(tmp_path):
    cfg = config.load(write(tmp_path, "[[crawl.gatekeeper_rules]]\nkind = 'challenge'\nname = 'gate'\n"
                                      "header = 'X-Gate'\n[[crawl.gatekeeper_rules]]\nkind = 'block'\n"
                                      "name = 'wall'\nstatus = [403]\nbody = 'Go away'\n"))
    first, second = cfg.crawl.gatekeeper_rules
    assert (first.kind, first.name, first.header, second.name, second.status) == (
        "challenge", "gate", "x-gate", "wall", frozenset({403}))
    assert cfg.crawl.gatekeepers


def test_operator_fuzzy_rules_are_read_in_their_order(tmp_path):
    cfg = config.load(write(tmp_path, "[[replay.fuzzy_rules]]\nname = 'search'\nhost = 'example.org'\n"
                                      "keep = ['Q']\n[[replay.fuzzy_rules]]\nname = 'b'\nignore = ['x']\n"))
    first, second = cfg.replay.fuzzy_rules
    assert (first.name, first.host, first.keep, second.name, second.ignore) == (
        "search", "example.org", frozenset({"q"}), "b", frozenset({"x"}))


@pytest.mark.parametrize("sheet, needle", [
    ('logged_in = "Log out"\n', 'logged_in: needs login = "basic", "digest" or "form"'),
    ('login = "oauth"\ncredentials = "m"\n', 'login: must be "basic", "digest" or "form"'),
    ('login = "basic"\n', "credentials: name the table of the credentials file"),
    ('login = "form"\ncredentials = "m"\n', "login_url: a form login needs it"),
    ('login = "basic"\ncredentials = "m"\nlogin_url = "/login"\n', 'login_url: only for login = "form"'),
    ('login = "form"\ncredentials = "m"\nlogin_url = "/l"\nusername_field = "u"\n'
     'password_field = "p"\nlogin_success = "ok"\nlogin_fields = ["a"]\n',
     "login_fields: expected a table of strings"),
    ('login = "basic"\ncredentials = "m"\nsession_scope = ["re:("]\n', "session_scope:"),
    ('login = "basic"\ncredentials = "m"\n', "credentials: no credentials file (set"),
])  # fmt: skip
def test_sheet_logins_are_checked(tmp_path, monkeypatch, sheet, needle):
    monkeypatch.delenv("ARCHIVER_CREDENTIALS_FILE", raising=False)
    with pytest.raises(config.ConfigError, match=re.escape(needle)):
        config.load(write(tmp_path, '[[sheets]]\nmatch = ["host:a.org"]\n' + sheet))


def _credentials(tmp_path, mode=0o600):
    path = tmp_path / "credentials.toml"
    path.write_text('[members]\nusername = "archivist"\npassword = "s3cret-pass"\n')
    path.chmod(mode)
    return path


def test_a_sheet_login_reads_its_credentials_and_never_shows_them(tmp_path, monkeypatch):
    monkeypatch.delenv("ARCHIVER_CREDENTIALS_FILE", raising=False)
    path = _credentials(tmp_path)
    cfg = config.load(write(tmp_path, f'''
[crawl]
credentials_file = "{path}"
[[sheets]]
match = ["host:a.org"]
login = "form"
credentials = "members"
login_url = "/login"
username_field = "user"
password_field = "pass"
login_fields = {{ remember = "1" }}
login_success = "Welcome"
logged_in = "Log out"
session_scope = ["re:https?://a\\\\.org/members/.*"]
'''))
    login = cfg.sheets[0].login
    assert login is not None and login.method == "form" and login.fields == (("remember", "1"),)
    assert login.checks("http://a.org/members/p1") and not login.checks("http://a.org/about")
    assert cfg.credentials["members"].username == "archivist"
    assert "s3cret-pass" not in repr(cfg) and "s3cret-pass" not in str(cfg.credentials)


def test_credentials_are_refused_when_others_may_read_them(tmp_path, monkeypatch):
    path = _credentials(tmp_path, 0o644)
    monkeypatch.setenv("ARCHIVER_CREDENTIALS_FILE", str(path))
    with pytest.raises(config.ConfigError, match=re.escape("crawl.credentials_file")):
        config.load(write(tmp_path, "[crawl]\n"))


def test_a_sheet_naming_a_missing_table_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHIVER_CREDENTIALS_FILE", str(_credentials(tmp_path)))
    with pytest.raises(config.ConfigError, match=re.escape("has no table [staff]")):
        config.load(write(tmp_path, '[[sheets]]\nmatch = ["host:a.org"]\nlogin = "basic"\n'
                                    'credentials = "staff"\n'))
