"""The per-process logical clock.

One integer per process, advanced at every recorded event (a method's first
start, a send, a receive, a spawn). Execute-After only compares clocks within
a process and across message edges, so an integer is all a process needs;
cross-process order is rebuilt offline from the message pairs.
"""

from __future__ import annotations


class LogicalClock:
    """A counter; ``epoch`` is the clock at the last event that re-armed monitoring."""

    __slots__ = ("epoch", "value")

    def __init__(self) -> None:
        self.value = 0
        self.epoch = 0

    def tick(self) -> int:
        self.value += 1
        return self.value

    def reset(self) -> None:
        self.value = 0
        self.epoch = 0
