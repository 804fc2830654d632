"""SIGINT and SIGTERM honoured at every stage of a run, in seconds.

A training loop acts on a signal after its current call: it checkpoints and exits 130/143
(``runtime.rundir.RunDir.checkpoint_or_exit``). Sebulba in one process acts while it waits
on its update in flight: it abandons that update and checkpoints the last completed one
(``sebulba.train.train``). Elsewhere nothing would act on it, and
while the main thread is inside a library call (a compile, a long first call) Python runs no
handler at all. So, while ``Signals`` is installed:

- before the loop (validation, building the run, restoring): the handler exits at once
  (``SystemExit`` 130/143, as SIGINT's default ``KeyboardInterrupt`` would);
- in the loop (``Signals.loop()``, which the loop's ``SignalFlag`` calls): the handler
  records the code for the loop to act on;
- a watcher thread wakes on every signal (``signal.set_wakeup_fd``: the C-level handler
  writes there even while the main thread is busy) and, when the loop has not begun to act
  within ``GRACE_S`` (``acting()``, called as it starts its final checkpoint), prints one line
  and ends the process with the code (``os._exit``: metrics lines are written line by line;
  the last checkpoint on disk stays, a save cut short is never taken as a step);
- a second signal ends the process at once the same way (the watcher sees it too). One
  that comes within ``DUPLICATE_S`` of the first is the same signal delivered twice, not a
  second one: ``timeout`` signals its command and then the command's process group, and a
  terminal's Ctrl-C reaches a launcher and its processes alike.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time

from runtime.exits import EXIT_SIGINT, EXIT_SIGTERM

CODES = {signal.SIGINT: EXIT_SIGINT, signal.SIGTERM: EXIT_SIGTERM}
GRACE_S = 8.0  # the loop's time to begin acting on a signal before the watcher ends the run
DUPLICATE_S = 0.5  # a signal this soon after the first is the same one delivered twice


class Signals:
    """Process-wide signal state of one run (``install`` once, from the main thread).

    Attributes:
      exit_code: 130 / 143 once SIGINT / SIGTERM came, else None.
      phase: what the run is doing, for the watcher's line (``"starting"``, ``"training"``).
    """

    def __init__(self):
        self.exit_code: int | None = None
        self.first_at: float | None = None  # time.monotonic() of the first signal
        self.phase = "starting"
        self._in_loop = False
        self._acting = threading.Event()
        self._previous: dict = {}
        self._previous_fd = -1
        self._pipe: tuple[int, int] | None = None

    # -- installing -------------------------------------------------------------------------

    def install(self) -> bool:
        """Installs the handlers and the watcher; False (nothing done) off the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)
        self._previous_fd = signal.set_wakeup_fd(w)
        for sig in CODES:
            self._previous[sig] = signal.signal(sig, self._handle)
        threading.Thread(target=self._watch, args=(r,), name="signal-watcher",
                         daemon=True).start()
        return True

    def uninstall(self) -> None:
        """Puts the previous handlers back and stops the watcher."""
        if self._pipe is None:
            return
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._previous_fd)
        r, w = self._pipe
        self._pipe = None
        os.close(w)  # the watcher's read returns b"" and it ends (it closes r)

    # -- what the loop says -----------------------------------------------------------------

    def loop(self) -> None:
        """The training loop runs from here on: a signal is recorded for it to act on."""
        self.phase, self._in_loop = "training", True

    def acting(self) -> None:
        """The loop has begun acting on the signal (its final checkpoint, then exit)."""
        self._acting.set()

    # -- the handler and the watcher --------------------------------------------------------

    def _handle(self, signum, frame):
        del frame
        if self.exit_code is not None:
            if time.monotonic() - self.first_at < DUPLICATE_S:
                return  # the first signal delivered twice
            _end(self.exit_code, f"{signal.Signals(signum).name} again: stopped at once, "
                                 "without a new checkpoint")
        self.exit_code, self.first_at = CODES[signum], time.monotonic()
        if not self._in_loop:
            raise SystemExit(self.exit_code)

    def _watch(self, r: int) -> None:
        wanted = {int(sig) for sig in CODES}
        seen: list[int] = []
        first_at = 0.0
        deadline = None
        while True:
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if select.select([r], [], [], min(timeout, 0.05) if timeout is not None
                             else None)[0]:
                try:
                    data = os.read(r, 16)
                except OSError:
                    data = b""
                if not data:  # uninstalled
                    os.close(r)
                    return
                ours = [b for b in data if b in wanted]  # other handlers' signals: not ours
                now = time.monotonic()
                if ours and not seen:
                    seen, first_at = ours[:1], now  # copies within DUPLICATE_S: the same one
                elif ours and now - first_at >= DUPLICATE_S:
                    seen += ours
                if len(seen) >= 2:
                    _end(self.exit_code or CODES[signal.Signals(seen[0])],
                         f"{signal.Signals(seen[-1]).name} again: stopped at once, without a "
                         "new checkpoint")
                if ours and deadline is None:
                    deadline = time.monotonic() + GRACE_S
            if self._acting.is_set():
                deadline = None  # the loop acts; only a second signal ends it early now
            if deadline is not None and time.monotonic() >= deadline:
                name = signal.Signals(seen[0]).name
                _end(self.exit_code or CODES[signal.Signals(seen[0])],
                     f"{name} during {self.phase}: stopped without a new checkpoint (the run "
                     f"reached no point to save within {GRACE_S:g} s)")


# Held by the first caller of ``_end`` until the process ends: the handler (main thread) and
# the watcher can both see a second signal, and only one of them may print its line.
_ENDING = threading.Lock()


def _end(code: int, line: str) -> None:
    """One line on stderr, then the process ends with ``code`` (no cleanup runs). A second
    caller (another thread) waits here until the first has ended the process."""
    _ENDING.acquire()
    try:
        print(line, file=sys.stderr, flush=True)
    finally:
        os._exit(code)


_current: Signals | None = None


def current() -> Signals | None:
    """The installed ``Signals`` of this process, or None."""
    return _current


def start() -> tuple[Signals, bool]:
    """The installed ``Signals``, installing one first where there is none: ``(signals,
    installed_here)``. Off the main thread nothing is installed (its handlers never run)."""
    global _current
    if _current is not None:
        return _current, False
    signals = Signals()
    if not signals.install():
        return signals, False
    _current = signals
    return signals, True


def finish(signals: Signals) -> None:
    """Uninstalls ``signals`` (one ``start`` installed)."""
    global _current
    signals.uninstall()
    if _current is signals:
        _current = None


class SignalFlag:
    """The training loop's view of SIGINT/SIGTERM: records a signal instead of dying, so
    the loop can checkpoint and exit.

    ``exit_code`` is 130 after SIGINT and 143 after SIGTERM (``None`` when no signal came).
    Use as a context manager around the loop: it installs the process's ``Signals`` where
    the command has not (and uninstalls them on exit then). Only the main thread can install
    handlers; elsewhere it records nothing.
    """

    def __init__(self):
        self._signals = None
        self._installed = False

    @property
    def exit_code(self) -> int | None:
        return None if self._signals is None else self._signals.exit_code

    def acting(self) -> None:
        """The loop begins acting on the signal: the watcher lets it finish."""
        if self._signals is not None:
            self._signals.acting()

    def __enter__(self):
        self._signals, self._installed = start()
        self._signals.loop()
        return self

    def __exit__(self, *exc):
        if self._installed:
            finish(self._signals)
        return False
