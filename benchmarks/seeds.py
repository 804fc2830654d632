"""Learning over seeds: variants of one Anakin config, each as one ``num_seeds`` run.

``python -m benchmarks.seeds --config=configs/cartpole_ppo.py --seeds=10 --out=DIR
--variant=base: --variant=vclip:clip_vloss=True [--set=num_envs=64]`` runs every variant
as ``python -m anakin.main --config=... --config.num_seeds=N --config.<override>...`` in
``DIR/<variant>`` and prints, per variant, the statistic the learning-quality comparisons
use: for each seed the mean of its logged episode returns (``--key``: another metric, e.g.
``eval/episode_return``) over the last 20% of training
(env steps above 80% of the budget), then the mean over seeds, its min and max, and how
many seeds end at ``--threshold`` or more. A variant whose run directory already has the
budget's last line is not run again (``--rerun`` forces it). The table also goes to
``DIR/seeds.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.common import file_problem, flag_checks, format_table, path_check, read_rows
from rlcore.errors import ConfigError
from rlcore.numbers import readable
from runtime.config.fields import POSITIVE, Number
from runtime.process.arguments import OneLineParser, doc_summary
from runtime.process.paths import output_dir_problem

LAST_FRACTION = 0.2


def parse_args(argv=None):
    p = OneLineParser(prog="python -m benchmarks.seeds", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--config", required=True, help="an Anakin config file")
    p.add_argument("--seeds", type=int, default=10,
                   help="seeds 0..N-1, in one program (default: %(default)s)")
    p.add_argument("--out", required=True, help="output directory (variants resumed)")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:field=value,field=value, repeatable (empty after the colon: "
                        "the config as it is)")
    p.add_argument("--set", action="append", default=[],
                   help="field=value for every variant, repeatable (e.g. num_envs=64)")
    p.add_argument("--threshold", type=float, default=475.0,
                   help="a seed counts as reaching it when its final-20%% mean is >= this "
                        "(default: %(default)s)")
    p.add_argument("--key", default="episode_return",
                   help="the metrics key averaged (default: %(default)s; e.g. "
                        "eval/episode_return, the greedy evaluation's, with eval_every set)")
    p.add_argument("--rerun", action="store_true", help="run variants again even if done")
    return p.parse_args(argv)


def check_args(args) -> None:
    """The flags' rules, before any run; raises ``ConfigError`` naming the flag
    (docs/design.md, "Exit codes")."""
    flag_checks({"seeds": POSITIVE, "threshold": Number()}, path_check("config", file_problem),
                path_check("out", output_dir_problem))(args)
    if not args.variant:
        raise ConfigError("variant: give at least one (e.g. --variant=base:)")
    for v in args.variant:
        if ":" not in v or not v.split(":", 1)[0]:
            raise ConfigError(f"variant: {v!r} is not NAME:field=value,...")


def overrides(spec: str) -> list[str]:
    """``"a=1,b=2"`` -> ``["--config.a=1", "--config.b=2"]`` (values may hold no comma)."""
    return [f"--config.{kv}" for kv in spec.split(",") if kv]


def final_means(rows: list[dict], total_env_steps: int,
                key: str = "episode_return") -> dict[int, float]:
    """``{seed: mean of key over its lines past (1 - LAST_FRACTION) of the budget}`` (lines
    without ``key``, or with None, left out)."""
    cut = (1 - LAST_FRACTION) * total_env_steps
    per_seed: dict[int, list[float]] = {}
    for r in rows:
        if r["env_steps"] > cut and r.get(key) is not None:
            per_seed.setdefault(int(r.get("seed", 0)), []).append(r[key])
    return {s: sum(v) / len(v) for s, v in sorted(per_seed.items())}


def run_variant(args, name: str, spec: str) -> dict:
    workdir = os.path.join(args.out, name)
    cmd = [sys.executable, "-m", "anakin.main", f"--config={args.config}",
           f"--config.num_seeds={args.seeds}", *overrides(",".join(args.set)),
           *overrides(spec), f"--workdir={workdir}"]
    config_path = os.path.join(workdir, "config.json")
    done = os.path.exists(os.path.join(workdir, "done.json"))
    if args.rerun or not done or json.load(open(os.path.join(workdir, "done.json"))) != cmd:
        subprocess.run([*cmd, "--fresh"], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(workdir, "done.json"), "w") as f:
            json.dump(cmd, f)
    with open(config_path) as f:
        total = json.load(f)["total_env_steps"]
    means = final_means(read_rows(workdir), total, args.key)
    if not means:
        raise ConfigError(f"key: no line of {workdir}/metrics.jsonl past 80% of the budget "
                          f"has {args.key!r}")
    values = list(means.values())
    return {"variant": name, "overrides": spec or "-", "seeds": len(values),
            "mean": sum(values) / len(values), "min": min(values), "max": max(values),
            "reach": sum(v >= args.threshold for v in values), "per_seed": values}


def main(argv=None) -> None:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    results = [run_variant(args, *v.split(":", 1)) for v in args.variant]
    headers = ["variant", "overrides", "seeds", "mean final-20%", "min", "max",
               f">= {args.threshold:g}"]
    rows = [[r["variant"], r["overrides"], r["seeds"], readable(r["mean"]), readable(r["min"]),
             readable(r["max"]), f"{r['reach']}/{r['seeds']}"] for r in results]
    table = format_table(headers, rows)
    common = ", ".join(args.set) or "none"
    text = (f"{args.config}, {args.seeds} seeds, common overrides: {common}, statistic: "
            f"{args.key}\n{table}\n"
            + "\n".join(f"{r['variant']} per seed: " + " ".join(f"{v:.0f}" for v in r["per_seed"])
                        for r in results))
    print(text)
    with open(os.path.join(args.out, "seeds.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
