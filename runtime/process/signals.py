"""SIGINT and SIGTERM honoured at every stage of a run, in seconds.

A training loop acts on a signal after its current call: it checkpoints and exits 130/143
(``runtime.run.directory.RunDir.checkpoint_or_exit``). Sebulba in one process acts while it waits
on its update in flight: it abandons that update and checkpoints the last completed one
(``sebulba.train.train``). Elsewhere nothing would act on it, and
while the main thread is inside a library call (a compile, a long first call) Python runs no
handler at all. So, while ``Signals`` is installed:

- before the loop (imports, validation, building the run, restoring) and while the loop
  compiles (``compiling()``): the handler, or the watcher where the main thread is inside a
  library call, ends the process at once with one line (``os._exit`` 130/143: an
  interpreter exit in the middle of an import or a compile races the native threads of XLA,
  Brax or MuJoCo and could crash; nothing new could be saved yet);
- in the loop (``Signals.loop()``, which the loop's ``SignalFlag`` calls): the handler
  records the code for the loop to act on;
- a watcher thread wakes on every signal (``signal.set_wakeup_fd``: the C-level handler
  writes there even while the main thread is busy) and, when the loop has not begun to act
  within its grace (``acting()``, called as it starts its final checkpoint), prints one line
  and ends the process with the code (``os._exit``: metrics lines are written line by line;
  the last checkpoint on disk stays, a save cut short is never taken as a step). The grace
  is ``GRACE_S``, or while a compiled call is in flight (``call_started``) the call's bound
  and ``GRACE_S`` after it: the watcher says at once that the call finishes and is saved;
- every line says what was kept and how to go on (``kept``: the last checkpoint, which the
  run directory notes, ``note_checkpoint``);
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

from runtime.process.exits import EXIT_SIGINT, EXIT_SIGTERM

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
        self.console = True  # this process prints the lines (process 0 of a run)
        self.workdir: bool | None = None  # whether the run saves (None: not known yet)
        self.checkpoint: int | None = None  # the last checkpoint on disk (0: none)
        self.announced = False  # the watcher said that the call in flight is saved
        self._call: tuple[int, int] | None = None  # the updates of the call in flight
        self._allow_until = 0.0  # time.monotonic() the watcher waits for at least
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

    def compiling(self) -> None:
        """The loop compiles before its first call or update: a signal ends the run at once
        (the state is the restored checkpoint's or the fresh one: nothing new to save)."""
        self.phase = "compiling"

    def compiled(self) -> None:
        """The compile is done: the loop acts on a signal again."""
        self.phase = "training"

    def call_started(self, first: int, last: int, bound_s: float) -> None:
        """A compiled call of updates ``first .. last`` begins and may take ``bound_s``: a
        signal meanwhile lets it finish and save (the watcher waits that long, and
        ``GRACE_S`` more)."""
        self.phase, self._call = "training", (first, last)
        self._allow_until = time.monotonic() + bound_s + GRACE_S

    def call_done(self) -> None:
        """The call in flight returned: the loop acts on a signal within ``GRACE_S``."""
        self._call, self._allow_until = None, time.monotonic() + GRACE_S

    def note_checkpoint(self, update: int | None, workdir: bool = True) -> None:
        """The run's last checkpoint on disk is ``update`` (0: none yet; None: not known
        yet); ``workdir``: whether the run saves at all."""
        self.checkpoint, self.workdir = update, workdir

    def kept(self) -> str:
        """What a run stopped now keeps, and how to go on."""
        if self.workdir is False:
            return "nothing is saved (no --workdir)"
        if self.checkpoint is None:
            return ("the workdir keeps what it held (its checkpoints, if any); run the same "
                    "command to resume or start again")
        if self.checkpoint == 0:
            return "no checkpoint yet; run the same command to start again"
        return (f"the checkpoint at update {self.checkpoint} is kept; run the same command "
                "to resume from it")

    # -- the handler and the watcher --------------------------------------------------------

    def _handle(self, signum, frame):
        del frame
        if self.exit_code is not None:
            if time.monotonic() - self.first_at < DUPLICATE_S:
                return  # the first signal delivered twice
            _end(self.exit_code, f"{signal.Signals(signum).name} again: stopped at once, "
                                 f"without a new checkpoint; {self.kept()}")
        self.exit_code, self.first_at = CODES[signum], time.monotonic()
        if not self._in_loop:
            self._end_now(signal.Signals(signum))

    def _watch(self, r: int) -> None:
        seen: list[int] = []  # our signals, copies within DUPLICATE_S counted once
        first_at = 0.0
        while True:
            if select.select([r], [], [], 0.05 if seen else None)[0]:
                data = _read(r)
                if not data:  # uninstalled
                    os.close(r)
                    return
                ours = [b for b in data if b in {int(sig) for sig in CODES}]
                now = time.monotonic()
                if ours and not seen:
                    seen, first_at = ours[:1], now
                    self._first_seen(signal.Signals(ours[0]))
                elif ours and now - first_at >= DUPLICATE_S:
                    seen += ours
                if len(seen) >= 2:
                    _end(self._code(seen[0]), f"{signal.Signals(seen[-1]).name} again: "
                         f"stopped at once, without a new checkpoint; {self.kept()}")
            if seen and not self._acting.is_set():
                self._check_deadline(signal.Signals(seen[0]), first_at)

    def _code(self, signum: int) -> int:
        return self.exit_code or CODES[signal.Signals(signum)]

    def _first_seen(self, sig: signal.Signals) -> None:
        """The first signal, seen at once: before the loop or during a compile the run ends
        now; during a call the console hears that the call finishes and is saved."""
        if not self._in_loop or self.phase == "compiling":
            self._end_now(sig)  # the main thread may be inside an import or a compile
        call = self._call
        if call is None or not self.console:
            return
        if self.workdir:
            then = (f"then saving a checkpoint at update {call[1]}; run the same command to "
                    "resume")
        else:
            then = "then stopping (no --workdir: nothing is saved)"
        _say(f"{sig.name}: finishing the call in flight (updates {call[0]}-{call[1]}), "
             f"{then}")
        self.announced = True

    def _end_now(self, sig: signal.Signals) -> None:
        """Ends the run before its loop or during its compile: nothing new to save."""
        if self.phase == "compiling":
            _end(self._code(sig), f"{sig.name} during compile: stopped (nothing new to save "
                                  f"yet); {self.kept()}")
        _end(self._code(sig), f"{sig.name} while starting: stopped before training; "
                              f"{self.kept()}")

    def _check_deadline(self, sig: signal.Signals, first_at: float) -> None:
        """Ends the run when the loop has not begun to act within its grace."""
        until = max(first_at + GRACE_S, self._allow_until)
        if time.monotonic() < until:
            return
        _end(self._code(sig), f"{sig.name} during {self.phase}: stopped without a new "
                              f"checkpoint (the run reached no point to save within "
                              f"{until - first_at:.0f} s); {self.kept()}")


def _read(r: int) -> bytes:
    try:
        return os.read(r, 16)
    except OSError:
        return b""


# Held by the first caller of ``_end`` until the process ends: the handler (main thread) and
# the watcher can both see a second signal, and only one of them may print its line.
_ENDING = threading.Lock()


def _say(line: str) -> None:
    """``line`` on stderr, written to its file descriptor: the handler may run while the
    main thread is inside a write to ``sys.stderr`` (a library's warning), where a print
    would fail as a reentrant call and the line be lost."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        fd = 2
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass


def _end(code: int, line: str) -> None:
    """One line on stderr, then the process ends with ``code`` (no cleanup runs). A second
    caller (another thread) waits here until the first has ended the process."""
    _ENDING.acquire()
    try:
        _say(line)
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

    def compiling(self) -> None:
        """The loop compiles (``Signals.compiling``)."""
        if self._signals is not None:
            self._signals.compiling()

    def compiled(self) -> None:
        """The compile is done (``Signals.compiled``)."""
        if self._signals is not None:
            self._signals.compiled()

    def call_started(self, first: int, last: int, bound_s: float) -> None:
        """A call of updates ``first .. last`` that may take ``bound_s`` begins
        (``Signals.call_started``)."""
        if self._signals is not None:
            self._signals.call_started(first, last, bound_s)

    def call_done(self) -> None:
        """The call in flight returned (``Signals.call_done``)."""
        if self._signals is not None:
            self._signals.call_done()

    def __enter__(self):
        self._signals, self._installed = start()
        self._signals.loop()
        return self

    def __exit__(self, *exc):
        if self._installed:
            finish(self._signals)
        return False
