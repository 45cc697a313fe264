"""A synthetic multi-site web on 127.0.0.1 for archiver's demo, tests and benchmarks."""

from demoweb.model import HOSTILE_PATHS, DemoWeb, Link, Reply, RobotsGroup, WebSpec
from demoweb.server import DemoServer, RequestLog, run_demo_process, start_demo

__all__ = [
    "HOSTILE_PATHS",
    "DemoServer",
    "DemoWeb",
    "Link",
    "Reply",
    "RequestLog",
    "RobotsGroup",
    "WebSpec",
    "run_demo_process",
    "start_demo",
]
