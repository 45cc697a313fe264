"""The systemd units in systemd/: `systemd-analyze verify` and `security`, the sysusers and
tmpfiles entries, and the archiver command lines the units run.

systemd-analyze works without root and without systemd as PID 1: it loads unit files from the
folders of the files it is given. It checks that ExecStart= programs exist, so the units are
verified as copies whose /opt/archiver/venv/bin/archiver is this test's Python interpreter.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.systemdunits import INSTALLED, SERVICES, UNIT_FILES, UNITS, directives, one

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")


def copies(directory: Path, program: str = sys.executable) -> list[Path]:
    """The units copied into ``directory`` with ``program`` as the installed archiver."""
    paths = []
    for name in UNIT_FILES:
        path = directory / name
        path.write_text((UNITS / name).read_text().replace(INSTALLED, program))
        paths.append(path)
    return paths


def verify(paths: list[Path]) -> tuple[int, str]:
    """``systemd-analyze verify``: exit code and everything it said (clean means 0 and nothing)."""
    assert ANALYZE is not None
    done = subprocess.run(
        [ANALYZE, "verify", *map(str, paths)], capture_output=True, text=True, timeout=60, cwd=paths[0].parent
    )
    return done.returncode, done.stdout + done.stderr


@needs_analyze
def test_units_verify_clean(tmp_path):
    paths = copies(tmp_path)
    assert {p.name for p in paths} >= {
        "archiver-crawl@.service",
        "archiver-dns.service",
        "archiver-links.service",
        "archiver-links.timer",
        "archiver-replay.service",
        "archiver.target",
    }
    assert verify(paths) == (0, "")


@needs_analyze
@pytest.mark.parametrize("broken", ["misspelled directive", "missing program"])
def test_verify_catches_a_broken_unit(tmp_path, broken):
    if broken == "misspelled directive":
        paths = copies(tmp_path)
        unit = tmp_path / "archiver-crawl@.service"
        unit.write_text(unit.read_text().replace("NoNewPrivileges=", "NoNewPrivilegs="))
        expected = "Unknown key 'NoNewPrivilegs'"
    else:
        paths = copies(tmp_path, program=str(tmp_path / "no-such-archiver"))
        expected = "is not executable"
    code, said = verify(paths)
    assert (code, said) != (0, "")
    assert expected in said


@needs_analyze
@pytest.mark.parametrize("broken", [False, True])
def test_the_shared_stores_drop_in_verifies_with_every_service(tmp_path, broken):
    paths = copies(tmp_path)
    text = (UNITS / "shared-stores.conf").read_text()
    if broken:  # proves systemd-analyze reads the drop-ins it is shown
        text = text.replace("LoadCredential=", "LoadCredentail=", 1)
    for service in SERVICES:
        drop_in = tmp_path / f"{service}.d" / "shared-stores.conf"
        drop_in.parent.mkdir()
        drop_in.write_text(text)
    code, said = verify(paths)
    assert ((code, said) == (0, "")) != broken, said
    if broken:
        assert "Unknown key 'LoadCredentail'" in said


@needs_analyze
@pytest.mark.parametrize("broken", [False, True])
def test_the_links_dask_drop_in_verifies_and_keeps_exposure_low(tmp_path, broken):
    copies(tmp_path)
    text = (UNITS / "links-dask.conf").read_text()
    if broken:  # proves systemd-analyze reads the drop-in it is shown
        text = text.replace("TasksMax=", "TaskMax=", 1)
    drop_in = tmp_path / "archiver-links.service.d" / "links-dask.conf"
    drop_in.parent.mkdir()
    drop_in.write_text(text)
    code, said = verify([tmp_path / "archiver-links.service"])
    assert ((code, said) == (0, "")) != broken, said
    if broken:
        assert "Unknown key 'TaskMax'" in said
        return
    done = subprocess.run(
        [ANALYZE, "security", "--offline=yes", "--threshold=20",
         str(tmp_path / "archiver-links.service")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_analyze
@pytest.mark.parametrize("service", SERVICES)
def test_exposure_stays_low(tmp_path, service):
    copies(tmp_path)
    # --threshold is in tenths: the unit fails above an exposure of 2.0 ("OK" in systemd's words;
    # 10 is a service with no sandboxing at all).
    done = subprocess.run(
        [ANALYZE, "security", "--offline=yes", "--threshold=20", str(tmp_path / service)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    level = re.search(r"Overall exposure level for \S+: (\d+\.\d)", done.stdout)
    assert level, done.stdout + done.stderr
    assert done.returncode == 0, f"{service}: exposure {level[1]}"


# The batch's compiled loops loaded as the batch loads them, in a child; with "mdwe", after asking
# the kernel to refuse this process what MemoryDenyWriteExecute=yes refuses (prctl PR_SET_MDWE,
# PR_MDWE_REFUSE_EXEC_GAIN: Linux 6.3 and later).
_LOAD_LOOPS = """
import ctypes, sys
if sys.argv[1] == "mdwe":
    assert ctypes.CDLL(None, use_errno=True).prctl(65, 1, 0, 0, 0) == 0, "PR_SET_MDWE refused"
from archiver.links import steps
try:
    steps.load_kernels()
except PermissionError as e:
    sys.exit(f"refused: {e}")
"""


def load_loops(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _LOAD_LOOPS, *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})


def test_the_links_batch_runs_without_memory_deny_write_execute_and_caches_its_loops(tmp_path):
    # Every other unit keeps it; the batch's compiled loops (numba) cannot load under it.
    for service in SERVICES:
        expected = [] if service == "archiver-links.service" else ["yes"]
        assert directives(service).get("Service.MemoryDenyWriteExecute", []) == expected, service
    refused = load_loops(tmp_path / "refused", "mdwe")
    assert refused.returncode == 1, refused.stderr
    assert "cannot allocate executable memory" in refused.stderr
    # Without it they load, and numba keeps them where NUMBA_CACHE_DIR says: the unit's cache.
    loaded = load_loops(tmp_path / "cache", "-")
    assert loaded.returncode == 0, loaded.stderr
    assert any((tmp_path / "cache").rglob("*bloomkernel*.nbi"))
    assert one("archiver-links.service", "Service.CacheDirectory") == "archiver"
    assert one("archiver-links.service", "Service.Environment") == "NUMBA_CACHE_DIR=%C/archiver/numba"


@pytest.mark.skipif(
    not (shutil.which("systemd-sysusers") and shutil.which("systemd-tmpfiles")),
    reason="systemd-sysusers or systemd-tmpfiles is not installed",
)
def test_sysusers_and_tmpfiles_make_the_user_and_the_archive_root(tmp_path):
    (tmp_path / "etc").mkdir()
    made = subprocess.run(
        ["systemd-sysusers", f"--root={tmp_path}", str(UNITS / "archiver.sysusers.conf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    (user,) = [
        line.split(":")
        for line in (tmp_path / "etc/passwd").read_text().splitlines()
        if line.startswith("archiver:")
    ]
    assert user[5:] == ["/var/lib/archiver", "/usr/sbin/nologin"]
    assert int(user[2]) < 1000  # a system user
    made = subprocess.run(
        ["systemd-tmpfiles", f"--root={tmp_path}", "--create", str(UNITS / "archiver.tmpfiles.conf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    root = tmp_path / "var/lib/archiver"
    assert stat.S_IMODE(root.stat().st_mode) == 0o750
    assert int(one("archiver-crawl@.service", "Service.StateDirectoryMode"), 8) == 0o750
    if os.geteuid() == 0:
        assert made.returncode == 0, made.stderr
        assert (root.stat().st_uid, root.stat().st_gid) == (int(user[2]), int(user[3]))
    else:
        # Only the chown to the new user is refused; the user name resolved in the new root.
        assert all("fchownat" in line for line in made.stderr.splitlines()), made.stderr
