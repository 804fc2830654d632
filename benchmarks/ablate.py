"""Ablations: which architecture, which pipeline, at what cost, as one command.

``python -m benchmarks.ablate --suite=architectures --seeds=3 --out=DIR`` runs every cell of
the suite (``benchmarks.ablate_suites``) as its own ``python -m anakin.main`` /
``sebulba.main`` process, each in ``DIR/runs/<cell>``, then writes into ``DIR``:

- ``results.csv``: one row per run (seed), with the fields that vary between cells;
- ``results.md``: the suite's tables;
- PNG plots: return against env steps and against wall-clock (mean line and 95% band over
  seeds), SPS as bars and, for Sebulba cells, stage times as stacked bars.

A progress bar (tqdm) counts the cells. It resumes: a cell whose run directory holds
``cell.json`` (written once its program exited 0) with this cell's command (module, config
file, overrides: budget included) is not run again; a cell interrupted half-way, or run
with another command, starts over. The report always covers the whole suite: ``--cells``
chooses what runs, not what is reported (cells finished in an earlier invocation are in
it). ``results.md`` names the cells it has no results of in two lists: not finished (a
selected cell that failed or was interrupted, or one an earlier invocation left
unfinished) and not run (not selected by ``--cells``, never started). A failed cell is
reported with its log file and the others still run (exit code 1 at the end). Ctrl-C or
SIGTERM stops the cell in flight (it starts over next time), writes no report and exits
130 / 143 with one line; the finished cells are kept. Several suites:
``--suite=architectures,pipelines``, each in ``DIR/<suite>`` then. ``--budget_scale``
multiplies every env-step budget (tests and the notebooks run tiny suites with it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection

import configs
from benchmarks import ablate_report as report
from benchmarks import staleness_report as stale
from benchmarks.ablate_suites import SUITES, Cell, suite_cells
from benchmarks.common import file_problem, flag_checks, path_check
from envs import registry
from rlcore.errors import ConfigError
from runtime.config.fields import ABOVE_ZERO, POSITIVE, Choice
from runtime.config.xla_flags import FAKE_DEVICES_FLAG
from runtime.process.arguments import OneLineParser, doc_summary
from runtime.process.paths import output_dir_problem

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m benchmarks.ablate", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--suite", required=True,
                   help=f"one or more of {', '.join(SUITES)}, comma-separated")
    p.add_argument("--seeds", type=int, default=3,
                   help="seeds 0..N-1 of every cell (default: %(default)s)")
    p.add_argument("--out", required=True, help="output directory (resumed if it exists)")
    p.add_argument("--budget_scale", type=float, default=1.0,
                   help="multiplies every env-step budget (at least 2 updates a run)")
    p.add_argument("--cell_timeout_s", type=float, default=3600.0,
                   help="seconds after which a cell is stopped and counted as failed "
                        "(default: %(default)s)")
    p.add_argument("--cells", default="", help="only the cells whose name matches this "
                   "regular expression (e.g. '^anakin-')")
    p.add_argument("--no_progress", action="store_true", help="no progress bar (tqdm)")
    p.add_argument("--from_csv", default="", help="runs nothing: writes the staleness "
                   "suite's report in --out from these results.csv files (comma-separated; "
                   "e.g. the parts of a study run in several sessions), and the return "
                   "tables of results.md reports among them (parts whose CSV predates "
                   "return_last20)")
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """The flags' rules, before any cell runs; raises ``ConfigError`` naming the flag
    (docs/design.md, "Exit codes"). Sets ``args.suites``, ``args.cells_re`` and
    ``args.from_csv`` (a list)."""
    args.suites = [s for s in args.suite.split(",") if s]
    if not args.suites:
        raise ConfigError(f"suite: no suite named in {args.suite!r} (expected one or more of "
                          f"{', '.join(SUITES)})")
    flag_checks({"suite": Choice(tuple(SUITES))})(argparse.Namespace(suite=args.suites))
    flag_checks({"seeds": POSITIVE, "budget_scale": ABOVE_ZERO, "cell_timeout_s": ABOVE_ZERO},
                path_check("out", output_dir_problem))(args)
    try:
        args.cells_re = re.compile(args.cells)
    except re.error as e:
        raise ConfigError(f"cells: not a regular expression ({e})") from None
    args.from_csv = [f for f in args.from_csv.split(",") if f]
    if args.from_csv and args.suites != ["staleness"]:
        raise ConfigError("from_csv: only the staleness suite's report is rebuilt from "
                          "results.csv (the other reports plot curves the CSV does not keep)")
    for f in args.from_csv:
        path_check("from_csv", file_problem)(argparse.Namespace(from_csv=f))


# --- running cells -------------------------------------------------------------------------


def _format_value(value) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def cell_command(cell: Cell, workdir: str) -> list[str]:
    """The command line of ``cell``'s program."""
    overrides = [f"--config.{k}={_format_value(v)}" for k, v in cell.overrides]
    return [sys.executable, "-m", f"{cell.mode}.main",
            f"--config={os.path.join(configs.HERE, cell.config)}", f"--workdir={workdir}",
            *overrides]


def cell_env(cell: Cell) -> dict:
    """The environment of ``cell``'s program: the caller's, with ``fake_devices`` fake CPU
    devices when the cell asks for them and none otherwise."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    flags = FAKE_DEVICES_FLAG.sub("", env.get("XLA_FLAGS", "")).strip()
    if cell.fake_devices:
        flags = f"{flags} --xla_force_host_platform_device_count={cell.fake_devices}".strip()
        env["JAX_PLATFORMS"] = "cpu"
    if flags:
        env["XLA_FLAGS"] = flags
    else:
        env.pop("XLA_FLAGS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env


def cell_dir(out: str, cell: Cell) -> str:
    return os.path.join(out, "runs", cell.name)


def _what_runs(command: list[str]) -> list[str]:
    """The parts of a cell's command line that set what it computes: module, config file
    name and overrides (not the interpreter, the repository's path or the run directory)."""
    out = []
    for arg in command[1:]:
        if arg.startswith("--workdir="):
            continue
        if arg.startswith("--config="):
            arg = "--config=" + os.path.basename(arg[len("--config="):])
        out.append(arg)
    return out


def is_done(out: str, cell: Cell) -> bool:
    """Whether ``cell`` finished in ``out`` with the command it has now (a finished run of
    another budget or other overrides does not count)."""
    workdir = cell_dir(out, cell)
    try:
        with open(os.path.join(workdir, "cell.json")) as f:
            command = json.load(f)["command"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(command, list) and _what_runs(command) == _what_runs(
        cell_command(cell, workdir))


def run_cell(cell: Cell, out: str, timeout_s: float) -> tuple[bool, str]:
    """Runs ``cell`` from scratch in its run directory; ``cell.json`` marks success.

    Returns:
      ``(ok, log path)``; the program's stdout and stderr are in the log.
    """
    workdir = cell_dir(out, cell)
    shutil.rmtree(workdir, ignore_errors=True)  # a cell interrupted half-way starts over
    os.makedirs(workdir)
    log_path = os.path.join(workdir, "log.txt")
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(cell_command(cell, workdir), cwd=REPO, env=cell_env(cell),
                                  stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
    if code != 0:
        return False, log_path
    with open(os.path.join(workdir, "cell.json"), "w") as f:
        json.dump({"name": cell.name, "command": cell_command(cell, workdir),
                   "seconds": time.perf_counter() - t0}, f, indent=1)
    return True, log_path


class Stopped(Exception):
    """SIGINT or SIGTERM (``signum``) arrived while cell ``cell`` ran; the cell's process was
    stopped (``subprocess.run`` kills it and waits before this propagates)."""

    def __init__(self, signum: int, cell: str = ""):
        super().__init__(signum, cell)
        self.signum, self.cell = signum, cell


def _raise_stopped(signum, frame):
    for s in (signal.SIGINT, signal.SIGTERM):  # a second signal waits for the first's cleanup
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


def run_suite(cells: list[Cell], out: str, *, timeout_s: float, progress: bool) -> list[str]:
    """Runs the cells not done yet; returns the failure messages. Raises ``Stopped`` (with
    the cell's name) on SIGINT (KeyboardInterrupt) or, under ``python -m``, SIGTERM."""
    from tqdm import tqdm

    done = [c for c in cells if is_done(out, c)]
    todo = [c for c in cells if not is_done(out, c)]
    failures = []
    bar = tqdm(total=len(cells), initial=len(done), unit="run", desc=cells[0].suite,
               disable=not progress, dynamic_ncols=True, file=sys.stderr)
    with bar:
        for cell in todo:
            bar.set_postfix_str(cell.name)
            try:
                ok, log_path = run_cell(cell, out, timeout_s)
            except KeyboardInterrupt:
                raise Stopped(signal.SIGINT, cell.name) from None
            except Stopped as e:
                raise Stopped(e.signum, cell.name) from None
            if not ok:
                failures.append(f"{cell.name} failed; its log: {log_path}")
                bar.write(f"{failures[-1]}", file=sys.stderr)
            bar.update(1)
    return failures


# --- report --------------------------------------------------------------------------------


def load_records(cells: list[Cell], out: str) -> tuple[list[dict], Callable[[dict], list]]:
    """Records of every finished cell, and ``rows_of(record)`` -> that run's metric rows."""
    records, rows_by_run = [], {}
    for cell in cells:
        if not is_done(out, cell):
            continue
        rows, timing = report.read_run_dir(cell_dir(out, cell))
        for rec in report.run_records(cell, rows, timing):
            rows_by_run[(rec["cell"], rec["seed"])] = [
                r for r in rows if r.get("seed", rec["seed"]) == rec["seed"]]
            records.append(rec)
    return records, lambda rec: rows_by_run[(rec["cell"], rec["seed"])]


def missing_cells(cells: list[Cell], out: str,
                  selected: Collection[str] | None = None) -> tuple[list[str], list[str]]:
    """``(not finished, not run)``: the names of the cells of ``cells`` without a finished
    run of their command in ``out``, split by why.

    Not finished: selected this time (``selected``: the names ``--cells`` chose, None for
    all) and failed or interrupted, or left a run directory from an earlier invocation (which
    failed, was interrupted or ran another command). Not run: not selected and no run
    directory, so never started here.
    """
    not_finished, not_run = [], []
    for c in cells:
        if is_done(out, c):
            continue
        started = selected is None or c.name in selected or os.path.isdir(cell_dir(out, c))
        (not_finished if started else not_run).append(c.name)
    return not_finished, not_run


def missing_note(not_finished: list[str], not_run: list[str], pattern: str) -> str:
    """The lines of results.md that name the cells it has no results of (empty if none)."""
    lines = []
    if not_finished:
        lines.append(f"Not finished (failed, interrupted, or run with another command; their "
                     f"logs: runs/<cell>/log.txt): {', '.join(not_finished)}.")
    if not_run:
        lines.append(f"Not run (not selected by --cells={pattern}): {', '.join(not_run)}.")
    return "".join(f"\n{line}\n" for line in lines)


def write_report(suite: str, cells: list[Cell], out: str,
                 selected: Collection[str] | None = None, pattern: str = "") -> list[str]:
    """Writes results.csv, results.md and the plots of ``suite``; returns the files.

    Args:
      cells: every cell of the suite (the report covers them all).
      selected: the names of the cells this invocation ran (``--cells``), None for all.
      pattern: the ``--cells`` expression, named beside the cells it did not select.
    """
    records, rows_of = load_records(cells, out)
    if not records:
        return []
    csv_path = os.path.join(out, "results.csv")
    report.write_csv(csv_path, records)
    png = lambda name: os.path.join(out, f"{name}.png")  # noqa: E731
    suite_report = SUITE_REPORTS.get(suite, _atari_smoke_report)
    sections, plots = suite_report(records, rows_of, png)
    files = [csv_path, *(p for p in plots if p is not None)]  # None: a plot with no data
    note = missing_note(*missing_cells(cells, out, selected), pattern)
    md_path = os.path.join(out, "results.md")
    _write_markdown(md_path, suite, len(records), note, sections, files)
    return files + [md_path]


def _write_markdown(path: str, suite: str, runs: int, note: str,
                    sections: list[tuple[str, str]], files: list[str]) -> None:
    """results.md: the suite's ``runs``, the machine, the ``note`` on missing cells, the
    ``sections`` (title, body) and the plots among ``files``."""
    with open(path, "w") as f:
        f.write(f"# Ablation suite `{suite}`\n\n")
        f.write(f"{runs} runs; machine: {machine_line()}.\n")
        f.write(note)
        for title, body in sections:
            f.write(f"\n## {title}\n\n{body}\n")
        f.write("\n## Plots\n\n" + "".join(f"![{os.path.basename(p)}]({os.path.basename(p)})\n"
                                          for p in files if p.endswith(".png")))


def _architectures_report(records, rows_of, png):
    """The ``architectures`` suite's sections and plots (``write_report``)."""
    del rows_of
    sebulba = [r for r in records if r["arch"] == "sebulba"]
    sections = [("Architectures", report.architectures_table(records))]
    if report.has_stages(sebulba):  # no Sebulba cell: no empty table
        sections.append(("Sebulba stage times (s per update)",
                         report.stages_table(sebulba, ("env", "algorithm"))))
    line_fields = ("arch", "algorithm")
    plots = [
        report.plot_returns(png("return_vs_env_steps"), records, "env", line_fields, 0,
                            "Anakin vs Sebulba: return against env steps",
                            registry.return_range),
        report.plot_returns(png("return_vs_wall_clock"), records, "env", line_fields, 1,
                            "Anakin vs Sebulba: return against wall-clock",
                            registry.return_range),
        report.plot_sps(png("sps"), records, ARCH_SPS_FIELDS,
                        "Steady-state SPS per agent (this machine)"),
        report.plot_stages(png("sebulba_stage_times"), sebulba, ("env", "algorithm"),
                           "Sebulba stage times per update"),
    ]
    return sections, plots


def _pipelines_report(records, rows_of, png):
    """The ``pipelines`` suite's sections and plots (``write_report``)."""
    spreads = report.pipeline_spreads(records, rows_of)
    sections = [("Pipelines", report.pipelines_table(records, spreads))]
    fields = ("pipeline", "jitter_ms", "threads")
    plots = [
        report.plot_returns(png("return_vs_env_steps"), records, "pipeline",
                            ("jitter_ms", "threads"), 0,
                            "Sebulba pipelines under actor jitter: return against env "
                            "steps", registry.return_range),
        report.plot_sps(png("sps"), records, fields, "Sebulba SPS per pipeline, jitter "
                        "and actor threads"),
        report.plot_stages(png("sebulba_stage_times"), records, fields,
                           "Sebulba stage times per update"),
    ]
    return sections, plots


def _devices_report(records, rows_of, png):
    """The ``devices`` suite's sections and plots (``write_report``)."""
    del rows_of
    sections = [("Device splits", report.devices_table(records)),
                ("Stage times (s per update)", report.stages_table(records, ("split",)))]
    plots = [
        report.plot_sps(png("sps"), records, ("split",),
                        "Sebulba SPS per actor+learner split (4 fake CPU devices)"),
        report.plot_stages(png("sebulba_stage_times"), records, ("split",),
                           "Sebulba stage times per actor+learner split"),
    ]
    return sections, plots


def _atari_smoke_report(records, rows_of, png):
    """The ``atari-smoke`` suite's sections and plots (``write_report``)."""
    del rows_of
    sections = [("Atari smoke (Breakout-v5)",
                 report.stages_table(records, ("algorithm",)))]
    plots = [
        report.plot_sps(png("sps"), records, ("algorithm",), "Sebulba Breakout-v5 SPS"),
        report.plot_stages(png("sebulba_stage_times"), records, ("algorithm",),
                           "Sebulba Breakout-v5 stage times per update"),
    ]
    return sections, plots


def _staleness_report(records, rows_of, png, reported=None):
    """The ``staleness`` suite's sections and plots (``write_report``); ``reported``: scores
    read from older reports (``stale.scores_from_report``), the records' own replacing them."""
    del rows_of
    scores = {**(reported or {}), **stale.lag_scores(records, registry.return_range)}
    throughput = [r for r in records if r["part"] == "throughput"]
    sections = [("Return against policy lag", stale.returns_table(scores)),
                (f"Within {stale.WITHIN:.0%} of lag 0", stale.within_table(scores))
                ] if scores else []
    if throughput:
        sections.append(("Throughput against policy lag (Sebulba)",
                         stale.throughput_table(records)))
    plots = [
        stale.plot_return_vs_lag(png("return_vs_lag"), scores, "Final return against policy "
                                 "lag, per staleness correction", _return_label)
        if scores else None,
        stale.plot_throughput_vs_lag(png("throughput_vs_lag"), records, "Sebulba PPO "
                                     "throughput against policy lag (EnvPool CartPole-v1)"),
    ]
    return sections, plots


def _return_label(env: str) -> str:
    return registry.return_axis_label(env).replace("mean episode ", "")


# The report of each suite (any other: the atari-smoke suite's).
SUITE_REPORTS = {"architectures": _architectures_report, "pipelines": _pipelines_report,
                 "devices": _devices_report, "staleness": _staleness_report}


ARCH_SPS_FIELDS = ("env", "algorithm", "arch")


def machine_line() -> str:
    cores = os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{cores} CPU cores, load average {load} when this report was written"


def report_from_csv(paths: list[str], out: str) -> list[str]:
    """Writes the staleness report (results.csv, results.md, plots) in ``out`` from the
    records of the ``results.csv`` files at ``paths`` and the return tables of the
    ``results.md`` reports among them (parts whose CSV predates ``return_last20``); returns
    the files."""
    records = [r for path in paths if not path.endswith(".md") for r in report.read_csv(path)]
    reported = {k: v for path in paths if path.endswith(".md")
                for k, v in stale.scores_from_report(path).items()}
    os.makedirs(out, exist_ok=True)
    csv_path = os.path.join(out, "results.csv")
    report.write_csv(csv_path, records)
    sections, plots = _staleness_report(records, None, lambda n: os.path.join(out, f"{n}.png"),
                                        reported)
    files = [csv_path, *(p for p in plots if p is not None)]
    note = ("Rebuilt from " + ", ".join(os.path.basename(os.path.dirname(os.path.abspath(p)))
                                        + "/" + os.path.basename(p) for p in paths) + ".")
    md_path = os.path.join(out, "results.md")
    _write_markdown(md_path, "staleness", len(records), f"\n{note}\n", sections, files)
    return files + [md_path]


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_csv:
        files = report_from_csv(args.from_csv, args.out)
        print(f"staleness: wrote {', '.join(os.path.basename(f) for f in files)} in {args.out}")
        return 0
    failures = []
    for suite in args.suites:
        out = args.out if len(args.suites) == 1 else os.path.join(args.out, suite)
        os.makedirs(out, exist_ok=True)
        every = suite_cells(suite, args.seeds, args.budget_scale)
        cells = [c for c in every if args.cells_re.search(c.name)]
        if not cells:
            print(f"config error: cells: no cell of suite {suite} matches '{args.cells}'",
                  file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        try:
            failures += run_suite(cells, out, timeout_s=args.cell_timeout_s,
                                  progress=not args.no_progress)
        except Stopped as e:
            print(f"ablate: {signal.Signals(e.signum).name} stopped cell {e.cell} of suite "
                  f"{suite} (it starts over next time); the finished cells are kept in {out}: "
                  f"run the same command to continue", file=sys.stderr)
            return 128 + e.signum
        # The whole suite, whatever --cells ran: cells finished earlier are reported.
        files = write_report(suite, every, out, {c.name for c in cells}, args.cells)
        print(f"{suite}: {len(cells)} cells in {time.perf_counter() - t0:.0f} s; wrote "
              f"{', '.join(os.path.basename(f) for f in files)} in {out}")
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _raise_stopped)  # not on import: notebooks call main()
    signal.signal(signal.SIGINT, _raise_stopped)
    try:
        sys.exit(main())
    except Stopped as stop:  # outside a cell: while parsing or writing a report
        print(f"ablate: stopped by {signal.Signals(stop.signum).name}; the finished cells are "
              f"kept: run the same command to continue", file=sys.stderr)
        sys.exit(128 + stop.signum)
