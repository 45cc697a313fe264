"""The replay serves an archive mounted read-only, as systemd's ReadOnlyPaths= gives it, once the
crawler that wrote it has stopped: the SQLite catalog shards and the DNS history must be readable
without their WAL index, which a reader could not create there."""

from __future__ import annotations

import trio

from tests.support.crawls import write_config
from tests.support.onesite import HOST, OneSite
from tests.support.rawhttp import get
from tests.support.replayprocess import replay_process
from tests.support.repo import ARCHIVER


async def test_replay_reads_a_read_only_archive(tmp_path):
    site = OneSite(pages=2)
    async with trio.open_nursery() as nursery:
        await site.serve(nursery)
        path = write_config(tmp_path, site)
        path.write_text(path.read_text() + '[replay]\nlisten = "127.0.0.1:0"\n'
                        'content_listen = "127.0.0.1:0"\n')
        (tmp_path / "seeds.txt").write_text(site.origin + "/\n")
        await trio.run_process([*ARCHIVER, "crawl", "run", "--config", str(path), "--seeds",
                                str(tmp_path / "seeds.txt"), "--until-idle"], capture_stderr=True)
        nursery.cancel_scope.cancel()
    root = tmp_path / "archive"
    assert not list(root.rglob("*-wal")) and not list(root.rglob("*-shm"))   # closed cleanly

    # A private mount namespace where the archive is a read-only bind mount of itself.
    script = (f'mount --bind "{root}" "{root}" && mount -o remount,bind,ro "{root}" && '
              f'exec "$@"')
    async with replay_process(path, wrapper=["unshare", "--mount", "sh", "-c", script, "sh"]) as replay:
        app, content = replay.app, replay.content
        assert (await get(app, "/"))[0] == 200 and (await get(content, "/"))[0] == 404  # /web/ alone
        status, headers, _ = await get(content, f"/web/2100id_/{site.origin}/p1.html")
        assert status == 302                                # to the capture's own timestamp
        status, _, body = await get(content, headers["location"].removeprefix(content))
        assert status == 200 and b"page /p1.html" in body
        status, _, body = await get(app, f"/dns/{HOST}?format=json")
        assert status == 200 and b"127.0.0.1" in body
        status, _, body = await get(app, f"/cdx?url={site.origin}/*&output=json")
        assert status == 200 and b"p2.html" in body
        assert b"readonly database" not in replay.log and b"Traceback" not in replay.log, replay.log[-2000:]
