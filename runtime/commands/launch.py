"""Runs one command as N local processes of one multi-controller JAX run.

``python -m runtime.commands.launch --num_processes=N --devices_per_process=D [--port=P]
[--timeout_s=T] [--grace_s=G] -- CMD...``

Process ``i`` runs ``CMD --config.coordinator_address=127.0.0.1:PORT
--config.num_processes=N --config.process_id=i`` (the fields ``runtime.distributed`` joins
the runtime with) on ``D`` fake CPU devices: ``JAX_PLATFORMS=cpu`` and
``--xla_force_host_platform_device_count=D`` added to the other ``XLA_FLAGS``. PORT is a
free port of 127.0.0.1 unless ``--port`` names one. Every line a process writes is kept on
its stream (stdout or stderr) and prefixed ``[pI] ``.

SIGINT and SIGTERM reach every process (each runs in a process group of its own, so a
terminal's Ctrl-C arrives once, through the launcher); the trainers checkpoint and exit
130/143. The first process to exit non-zero (in time order, to the 50 ms poll) decides the
exit code and the others are stopped: SIGTERM, then SIGKILL after ``--grace_s`` (default
10 s). On Linux a process also dies when the launcher dies.

Before it starts any process, the launcher checks the lock of the command's ``--workdir``
(``runtime.run.lock.check_free``): a workdir another run holds is refused in one
``config error: --workdir: ...`` line, exit 2 (each process checks it too).

Exit codes: 0 every process succeeded; else the first non-zero code (128+N for a process
killed by signal N); 124 after ``--timeout_s`` (every process killed); 127 the command did
not start; 2 bad arguments or a held workdir (one line).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from rlcore.errors import ConfigError
from runtime.config import xla_flags
from runtime.process.arguments import OneLineParser
from runtime.run import lock as workdir_lock

HOST = "127.0.0.1"
POLL_S = 0.05           # supervision poll period
OUTPUT_JOIN_S = 5.0     # longest wait for the processes' last output lines (all pumps)
REAP_S = 5.0            # longest wait for a SIGKILLed process to be reaped
TIMEOUT_CODE = 124      # like coreutils timeout(1)
NOT_STARTED_CODE = 127  # like a shell's "command not found"
FORWARDED = (signal.SIGINT, signal.SIGTERM)


def _fail(message: str):
    print(f"launch error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Splits ``argv`` at the first ``--`` into the launcher's flags and the command.

    Returns:
      ``(flags, command)``; exits 2 with one line on a bad flag or an empty command.
    """
    cut = argv.index("--") if "--" in argv else len(argv)
    own, command = argv[:cut], argv[cut + 1:]
    parser = OneLineParser(prog="python -m runtime.commands.launch",
    description=__doc__.split("\n")[0],
                           allow_abbrev=False, error_prefix="launch error: ")
    parser.add_argument("--num_processes", type=int, required=True, help="processes (>= 1)")
    parser.add_argument("--devices_per_process", type=int, default=1,
                        help="fake CPU devices per process (>= 1)")
    parser.add_argument("--port", type=int, default=0, help="coordinator port; 0: a free one")
    parser.add_argument("--timeout_s", type=float, default=None,
                        help="kill everything and exit 124 after this many seconds")
    parser.add_argument("--grace_s", type=float, default=10.0,
                        help="seconds between SIGTERM and SIGKILL when stopping processes")
    parser.add_argument("--signal_grace_s", type=float, default=300.0,
                        help="after a forwarded SIGINT/SIGTERM, seconds the processes have to "
                        "checkpoint and exit before they are killed")
    flags = parser.parse_args(own)
    for name, value in vars(flags).items():  # argparse turns a value "--" into [] untyped
        _check(not isinstance(value, list), f"--{name}: expected a number, got '--'")
    _check(flags.num_processes >= 1, f"--num_processes: must be >= 1, got {flags.num_processes}")
    _check(flags.devices_per_process >= 1,
           f"--devices_per_process: must be >= 1, got {flags.devices_per_process}")
    _check(0 <= flags.port <= 65535, f"--port: must be in [0, 65535], got {flags.port}")
    _check(flags.timeout_s is None or flags.timeout_s > 0,
           f"--timeout_s: must be > 0, got {flags.timeout_s}")
    _check(flags.grace_s >= 0, f"--grace_s: must be >= 0, got {flags.grace_s}")
    _check(flags.signal_grace_s > 0,
           f"--signal_grace_s: must be > 0, got {flags.signal_grace_s}")
    _check(bool(command), "no command after -- (usage: python -m runtime.commands.launch "
                          "--num_processes=N --devices_per_process=D -- CMD...)")
    return flags, command


def _check(ok: bool, message: str) -> None:
    if not ok:
        _fail(message)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now (bind port 0, read it, close)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def child_env(devices: int) -> dict[str, str]:
    """The launcher's environment for a process with ``devices`` fake CPU devices: any
    device-count flag in ``XLA_FLAGS`` is replaced, the other XLA flags are kept; Python
    output is unbuffered so lines arrive as they are written."""
    kept = xla_flags.FAKE_DEVICES_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).split()
    flags = " ".join([*kept, f"--xla_force_host_platform_device_count={devices}"])
    return dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags, PYTHONUNBUFFERED="1")


def child_command(command: list[str], address: str, num_processes: int, i: int) -> list[str]:
    """``command`` with the process fields of process ``i`` appended as config overrides."""
    return [*command, f"--config.coordinator_address={address}",
            f"--config.num_processes={num_processes}", f"--config.process_id={i}"]


def command_workdir(command: list[str]) -> str | None:
    """The ``--workdir`` that ``command`` gives (``--workdir=X`` or ``--workdir X``; the last
    one counts, as for absl), or None."""
    workdir = None
    for i, arg in enumerate(command):
        if arg.startswith("--workdir="):
            workdir = arg.split("=", 1)[1]
        elif arg == "--workdir" and i + 1 < len(command):
            workdir = command[i + 1]
    return workdir


def exit_code(returncode: int) -> int:
    """A ``Popen.returncode`` as a shell reports it (killed by signal N: 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


def _die_with_parent_fn():
    """A ``preexec_fn`` (Linux) that has the child SIGKILLed when the launcher dies, so
    even a SIGKILLed launcher leaves no process behind; ``None`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def die_with_parent():
        prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)

    return die_with_parent


# Library chatter dropped from the children's output: the CPU collectives' (Gloo) report of
# each rank's connections, printed by native code at start from several threads at once, so
# that its pieces may share a line or start one (``[Gloo] Rank [Gloo] Rank 1 is ...``, then
# ``0 is connected to 3 peer ranks. ...``): a line with either piece is dropped.
CHATTER = re.compile(rb"\[Gloo\]|is connected to \d+ peer ranks")

# Serialises every line the launcher writes: the children's (one pump thread per stream)
# and its own notes.
_OUTPUT_LOCK = threading.Lock()


def _pump(source, sink, prefix: bytes, lock: threading.Lock) -> None:
    """Copies lines from ``source`` (a child's pipe) to ``sink`` (a binary stream), each
    prefixed, until EOF; ``CHATTER`` lines are dropped. A sink that fails (closed pipe) is
    skipped; the child's pipe is still drained so it never blocks on a full pipe."""
    with source:
        for line in iter(source.readline, b""):
            if CHATTER.search(line):
                continue
            line = line if line.endswith(b"\n") else line + b"\n"
            with lock:
                try:
                    sink.write(prefix + line)
                    sink.flush()
                except (OSError, ValueError):
                    pass


def _has_exited(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` has exited, without reaping it (where ``os.waitid`` exists; else
    ``poll``, which reaps)."""
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already
        return True


class Group:
    """The launched processes: output pumps, signal forwarding, stopping, killing.

    Args:
      commands: one command line per process.
      env: their environment.
    """

    def __init__(self, commands: list[list[str]], env: dict[str, str]):
        self.commands, self.env = commands, env
        self.procs: list[subprocess.Popen] = []
        self.finished: list[int] = []       # process indices in the order they exited
        self.signalled = 0                  # the SIGINT/SIGTERM forwarded, if any
        self.signalled_at = 0.0             # when (time.monotonic())
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Starts every process, each in a process group of its own, then the pumps (no
        thread runs while the processes fork). A signal that came meanwhile reaches the
        processes started after it too."""
        preexec = _die_with_parent_fn()
        for i, command in enumerate(self.commands):
            self.procs.append(subprocess.Popen(
                command, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec))
            if self.signalled:
                self._signal(i, self.signalled)
        for i, proc in enumerate(self.procs):
            prefix = f"[p{i}] ".encode()
            for source, sink in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
                thread = threading.Thread(target=_pump, daemon=True,
                                          args=(source, sink.buffer, prefix, _OUTPUT_LOCK))
                thread.start()
                self._threads.append(thread)

    def forward(self, signum, frame=None) -> None:
        """Signal handler: sends ``signum`` to the group of every process not yet reaped
        (it does not poll: the main thread may be inside ``Popen.poll``). The grace after a
        signal counts from the first one: repeating it does not extend the wait."""
        if not self.signalled:
            self.signalled_at = time.monotonic()
        self.signalled = signum
        for i, proc in enumerate(self.procs):
            if proc.returncode is None:
                self._signal(i, signum)

    def running(self) -> list[int]:
        """Indices of the processes that have not exited; records (in ``finished``) and
        reaps the ones that did."""
        for i in range(len(self.procs)):
            if i not in self.finished and self._reap(i):
                self.finished.append(i)
        return [i for i in range(len(self.procs)) if i not in self.finished]

    def _reap(self, i: int) -> bool:
        """Whether process ``i`` exited; if it did, SIGKILLs what it left in its process
        group (while its unreaped leader keeps the group id from being reused), then reaps
        it."""
        proc = self.procs[i]
        if proc.returncode is None:
            if not _has_exited(proc):
                return False
            self._signal(i, signal.SIGKILL)
            proc.wait(timeout=REAP_S)  # it has exited: returns at once
        return True

    def first_failure(self) -> int | None:
        """Index of the first process (in exit order) that exited non-zero, if any."""
        self.running()
        return next((i for i in self.finished if self.procs[i].returncode != 0), None)

    def stop(self, grace_s: float) -> None:
        """SIGTERM to every running process (unless a signal was forwarded already), then
        SIGKILL to those still running after ``grace_s``."""
        if not self.signalled:
            for i in self.running():
                self._signal(i, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.running() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if self.running() and grace_s > 0:
            _note(f"{' '.join(f'p{i}' for i in self.running())} still running after "
                  f"{grace_s:g} s; SIGKILL")
        self.kill()

    def kill(self) -> None:
        """SIGKILL to the group of every process not yet reaped, then reaps them (at most
        ``REAP_S``) and lets the pumps write the last lines."""
        for i, proc in enumerate(self.procs):
            if proc.returncode is None:
                self._signal(i, signal.SIGKILL)
        deadline = time.monotonic() + REAP_S
        while self.running() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        deadline = time.monotonic() + OUTPUT_JOIN_S  # one wait for all the pumps
        for thread in self._threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))

    def _signal(self, i: int, signum) -> None:
        try:
            os.killpg(self.procs[i].pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def supervise(group: Group, timeout_s: float | None, signal_grace_s: float
              ) -> tuple[int, bool]:
    """Waits until a process fails, all succeed, ``timeout_s`` passes, or the processes are
    still running ``signal_grace_s`` after a forwarded signal.

    After a forwarded signal an exit stops nobody: every process gets until
    ``signal_grace_s`` to save and exit (process 0 writes the checkpoint, and is often the
    last out).

    Returns:
      ``(code, hung)``: 0, the first failure's exit code, ``TIMEOUT_CODE``, or 128 + the
      forwarded signal; ``hung`` when the processes still running are to be killed at once
      (a timeout, or no exit within ``signal_grace_s`` of a signal).
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        if group.signalled:
            if not group.running():
                failed = group.first_failure()
                return (0 if failed is None
                        else exit_code(group.procs[failed].returncode)), False
            if time.monotonic() - group.signalled_at > signal_grace_s:
                _note(f"still running {signal_grace_s:g} s after the signal; stopping every "
                      "process")
                return 128 + group.signalled, True
            time.sleep(POLL_S)
            continue
        failed = group.first_failure()
        if failed is not None:
            code = exit_code(group.procs[failed].returncode)
            _note(f"p{failed} exited with {code}; stopping the others")
            return code, False
        if not group.running():
            return 0, False
        if deadline is not None and time.monotonic() > deadline:
            _note(f"timed out after {timeout_s:g} s; stopping every process")
            return TIMEOUT_CODE, True
        time.sleep(POLL_S)


def _note(message: str) -> None:
    """Writes one ``launch:`` line to stderr, whole: under the pumps' lock, as one write to
    the byte stream (``print`` writes the text and its newline separately, and a child's
    line could land between them)."""
    with _OUTPUT_LOCK:
        sys.stderr.flush()
        sys.stderr.buffer.write(f"launch: {message}\n".encode())
        sys.stderr.buffer.flush()


def launch(flags: argparse.Namespace, command: list[str]) -> int:
    """Runs the processes to the end; returns the launcher's exit code. Whatever happens
    (an exception included), no process is left running."""
    workdir = command_workdir(command)
    if workdir:
        try:
            workdir_lock.check_free(workdir)
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            return 2
    address = f"{HOST}:{flags.port or free_port()}"
    n = flags.num_processes
    group = Group([child_command(command, address, n, i) for i in range(n)],
                  child_env(flags.devices_per_process))
    previous = {sig: signal.signal(sig, group.forward) for sig in FORWARDED}
    try:
        try:
            group.start()
        except OSError as e:
            _note(f"cannot start {command[0]!r}: {e}")
            return NOT_STARTED_CODE
        _note(f"{n} processes x {flags.devices_per_process} devices, coordinator {address}, "
              f"pids {' '.join(str(p.pid) for p in group.procs)}")
        code, hung = supervise(group, flags.timeout_s, flags.signal_grace_s)
        if code:
            group.stop(0.0 if hung else flags.grace_s)
        return code
    finally:
        group.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    flags, command = parse_args(sys.argv[1:] if argv is None else argv)
    return launch(flags, command)


if __name__ == "__main__":
    sys.exit(main())
