"""The repository the tests run from, and the archiver command they start as a child process."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHIVER = [sys.executable, "-m", "archiver"]
