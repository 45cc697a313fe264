"""No spool content can stop the external-link batch: every per-line failure is a counted bad line."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archiver.links.batch import run_batch
from tests.support.fuzzing import examples
from tests.support.linkbatch import links_config, write_spool

STAMP = "20261122000000"
LONG_HOST = ".".join(["a" * 62] * 4)  # 251 characters: a valid name, too long for a directory


_URLISH = st.one_of(
    st.text(max_size=60),
    st.builds(lambda h, p: f"http://{h}/{p}", st.text(max_size=300), st.text(max_size=40)),
    st.sampled_from(["http://a.test/", f"http://{LONG_HOST}/", "https://[::1]:8/x", "http://%zz/",
                     "http://xn--/", "http://a.test:99999/", "http://\x00/", "javascript:x"]),
)
_LINE = st.one_of(
    st.text(max_size=80),
    st.builds(lambda u, s, t: f"{u}\t{s}\t{t}", _URLISH,
              st.one_of(st.sampled_from(["http://x.test", "https://y.test:8443"]), st.text(max_size=30)),
              st.one_of(st.just(STAMP), st.text("0123456789", max_size=16))),
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, max_size=12), st.binary(max_size=64))
def test_no_spool_content_stops_the_batch(lines, raw):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = links_config(Path(tmp))
        path = write_spool(cfg.root, "0-20261122000000-00001.tsv",
                           [line.replace("\n", " ").replace("\r", " ") for line in lines])
        (cfg.root / "spool" / "1-20261122000001-00001.tsv").write_bytes(raw)
        totals = run_batch(cfg, once=True)
        assert totals.files == 2
        assert totals.new_urls + totals.bad <= totals.lines
        assert not path.exists() and (cfg.root / "spool" / "done" / path.name).exists()
