"""Helpers of ``benchmarks/gpu_check.sh``: run a step with its device memory noted, and print
the one table of the check.

``python -m benchmarks.gpu_check_table measure --memory_out=F.json MODULE [ARGS...]`` runs
``python -m MODULE ARGS...`` in this process and, when it exits (normally, by
``sys.exit``, or after SIGTERM), writes the first device's name and peak memory
(``jax.devices()[0].memory_stats()``; None where the platform keeps none, e.g. CPU) to
``F.json``.

``python -m benchmarks.gpu_check_table table --out=DIR [--title=T]`` reads what the steps
left in ``DIR``: ``anakin.json`` (``benchmarks.anakin_throughput --json_out``),
``sebulba.log`` (``benchmarks.sebulba_throughput``'s printed tables), ``run/metrics.jsonl``
(the Sebulba Atari run), ``<step>.mem.json`` and ``<step>.rc`` (``exit-code time-limit``)
files, and prints one table: env steps/s, frames/s (4 per env step on Atari, frame skip
4), seconds (per update, per stage, or to the first update) and peak device memory.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import runpy
import signal
import sys

from benchmarks.common import dir_problem, format_table, path_check
from runtime.process.arguments import OneLineParser, doc_summary
from runtime.run.files import read_metrics
from sebulba import timers

FRAME_SKIP = 4  # Atari (EnvPool -v5): one env step is 4 frames
STEPS = ("anakin", "sebulba", "run")
HEADERS = ("step", "measurement", "env steps/s", "frames/s", "seconds", "peak device memory")
# Sebulba's stages in pipeline order (benchmarks.sebulba_throughput.STAGES); others after.
STAGES = timers.REPORT_ORDER


# --- measure -------------------------------------------------------------------------


def memory_record() -> dict:
    """The first device's name and memory statistics (bytes; None where not kept)."""
    import jax

    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    return {"device": f"{device} ({device.device_kind})",
            "peak_bytes": stats.get("peak_bytes_in_use"),
            "limit_bytes": stats.get("bytes_limit")}


def measure(memory_out: str, module: str, args: list[str]) -> None:
    """Runs ``python -m module *args`` here; writes ``memory_record()`` to ``memory_out`` at
    exit (an atexit hook registered after jax's own, so it runs before jax shuts down)."""
    import jax  # noqa: F401 - imported before the hook is registered (see above)

    def write():
        try:
            record = memory_record()
        except Exception as e:  # noqa: BLE001 - a step that broke JAX still gets its table
            record = {"device": None, "peak_bytes": None, "error": repr(e)}
        with open(memory_out, "w") as f:
            json.dump(record, f)

    atexit.register(write)
    # SIGTERM (from timeout) ends the step through SystemExit, so the hook runs; a trainer
    # that handles signals itself installs its own handler over this one.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


# --- table -------------------------------------------------------------------------------


def read_json(path: str):
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_status(out: str, step: str) -> tuple[int | None, float, float]:
    """``(exit code, time limit, seconds taken)`` from ``<step>.rc``; code None if the step
    did not run."""
    try:
        with open(os.path.join(out, f"{step}.rc")) as f:
            code, limit, seconds = f.read().split()
        return int(code), float(limit), float(seconds)
    except (OSError, ValueError):
        return None, 0.0, 0.0


def parse_tables(text: str) -> list[list[dict]]:
    """The ``benchmarks.common.format_table`` tables in ``text``: rows as ``{header: cell}``."""
    lines = text.splitlines()
    tables = []
    for i in range(1, len(lines)):
        if "-+-" not in lines[i] or " | " not in lines[i - 1]:
            continue
        headers = [h.strip() for h in lines[i - 1].split(" | ")]
        rows = []
        for line in lines[i + 1:]:
            cells = [c.strip() for c in line.split(" | ")]
            if len(cells) != len(headers):
                break
            rows.append(dict(zip(headers, cells)))
        tables.append(rows)
    return tables


def number(cell: str) -> float | None:
    """``"12,345"`` -> 12345.0; None for a cell that is not a number."""
    try:
        return float(cell.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def anakin_rows(data: dict) -> list[list]:
    """Rows of ``benchmarks.anakin_throughput``'s JSON: env alone, training, first update,
    agents in one program (CartPole: no frames)."""
    rows = []
    for r in data.get("results", []):
        n = r["num_envs"]
        rows.append([f"random-action env, {n} envs", r["env_sps"], None, None])
        rows.append([f"PPO training, {n} envs (s per update)", r["train_sps"], None,
                     r["train_update_s"]])
    for f in data.get("first_update", []):
        rows.append([f"time to first update, configs/{f['config']}.py", None, None,
                     f["seconds"]])
    for a in data.get("agents", []):
        rows.append([f"{a['agents']} agents x {a['envs_per_agent']} envs in one program "
                     "(s: first call)",
                     a["total_sps"], None, a["first_call_s"]])
    return rows


# benchmarks.sebulba_throughput's stage columns and their row labels here.
SEBULBA_STAGES = (("(a) raw env SPS", "(a) raw EnvPool env"),
                  ("(b) actor loop SPS", "(b) actor loop, trivial policy"),
                  ("(c) actor SPS", "(c) actor with the network"),
                  ("(d) learner-only SPS", "(d) learner only"),
                  ("(e) end-to-end SPS", "(e) end to end"))


def sebulba_rows(text: str) -> list[list]:
    """Rows of ``benchmarks.sebulba_throughput``'s first printed table, one per stage (a)-(e)
    (Atari: frames); the end-to-end row names the efficiency, (e) / min((b), (d))."""
    tables = parse_tables(text)
    rows = []
    for r in tables[0] if tables else []:
        split = r.get("split", "?")
        for key, what in SEBULBA_STAGES:
            sps = number(r.get(key))
            label = f"{what}, split {split}"
            if key == SEBULBA_STAGES[-1][0] and r.get("efficiency"):
                label += f" (efficiency {r['efficiency']})"
            rows.append([label, sps, None if sps is None else FRAME_SKIP * sps, None])
    return rows


def run_rows(rows: list[dict], config: dict | None = None) -> list[list]:
    """Rows of the Sebulba run (``config``: its config.json): SPS after the first
    (compiling) log line and the mean seconds per update of each ``time/<stage>_s`` stage
    over the same log lines."""
    if not rows:
        return []
    config = config or {}
    env_id = config.get("env_id", "?")
    atari = env_id.endswith("-v5")
    first, last = rows[0], rows[-1]
    later = rows[1:] or rows
    if len(rows) > 1 and last["wall_time"] > first["wall_time"]:
        sps = (last["env_steps"] - first["env_steps"]) / (last["wall_time"] - first["wall_time"])
    else:
        sps = last.get("sps")
    out = [[f"{config.get('algorithm', '?')} {env_id} {config.get('network', '')}, "
            f"{config.get('num_envs', '?')} envs: {last['update']} updates, "
            f"{last['env_steps']:,} env steps", sps,
            FRAME_SKIP * sps if atari and sps else None, None]]
    found = [k[len("time/"):-2] for k in last if k.startswith("time/") and k.endswith("_s")]
    order = [s for s in STAGES if s in found] + [s for s in found if s not in STAGES]
    for stage in order:
        values = [r[f"time/{stage}_s"] for r in later
                  if isinstance(r.get(f"time/{stage}_s"), (int, float))]
        if values:
            out.append([f"  stage {stage} (s per update)", None, None,
                        sum(values) / len(values)])
    return out


def memory_cell(record) -> str:
    """``"12.3 GiB of 80.0 GiB"``, or why there is no number."""
    if not record:
        return "n/a (not recorded)"
    peak, limit = record.get("peak_bytes"), record.get("limit_bytes")
    if peak is None:
        return "n/a (no memory stats)"
    gib = lambda b: f"{b / 2**30:.2f} GiB"
    return gib(peak) + (f" of {gib(limit)}" if limit else "")


def status_note(step: str, code: int | None, limit: float, seconds: float) -> str | None:
    """What went wrong with a step, or None (the run step ends on its timer by design:
    SIGTERM, a checkpoint, exit 143)."""
    if code is None:
        return "did not run"
    if code == 0 or (step == "run" and code == 143):
        return None
    if seconds >= limit:
        return f"timed out after {limit:g} s (exit code {code})"
    return f"failed with exit code {code}"


def fmt(value, seconds: bool = False) -> str:
    """A table cell: rates with thousands separators, seconds to 4 significant digits, '-'
    for none."""
    if value is None:
        return "-"
    return f"{value:.4g}" if seconds else f"{value:,.0f}"


def table(out: str) -> tuple[str, list[list[str]]]:
    """The device line and the table rows of the check in ``out``."""
    sources = {
        "anakin": lambda: anakin_rows(read_json(os.path.join(out, "anakin.json")) or {}),
        "sebulba": lambda: sebulba_rows(_read_text(os.path.join(out, "sebulba.log"))),
        "run": lambda: run_rows(read_metrics(os.path.join(out, "run")),
                                read_json(os.path.join(out, "run", "config.json"))),
    }
    names = {"anakin": "anakin_throughput", "sebulba": "sebulba_throughput",
             "run": "sebulba Atari run"}
    cells, device = [], None
    for step in STEPS:
        memory = read_json(os.path.join(out, f"{step}.mem.json"))
        device = device or (memory or {}).get("device")
        rows = sources[step]() or [["no results", None, None, None]]
        note = status_note(step, *read_status(out, step))
        if note is not None:
            rows = [[f"{note}; see {os.path.join(out, step + '.log')}", None, None, None],
                    *rows]
        for i, (what, sps, frames, seconds) in enumerate(rows):
            cells.append([names[step] if i == 0 else "", what, fmt(sps), fmt(frames),
                          fmt(seconds, seconds=True), memory_cell(memory) if i == 0 else ""])
    return device or "unknown device", cells


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def determinism_line(workdir_a: str, workdir_b: str) -> str:
    """Whether two runs of one seed (the check's ``deterministic=True`` pair) logged the
    same metrics, clock keys aside: one line naming the first difference if not."""
    from runtime.run.metrics import is_clock_key  # (only here: the other commands need no JAX)

    def steady(path):
        return [{k: v for k, v in row.items() if not is_clock_key(k)}
                for row in read_metrics(path)]

    a, b = steady(workdir_a), steady(workdir_b)
    if not a or not b:
        return f"determinism: no metrics to compare ({len(a)} and {len(b)} lines)"
    if a == b:
        return f"determinism: identical metrics in both runs ({len(a)} lines, clock aside)"
    for i, (ra, rb) in enumerate(zip(a, b)):
        keys = sorted(k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k))
        if keys:
            return (f"determinism: the runs differ from line {i + 1} (update "
                    f"{ra.get('update')}): {', '.join(keys[:5])}")
    return f"determinism: the runs logged {len(a)} and {len(b)} lines"


def check_args(args: argparse.Namespace) -> None:
    """The directories ``table`` and ``same`` read exist; raises ``ConfigError`` naming the
    argument (docs/design.md, "Exit codes")."""
    if args.command == "table":
        path_check("out", dir_problem)(args)
    for workdir in args.workdirs if args.command == "same" else ():
        path_check("workdirs", dir_problem)(argparse.Namespace(workdirs=workdir))


def main(argv=None) -> None:
    p = OneLineParser(prog="python -m benchmarks.gpu_check_table",
                      description=doc_summary(__doc__), check=check_args)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="run `python -m MODULE ARGS...`, noting device memory")
    m.add_argument("--memory_out", required=True)
    m.add_argument("module")
    m.add_argument("args", nargs=argparse.REMAINDER)
    t = sub.add_parser("table", help="print the check's table from the files in --out")
    t.add_argument("--out", required=True)
    t.add_argument("--title", default="GPU check")
    d = sub.add_parser("same", help="whether two run directories logged the same metrics")
    d.add_argument("workdirs", nargs=2)
    args = p.parse_args(argv)
    if args.command == "measure":
        measure(args.memory_out, args.module, args.args)
        return
    if args.command == "same":
        print(determinism_line(*args.workdirs))
        return
    device, cells = table(args.out)
    print(f"\n{args.title} on {device}")
    print(format_table(HEADERS, cells))


if __name__ == "__main__":
    main()
