"""A progress line for the command-line jobs (`dgemm-cache` verify/push/pull/export, prewarm):
redrawn in place on a terminal, a line per tenth of the work in a log. Writes to stderr, so
--json output on stdout stays clean."""
from __future__ import annotations

import sys
import time


class Progress:
    """One redrawn line on a terminal; in a log (not a TTY), a line per tenth of the work."""

    WIDTH = 24

    def __init__(self, label: str, total: int, enabled: bool = True, stream=None):
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.is_tty = self.enabled and self.stream.isatty()
        self.started = time.monotonic()
        self._last_tenth = 0

    def advance(self, summary: str = "") -> None:
        self.done += 1
        if not self.enabled:
            return
        tenth = self.done * 10 // self.total
        if self.is_tty:
            self.stream.write("\r" + self._line(summary))
        elif tenth != self._last_tenth:
            self.stream.write(self._line(summary) + "\n")
        self._last_tenth = tenth
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.is_tty:
            self.stream.write("\n")
            self.stream.flush()

    def _line(self, summary: str) -> str:
        filled = self.WIDTH * self.done // self.total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        elapsed = time.monotonic() - self.started
        return f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:6.1f}s  {summary}"
