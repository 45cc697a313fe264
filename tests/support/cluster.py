"""Configs for crawler processes that share one PostgreSQL store and one S3 bucket."""

from __future__ import annotations

from pathlib import Path

from tests.support.crawls import HasHosts, write_config
from tests.support.objectstore import S3Bucket


def shared_config(directory: Path, web: HasHosts, *, store_url: str, bucket: S3Bucket,
                  warc: dict[str, object] | None = None, **crawl: object) -> Path:
    """A config for one machine of a cluster: its own ``directory/archive``, the shared store and
    bucket. ``warc`` adds [warc] keys (max_age, sync_interval...)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = write_config(directory, web, **crawl)
    extra = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in (warc or {}).items())
    path.write_text(path.read_text() + (
        f'[store]\nurl = "{store_url}"\n'
        f'[warc]\nstore = "s3://{bucket.name}/crawl"\n{extra}'
        f'[s3]\nendpoint_url = "{bucket.endpoint}"\nregion = "us-east-1"\n'))
    return path
