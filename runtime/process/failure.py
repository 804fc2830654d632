"""One line per runtime failure: the summary on the console, the details in a file.

A command that runs under ``runtime.process.exits.run_command`` with a ``Details`` file gets:

- while it runs, what the libraries report goes to that file, not to the console: Python
  logging records (absl, orbax, jax; the console keeps them only when ``--verbosity`` is
  given), warnings, exceptions of threads (``threading.excepthook``) and unraisable ones
  (``sys.unraisablehook``: "Exception ignored in ...", e.g. a checkpoint reader's coroutine
  or a TensorBoard writer's atexit callback). The hooks stay for the process's life, so a
  library thread that reports late still writes there;
- while a compile runs (``NativeOutput``), what native code writes on file descriptor 2 goes
  to that file too: XLA's C++ log lines, e.g. its "Very slow compile? If you want to file a
  bug" banner; Python's ``sys.stderr`` keeps the console meanwhile;
- on a runtime failure (exit 1), once the command's own ``finally`` blocks have shut the
  library threads down (checkpoint saves and reads, the TensorBoard writer): the whole
  traceback into the file, then one line on stderr (``summary_line``), then the console is
  closed to everything else (stdout and stderr, Python's and the file descriptors, point at
  the file), so nothing prints after the line.

The file is ``<workdir>/errors.log`` for a trainer's process 0 (``errors-p<k>.log`` for
process k), written only when there is something to write; where it cannot be written (a
full or read-only disk, no workdir, an evaluate command, which never writes in a workdir) a
file in the system's temporary directory instead, and the summary line names the one used.
What a run's libraries say before its workdir exists moves into the workdir's file with
the first write after it does (``Details.write``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import threading
import time
import traceback

from rlcore.names import OURS, ROOT, user_frame
from runtime.process.one_line import single_line

# This project's packages (and its tests, in a checkout), in the folder that holds them: a
# frame in one of them is ours, in a checkout and installed into site-packages alike
# (docs/design.md, "Installed package").
REPO = ROOT
OUR_PACKAGES = (*OURS, "tests")
DETAILS_FILE = "errors.log"
MESSAGE_CHARS = 400  # the error's own text in the summary line, at most

# OS errors a failure is often about, as C libraries (tensorstore) spell them in messages.
_OS_PROBLEMS = ("No space left on device", "Read-only file system", "Permission denied",
                "Disk quota exceeded")
_QUOTED_PATH = re.compile(r"""["'](/[^"']+)["']""")


def details_name(process_index: int = 0) -> str:
    """The details file's name in a workdir: ``errors.log``, ``errors-p<k>.log``."""
    return DETAILS_FILE if process_index == 0 else f"errors-p{process_index}.log"


class Details:
    """An append-only file for tracebacks and library output, opened per write.

    Args:
      path: where to write first (None: straight to the temporary-directory file).
      console: the console stream to fall back on when no file can be written.
    """

    def __init__(self, path: str | None, console=None):
        self.path = path
        self.used: str | None = None  # the file written last
        self.lines = 0
        self._console = console if console is not None else sys.stderr
        self._lock = threading.Lock()

    def fallback(self) -> str:
        return os.path.join(tempfile.gettempdir(), f"podracer-errors-{os.getpid()}.log")

    def write(self, text: str) -> str | None:
        """Appends ``text`` (the first of the file, the fallback file that takes it); returns
        the path written, or None when neither could be (``text`` went to the console).

        While the file's directory does not exist yet (a workdir made later), the fallback
        takes the text; the first write to the file once it can be written moves what the
        fallback holds into it, so no file stays in the temporary directory."""
        if not text.endswith("\n"):
            text += "\n"
        with self._lock:
            for path in (self.path, self.fallback()):
                if path is None:
                    continue
                try:
                    with open(path, "a") as f:
                        if path == self.path:
                            self._take_fallback(f)
                        f.write(text)
                except OSError:
                    with contextlib.suppress(OSError):  # no empty file left behind
                        if os.path.getsize(path) == 0:
                            os.remove(path)
                    if path == self.path and os.path.isdir(os.path.dirname(path) or "."):
                        self.path = None  # from now on the fallback: one file, not two
                    continue
                self.used, self.lines = path, self.lines + text.count("\n")
                return path
            self._console.write(text)
            return None

    def settle(self) -> None:
        """Moves what the fallback file took while the file's directory did not exist yet
        into the file, once it can be written (a command calls it when its workdir
        exists); nothing where it still cannot."""
        with self._lock:
            if self.path is None or not os.path.exists(self.fallback()):
                return
            try:
                with open(self.path, "a") as f:
                    self._take_fallback(f)
            except OSError:
                return
            self.used = self.path

    def _take_fallback(self, f) -> None:
        """Appends what this process's fallback file holds to ``f`` (the details file, open)
        and removes the fallback."""
        fallback = self.fallback()
        if not os.path.exists(fallback):
            return
        with open(fallback) as earlier:
            f.write(earlier.read())
        os.remove(fallback)


class _DetailsHandler(logging.Handler):
    """Logging records into a ``Details`` file."""

    def __init__(self, details: Details):
        super().__init__(logging.NOTSET)
        self.details = details
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.details.write(self.format(record))
        except Exception:  # noqa: BLE001 - a log record never fails the run
            pass


_captured: Details | None = None  # the file ``capture`` sends library output to


def captured() -> Details | None:
    """The details file library output goes to (``capture``), or None."""
    return _captured


def capture(details: Details, *, console_logging: bool = False) -> None:
    """From now on, this process's library output goes to ``details`` (module docstring).

    Args:
      console_logging: keep the console's logging handlers too (``--verbosity`` given).
    """
    global _captured
    _captured = details
    def unraisable(u):
        where = f" in {u.object!r}" if u.object is not None else ""
        text = "".join(traceback.format_exception(u.exc_type, u.exc_value, u.exc_traceback))
        details.write(f"{_stamp()} {u.err_msg or 'Exception ignored'}{where}:\n{text}")

    def thread_failed(args):
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value,
                                                  args.exc_traceback))
        details.write(f"{_stamp()} exception in thread {name}:\n{text}")

    sys.unraisablehook = unraisable
    threading.excepthook = thread_failed
    root = logging.getLogger()
    if not console_logging:
        for handler in list(root.handlers):
            root.removeHandler(handler)
    root.addHandler(_DetailsHandler(details))
    logging.captureWarnings(True)


def quiet_console(details: Details) -> None:
    """Points stdout and stderr (file descriptors 1 and 2, so Python's streams too) at the file
    ``details`` used last, so that nothing reaches the console any more; where nothing was
    written to one (a one-line refusal), at the null device: a refused command creates no
    file. The console simply stays when no file can be opened."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    for path in (details.used or os.devnull, details.fallback()):
        try:
            target = open(path, "a")  # noqa: SIM115 - it replaces the console until exit
        except OSError:
            continue
        with target:  # Python's streams write to descriptors 1 and 2: they follow
            for fd in (1, 2):
                with contextlib.suppress(OSError):
                    os.dup2(target.fileno(), fd)
        return


class NativeOutput:
    """Between ``start`` and ``stop`` (or as a context manager), file descriptor 2 (what
    native code such as XLA's C++ logging writes) points at the details file, while
    ``sys.stderr`` writes to the console through a copy of the old descriptor. Without a
    details file, or where it cannot be opened, nothing changes. The lines it took are
    counted in the file's ``lines``; an empty file it created is removed.

    Args:
      details: the details file (``captured()``), or None.
    """

    def __init__(self, details: Details | None):
        self.details = details
        self._saved: tuple | None = None  # (console fd copy, Python's stderr, path, size)

    def start(self) -> None:
        if self._saved is not None or self.details is None:
            return
        path = self.details.path or self.details.fallback()
        size = os.path.getsize(path) if os.path.exists(path) else None
        try:
            target = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError:
            return
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        copy = os.dup(2)
        previous = sys.stderr
        encoding = getattr(previous, "encoding", None)
        # Python's lines on the console; ``stop`` closes this stream (a late write by a
        # thread that held it fails, it never lands in a file that reuses the descriptor).
        sys.stderr = open(copy, "w", buffering=1, encoding=encoding,  # noqa: SIM115
                          errors="backslashreplace", closefd=False)
        os.dup2(target, 2)
        os.close(target)
        self._saved = (copy, previous, path, size)

    def stop(self) -> None:
        if self._saved is None:
            return
        copy, previous, path, size = self._saved
        self._saved = None
        console, sys.stderr = sys.stderr, previous
        with contextlib.suppress(Exception):
            console.close()
        os.dup2(copy, 2)
        os.close(copy)
        self._count(path, size or 0, created=size is None)

    def _count(self, path: str, before: int, created: bool) -> None:
        """Counts the lines written to ``path`` past ``before`` bytes in the details file;
        removes the file when it created it and nothing was written."""
        with contextlib.suppress(OSError):
            if os.path.getsize(path) <= before:
                if created:
                    os.remove(path)
                return
            with open(path, "rb") as f:
                f.seek(before)
                added = f.read().count(b"\n")
            self.details.used, self.details.lines = path, self.details.lines + added

    def __enter__(self) -> "NativeOutput":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def close_all(*closers) -> None:
    """Calls every one of ``closers`` (e.g. the metrics writer, then the checkpoint
    manager), even after one failed, so that each shuts its threads down; then raises the
    first failure, if any."""
    failed = None
    for close in closers:
        try:
            close()
        except Exception as e:  # noqa: BLE001 - re-raised once all are closed
            failed = failed or e
    if failed is not None:
        raise failed


@contextlib.contextmanager
def doing(what: str):
    """Names the work in progress for any failure inside: the error gets the note
    ``"while <what>"`` (the innermost one counts), which the summary line leads with."""
    try:
        yield
    except Exception as e:
        if not any(n.startswith("while ") for n in getattr(e, "__notes__", ())):
            e.add_note(f"while {what}")
        raise


def first_failure(error: BaseException) -> BaseException:
    """The failure that started it: following errors raised while handling another
    (``__context__``, not a deliberate ``raise ... from``) back to the first."""
    seen = {id(error)}
    while (error.__cause__ is None and not error.__suppress_context__
           and error.__context__ is not None and id(error.__context__) not in seen):
        error = error.__context__
        seen.add(id(error))
    return error


def os_problem(error: BaseException) -> str | None:
    """``"<os error>: <path>"`` when ``error`` (or what caused it) is a failed file
    operation, e.g. ``"no space left on device: /w/checkpoints/25..."``; else None."""
    chain, seen = [], set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        chain.append(e)
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    for e in chain:
        if isinstance(e, OSError) and e.strerror:
            path = e.filename if e.filename is not None else "?"
            return f"{e.strerror[0].lower()}{e.strerror[1:]}: {path}"
    for e in chain:
        text = str(e)
        for problem in _OS_PROBLEMS:
            if problem in text:
                found = _QUOTED_PATH.search(text)
                path = found.group(1) if found else "?"
                return f"{problem[0].lower()}{problem[1:]}: {path}"
    return None


def where(error: BaseException) -> str:
    """The innermost frame of the user's code that ``error`` passed through (an env,
    network or algorithm of theirs: ``rlcore.imports.user_frame``), else of this project's
    (``runtime/run/checkpoint.py:142 in save``); the innermost frame at all when neither is."""
    users = user_frame(error)
    if users is not None:
        return users
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if os.path.relpath(f.filename, REPO).split(os.sep)[0]
            in OUR_PACKAGES]
    frame = (ours or frames or [None])[-1]
    if frame is None:
        return "?"
    name = os.path.relpath(frame.filename, REPO) if ours else frame.filename
    return f"{name}:{frame.lineno} in {frame.name}"


def summary_line(error: BaseException, details_path: str | None) -> str:
    """The one console line of a runtime failure: what failed (the work it was doing, the
    error) and where, and the file with the details, e.g. ``error: while saving checkpoint
    25 in /w/checkpoints: no space left on device: /w/checkpoints/25.orbax-checkpoint-tmp
    (ValueError at runtime/run/checkpoint.py:142 in save); traceback in
    /tmp/podracer-errors-9.log``.
    """
    first = first_failure(error)
    chain = [first, error]  # the work it was doing: the first failure's, else the last's
    while chain[-1] is not first and chain[-1].__context__ is not None:
        chain.append(chain[-1].__context__)
    notes = [n for e in chain for n in getattr(e, "__notes__", ()) if n.startswith("while ")]
    origin = first  # where: the innermost of the errors it was raised from
    for _ in range(50):  # (a cycle of causes is possible, if odd)
        if origin.__cause__ is None:
            break
        origin = origin.__cause__
    message = " ".join(str(first).split()) or type(first).__name__
    problem = os_problem(first)
    if problem is not None:
        what = f"{problem} ({type(first).__name__} at {where(origin)})"
    else:
        if len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS - 3] + "..."
        what = f"{type(first).__name__}: {message} (at {where(origin)})"
    head = f"{notes[0]}: " if notes else ""
    tail = (f"traceback in {details_path}" if details_path is not None
            else "traceback above (no file could be written)")
    return single_line(f"error: {head}{what}; {tail}")


def report(error: BaseException, details: Details) -> str:
    """Writes ``error``'s whole traceback to ``details`` and returns its summary line."""
    text = "".join(traceback.format_exception(error))
    path = details.write(f"{_stamp()} runtime failure (exit 1):\n{text}")
    return summary_line(error, path)


def one_line_report(prefix: str, error: BaseException, details: Details | None) -> str:
    """The line of an error a command reports in one line (``"<prefix>: <error>"``); one
    that carries the traceback of the user's code (``details``, e.g. a
    ``rlcore.errors.ConfigError`` of an env of theirs that raised) writes it to ``details``
    (a file in the temporary directory where there is none, or no workdir yet) and ends
    with ``; traceback in <file>`` (docs/design.md, "Exit codes")."""
    text = getattr(error, "details", None)
    line = f"{prefix}: {error}"
    if isinstance(text, str) and text:
        path = (details or Details(None)).write(f"{_stamp()} {line}\n{text}")
        if path is not None:
            line += f"; traceback in {path}"
    return single_line(line)


def _stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")
