"""How long one task step held the crawler's event loop: a trio Instrument.

A trio task runs until its next checkpoint, and while it runs no other task can: a step that waits on
another process's SQLite lock or on the disk stalls every site slot of the process (their timeouts and
rests run late). :class:`LoopWatch` times every task step with two clock reads and keeps the longest,
the name of the task that took it, and how many steps took ``threshold`` or longer.
"""

from __future__ import annotations

import time

import trio


class LoopWatch(trio.abc.Instrument):
    """The longest task step since start (seconds), whose it was, and how many were long."""

    def __init__(self, threshold: float = 0.1) -> None:
        self.threshold = threshold
        self.longest = 0.0
        self.longest_task = ""
        self.long_steps = 0  # steps of ``threshold`` seconds or more
        # perf_counter() at the start of the step under way; now, for a watch added during a step
        # (its first after_task_step then times the rest of that step).
        self.step_started = time.perf_counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.step_started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        took = time.perf_counter() - self.step_started
        if took >= self.threshold:
            self.long_steps += 1
        if took > self.longest:
            self.longest = took
            self.longest_task = task.name
