"""WARC bundles: the `warcio check` command passes on a bundle."""

import subprocess
import sys
from pathlib import Path

from archiver.config import WarcConfig
from archiver.store.bundles import BundleWriter
from tests.support.warcexchanges import DATE, EXCHANGES, check, write_all


def test_warcio_check_command_passes(tmp_path):
    with BundleWriter(tmp_path, WarcConfig()) as writer:
        written = write_all(writer)
        writer.write_metadata(url="http://example.org/", date=DATE, fields={"reason": "x"})
    path = tmp_path / written[0].response.filename
    warcio = Path(sys.executable).with_name("warcio")
    result = subprocess.run(
        [str(warcio), "check", "-v", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("digest pass") == 2 + 2 * len(EXCHANGES)
    assert "fail" not in result.stdout
    assert check(path) == (0, 2 + 2 * len(EXCHANGES))
