"""The one service runner (archiver.service) under real signals sent to this process, and the
process locks every role takes through the stores."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

from archiver.config import Config, load
from archiver.service import Service
from archiver.stores import ProcessBusy, open_stores


def write_config(directory: Path, log_level: str = "info", drain: float = 30.0) -> Config:
    path = directory / "archiver.toml"
    path.write_text(f'[archive]\nroot = "archive"\n[log]\nlevel = "{log_level}"\n'
                    f"[crawl]\ndrain_timeout = {drain}\n", encoding="utf-8")
    return load(path)


def send(signum: signal.Signals) -> None:
    os.kill(os.getpid(), signum)


async def test_the_first_stop_signal_asks_the_main_task_to_finish(tmp_path):
    service = Service(write_config(tmp_path), on_stop=lambda: stops.append("asked"))
    stops: list[str] = []

    async def main() -> None:
        send(signal.SIGTERM)
        await service.stopping.wait()

    await service.run(main)
    assert stops == ["asked"] and not service.drain_expired


async def test_the_drain_deadline_cancels_a_main_task_that_does_not_finish(tmp_path):
    service = Service(write_config(tmp_path), drain_timeout=lambda config: 0.05)
    finished = []

    async def main() -> None:
        send(signal.SIGINT)
        await trio.sleep_forever()
        finished.append(True)

    await service.run(main)
    assert service.stopping.is_set() and service.drain_expired and not finished


async def test_a_second_signal_cancels_at_once(tmp_path):
    service = Service(write_config(tmp_path), on_stop=lambda: send(signal.SIGTERM))

    async def main() -> None:
        send(signal.SIGTERM)
        await trio.sleep_forever()

    await service.run(main)  # no drain limit: only the second signal can end it
    assert service.stopping.is_set() and not service.drain_expired


async def test_sighup_rereads_the_config_and_a_bad_file_changes_nothing(tmp_path):
    config = write_config(tmp_path, drain=30.0)
    seen: list[Config] = []
    reloaded = trio.Event()

    def on_reload(new: Config) -> None:
        seen.append(new)
        reloaded.set()

    service = Service(config, on_reload=on_reload)

    async def main() -> None:
        nonlocal reloaded
        write_config(tmp_path, drain=7.0)
        send(signal.SIGHUP)
        await reloaded.wait()
        assert service.config.crawl.drain_timeout == 7.0
        assert config.path is not None
        config.path.write_text("root = [\n", encoding="utf-8")  # not TOML
        service.reload()                                        # what SIGHUP does
        send(signal.SIGTERM)
        await service.stopping.wait()

    await service.run(main)
    assert [c.crawl.drain_timeout for c in seen] == [7.0]
    assert service.config.crawl.drain_timeout == 7.0


def test_a_role_lock_is_held_until_released(tmp_path):
    stores = open_stores(write_config(tmp_path))
    held = stores.lock("links")
    with pytest.raises(ProcessBusy, match="links is already running"):
        stores.lock("links")
    crawler = stores.lock("crawl", 3)
    with pytest.raises(ProcessBusy, match="crawler process 3 is already running"):
        stores.lock("crawl", 3)
    stores.lock("crawl", 4).release()  # another number is another lock
    held.release()
    crawler.release()
    stores.lock("links").release()
    stores.lock("crawl", 3).release()


async def test_what_the_main_task_raises_comes_out_as_it_is(tmp_path):
    async def main():
        raise RuntimeError("the archive's state is unreadable")

    with pytest.raises(RuntimeError, match="state is unreadable"):   # not in an exception group
        await Service(write_config(tmp_path)).run(main)
