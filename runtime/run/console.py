"""A console line while a long stage lasts: the first once it has lasted ``first_s``, then
one every ``every_s``, printed by a thread until the stage ends. Sebulba's learner
(``sebulba.progress``) and Anakin's compile (``runtime.run.directory.RunDir.compiling``) use it.
See docs/design.md, "Anakin calls", and docs/design.md, "Sebulba layout".
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable


def clock(seconds: float) -> str:
    """``h:mm:ss``."""
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Ticker:
    """Prints ``line(now)`` on stderr when due (one write: whole, beside the main thread's
    lines); None from ``line``: nothing to say this time.

    Args:
      line: the line at ``time.perf_counter()`` ``now``, or None.
      first_s: the first line is due this long after the start (or ``restart``).
      every_s: then one this often.
      tick_s: how often the thread looks (default: every second, or a tenth of the
        periods where they are shorter).
      enabled: print (process 0); otherwise no thread runs.
    """

    def __init__(self, line: Callable[[float], str | None], *, first_s: float,
                 every_s: float, tick_s: float | None = None, enabled: bool = True):
        self._line = line
        self._first_s, self._every_s = first_s, every_s
        self._tick_s = min(1.0, first_s / 10, every_s / 10) if tick_s is None else tick_s
        self._lock = threading.Lock()
        self._due = time.perf_counter() + first_s
        self._closed = threading.Event()
        self._thread = None
        if enabled:
            self._thread = threading.Thread(target=self._run, name="console-ticker",
                                            daemon=True)
            self._thread.start()

    def restart(self, now: float) -> None:
        """A new stage began at ``now``: its first line is due ``first_s`` later."""
        with self._lock:
            self._due = now + self._first_s

    def _run(self) -> None:
        while not self._closed.wait(self._tick_s):
            now = time.perf_counter()
            with self._lock:
                due = now >= self._due
                if due:
                    self._due = now + self._every_s
            line = self._line(now) if due else None
            if line is not None:
                stream = sys.stderr
                with contextlib.suppress(ValueError, OSError):  # a stream closed meanwhile
                    stream.write(line + "\n")
                    stream.flush()

    def close(self) -> None:
        """Stops the thread."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def __enter__(self) -> "Ticker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
