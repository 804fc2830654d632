"""Sebulba PPO on Atari Breakout-v5 on this host: until a target return or a wall-clock limit.

``python -m benchmarks.breakout [--workdir=runs/breakout] [--target=10] [--minutes=60]``
trains ``configs/atari_ppo_2core.py`` (``python -m sebulba.main``, its console as usual),
watches ``metrics.jsonl`` and stops the run with SIGTERM (it checkpoints and exits) when the
logged mean episode return (game score, unclipped) reaches ``--target`` or the wall-clock
passes ``--minutes``. Then it prints the return at a few points, when the target was
reached, the seconds per update of each pipeline stage (mean over the logged updates), and
writes ``curve.png`` (return against env steps) into the run directory. SIGTERM or Ctrl-C
stops the run the same way (checkpoint, then exit; the same command resumes it) and the
summary follows. ``--from_run=DIR`` summarises a finished run instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from benchmarks.common import (
    dir_problem,
    file_problem,
    flag_checks,
    format_table,
    path_check,
    read_rows,
)
from runtime.config.fields import ABOVE_ZERO, Number
from runtime.process.arguments import OneLineParser, doc_summary
from sebulba import timers

CONFIG = "configs/atari_ppo_2core.py"
STAGES = timers.REPORT_ORDER


def check_args(args) -> None:
    """The flags' rules, before any work; raises ``ConfigError`` naming the flag
    (docs/design.md, "Exit codes")."""
    flag_checks({"target": Number(), "minutes": ABOVE_ZERO},
                path_check("config", file_problem))(args)
    if args.from_run:
        path_check("from_run", dir_problem)(args)


def parse_args(argv=None):
    """Command-line flags, checked (``check_args``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.breakout", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--workdir", default="runs/breakout", help="the run's directory")
    p.add_argument("--from_run", default="", help="summarise this finished run directory")
    p.add_argument("--target", type=float, default=10.0, help="mean episode return to stop at")
    p.add_argument("--minutes", type=float, default=60.0, help="wall-clock limit")
    p.add_argument("--config", default=CONFIG, help="a Sebulba config file")
    return p.parse_args(argv)


def train(args) -> tuple[float, int]:
    """Runs the config in ``args.workdir`` until the target or the limit; returns the
    wall-clock seconds and the run's exit code."""
    cmd = [sys.executable, "-m", "sebulba.main", f"--config={args.config}",
           f"--workdir={args.workdir}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd)
    stopped = False
    # SIGTERM to this driver goes to the run (it checkpoints and exits), not past it.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    try:
        while proc.poll() is None:
            time.sleep(5)
            returns = [r["episode_return"] for r in read_rows(args.workdir)
                       if r.get("episode_return") is not None]
            late = time.perf_counter() - t0 > 60 * args.minutes
            if not stopped and ((returns and returns[-1] >= args.target) or late):
                proc.send_signal(signal.SIGTERM)
                stopped = True
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return time.perf_counter() - t0, proc.wait()


def summary(workdir: str, target: float) -> str:
    rows = [r for r in read_rows(workdir) if r.get("episode_return") is not None]
    if not rows:
        return f"{workdir}: no logged returns"
    n = len(rows)
    lines = ["env steps -> mean episode return (wall s)"]
    for i in sorted({0, n // 4, n // 2, 3 * n // 4, n - 1}):
        r = rows[i]
        lines.append(f"  {r['env_steps']:>10,} -> {r['episode_return']:6.2f} "
                     f"({r['wall_time']:6.0f})")
    hit = next((r for r in rows if r["episode_return"] >= target), None)
    lines.append(f"target {target:g}: " + (
        f"reached at {hit['env_steps']:,} env steps, {hit['wall_time']:.0f} s of training"
        if hit else f"not reached (best {max(r['episode_return'] for r in rows):.2f})"))
    timed = [r for r in rows if timers.metric_key(timers.LEARNER_STEP) in r]
    if timed:
        means = [sum(r.get(timers.metric_key(s), 0.0) for r in timed) / len(timed) for s in STAGES]
        lines.append("seconds per update, per stage (mean over logged updates):")
        lines.append(format_table(STAGES, [[f"{m:.3f}" for m in means]]))
        # A line's sps is None until a steady rate exists (the first update, its compile).
        sps = [r["sps"] for r in timed[1:] if r.get("sps") is not None]
        lines.append(f"SPS (mean of logged lines after the first): {sum(sps) / len(sps):.0f}"
                     if sps else "SPS: not measured (no logged line after the first)")
    return "\n".join(lines)


def main(argv=None) -> None:
    args = parse_args(argv)
    workdir = args.from_run or args.workdir
    if not args.from_run:
        wall, code = train(args)
        print(f"wall-clock {wall:.0f} s (program start to exit, compile included); "
              f"exit code {code}")
    print(summary(workdir, args.target))
    from benchmarks import curves

    curves.main([f"--run=Sebulba PPO, {args.config}:{workdir}",
                 f"--out={os.path.join(workdir, 'curve.png')}", f"--target={args.target}",
                 "--title=Sebulba PPO on Breakout-v5 (sticky actions, full action set), "
                 "Nature CNN, 2-core CPU"])


if __name__ == "__main__":
    main()
