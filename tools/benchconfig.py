"""The archiver.toml the crawl benchmarks share: the demo web on 127.0.0.1, no rests."""

from __future__ import annotations

import json


def demo_config(**crawl: object) -> str:
    """An archiver.toml for a benchmark crawl of the demo web, with ``crawl`` as more [crawl] keys."""
    extra = "".join(f"{key} = {json.dumps(value)}\n" for key, value in crawl.items())
    return f"""\
[archive]
root = "archive"
[crawl]
# Every demo site lives on 127.0.0.1: allow one connection per site, not per address.
connections_per_address = 64
allowed_networks = ["127.0.0.0/8"]
min_rest = 0.0
max_rest = 0.0
rest_factor = 0.0
retry_delay = 0.5
site_retries = 1
{extra}[dns]
hosts_file = "hosts"
nameservers = ["127.0.0.1:9"]
[log]
level = "warning"
"""
