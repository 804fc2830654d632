"""The ``staleness`` suite's report: return against policy lag per correction, and the
throughput each lag buys in Sebulba (see docs/design.md, "Pipelines and staleness").

Return statistic (``lag_scores``): a run's score is the mean ``episode_return`` over the last
20% of its log lines (``benchmarks.ablate_report.return_last20``); the runs of
one (env, algorithm, correction, lag) group, all at the same env steps, give the IQM of
their scores (rliable: the 25% trimmed mean) with a 95% percentile stratified-bootstrap
interval over runs (``benchmarks.aggregate.iqm_interval``), clipped to the env's return
range. Throughput (``throughput_table``): the Sebulba cells' steady-state SPS per agent
(``benchmarks.ablate_report.steady_rate``) per lag, actors jittered.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from benchmarks import ablate_report as report
from benchmarks.figures import pyplot, save_figure

WITHIN = 0.05  # ``within_table``: a lag "keeps" the return within this fraction of lag 0's
DODGE = 0.08  # horizontal offset between the corrections' points in the return plot
SETTING_FIELDS = ("env", "algorithm")
ReturnRange = Callable[[str], tuple[float | None, float | None]]


class LagScore(NamedTuple):
    """One (env, algorithm, correction, lag) group: IQM of the runs' scores, its 95%
    interval (clipped to the return range), how many runs, and their env steps (one value
    when all ran the same budget, else the smallest)."""

    iqm: float
    low: float
    high: float
    runs: int
    env_steps: int


def run_score(rec: dict) -> float | None:
    """``return_last20`` of a run: from its curve where the record has one (read from its run
    directory), else the record's own field (a ``results.csv`` row)."""
    if "curve" in rec:
        return report.return_last20([p[2] for p in rec["curve"]])
    return rec.get("return_last20")


def lag_scores(records: Sequence[dict], return_range: ReturnRange | None = None
               ) -> dict[tuple, LagScore]:
    """``{(env, algorithm, correction, lag): LagScore}`` of the ``returns`` part's records
    (groups whose runs have no episode left out)."""
    from benchmarks.aggregate import iqm_interval

    out = {}
    part = [r for r in records if r.get("part") == "returns"]
    for key, recs in report.groups(part, SETTING_FIELDS + ("correction", "lag")).items():
        scores = [s for s in (run_score(r) for r in recs) if s is not None]
        if not scores:
            continue
        iqm, lo, hi = iqm_interval(scores)
        lowest, highest = return_range(key[0]) if return_range else (None, None)
        lo = lo if lowest is None else max(lo, lowest)
        hi = hi if highest is None else min(hi, highest)
        out[key] = LagScore(iqm, lo, hi, len(scores), min(r["env_steps"] for r in recs))
    return out


RETURNS_HEADING = "Return against policy lag"  # the section ``returns_table`` fills
_CELL = re.compile(r"^(-?[\d.,]+)(?: \[(-?[\d.,]+), (-?[\d.,]+)\])?$")


def scores_from_report(path: str) -> dict[tuple, LagScore]:
    """The ``LagScore``\\ s of a written report's ``RETURNS_HEADING`` table (``returns_table``'s
    form), for a study part whose ``results.csv`` predates ``return_last20``; a point
    estimate without an interval reads as its own interval."""
    with open(path) as f:
        text = f.read().split(f"## {RETURNS_HEADING}", 1)[1]
    lines = [ln for ln in text.strip().split("\n\n", 1)[0].splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    lags = [int(h.split()[1]) for h in header if h.startswith("lag ")]
    out = {}
    number = lambda t: float(t.replace(",", ""))  # noqa: E731
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        steps, runs = int(cells[-2].replace(",", "")), int(cells[-1])
        for lag, cell in zip(lags, cells[3:3 + len(lags)]):
            found = _CELL.match(cell)
            if found:
                iqm = number(found[1])
                low, high = (number(found[2]), number(found[3])) if found[2] else (iqm, iqm)
                out[(*cells[:3], lag)] = LagScore(iqm, low, high, runs, steps)
    return out


def returns_table(scores: dict[tuple, LagScore]) -> str:
    """One row per (env, algorithm, correction), one column per lag: ``IQM [low, high]``."""
    lags = sorted({k[3] for k in scores})
    rows: dict[tuple, list[str]] = {}
    for (env, alg, corr, lag), s in scores.items():
        row = rows.setdefault((env, alg, corr), ["-"] * len(lags) + ["", ""])
        row[lags.index(lag)] = report.ci_text(s.iqm, s.low, s.high)
        row[-2:] = [f"{s.env_steps:,}", str(s.runs)]
    headers = ("env", "algorithm", "correction", *(f"lag {g}" for g in lags), "env steps",
               "runs")
    return (report.markdown_table(headers, [[*k, *v] for k, v in rows.items()])
            + f"\n\nIQM over runs of each run's mean return over the last "
            f"{report.LAST_FRACTION:.0%} of its log lines, all runs of a row at the same env "
            "steps; "
            "[95% percentile stratified-bootstrap interval over runs (rliable, 2000 "
            "replications, seed 0), clipped to the env's return range]. Anakin, all seeds "
            "of a cell in one program.")


def within_of_lag0(scores: dict[tuple, LagScore], tolerance: float = WITHIN
                   ) -> dict[tuple, dict[int, bool]]:
    """``{(env, algorithm, correction): {lag: kept}}``: whether the cell's IQM is within
    ``tolerance`` (a fraction) of the setting's uncorrected IQM at lag 0, or above it
    (settings without that reference are left out)."""
    out: dict[tuple, dict[int, bool]] = {}
    for (env, alg, corr, lag), s in scores.items():
        ref = scores.get((env, alg, "none", 0))
        if ref is not None:
            floor = ref.iqm - tolerance * abs(ref.iqm)
            out.setdefault((env, alg, corr), {})[lag] = s.iqm >= floor
    return out


def within_table(scores: dict[tuple, LagScore], tolerance: float = WITHIN) -> str:
    """One row per (env, algorithm, correction): per lag whether its IQM is within
    ``tolerance`` of lag 0 uncorrected (``within_of_lag0``; "-": not run), and the largest lag
    up to which every lag run is."""
    kept = within_of_lag0(scores, tolerance)
    lags = sorted({lag for row in kept.values() for lag in row})
    rows = []
    for key, row in kept.items():
        upto = [g for g in row if all(row[h] for h in row if h <= g)]
        rows.append([*key, *("yes" if row.get(g) else ("no" if g in row else "-")
                             for g in lags), str(max(upto)) if upto else "none"])
    headers = ("env", "algorithm", "correction", *(f"lag {g}" for g in lags),
               "every lag up to")
    return (report.markdown_table(headers, rows) + f"\n\nWhether the IQM is at least "
            f"{1 - tolerance:.0%} of the same env and algorithm's uncorrected IQM at lag 0 "
            "(the point estimates; their intervals are in the table above); \"every lag up "
            "to\" counts the lags run (\"-\": not run).")


def throughput_table(records: Sequence[dict]) -> str:
    """One row per lag of the ``throughput`` part: SPS, params lag, waits."""
    part = [r for r in records if r.get("part") == "throughput"]
    grps = report.groups(part, ("lag",))
    base = report._mean(r["sps"] for r in grps.get((0,), []))
    rows = []
    for (lag,), recs in sorted(grps.items()):
        sps = [r["sps"] for r in recs if r["sps"] is not None]
        mean = report._mean(sps)
        gain = f"{mean / base:.2f}x" if mean and base else "-"
        rows.append([lag, f"{report.fmt(mean)} ({report.fmt(min(sps, default=None))}.."
                     f"{report.fmt(max(sps, default=None))})", gain,
                     report.fmt(report._mean(r["params_lag"] for r in recs), ".2f"),
                     report.fmt(report._mean(r["learner_wait_frac"] for r in recs), ".2f"),
                     report.fmt(report._mean(r["actor_wait_frac"] for r in recs), ".2f"),
                     len(recs)])
    jitter = "/".join(str(j) for j in sorted({r.get("jitter_ms") for r in part}))
    headers = ("policy lag", "SPS per agent, mean (min..max)", "vs lag 0",
               "params lag (mean)", "learner waits (fraction)", "actors wait (fraction)",
               "seeds")
    return (report.markdown_table(headers, rows) + f"\n\nSebulba PPO, EnvPool CartPole-v1, "
            f"2 actor threads, actor jitter uniform 0..{jitter} ms per env step; steady-state "
            "SPS after the first call (this host, under its load).")


def plot_return_vs_lag(path: str, scores: dict[tuple, LagScore], title: str,
                       axis_label: Callable[[str], str] = lambda env: "return") -> str:
    """Final return (IQM) against policy lag: one panel per (env, algorithm), one line per
    correction (shifted ``DODGE`` apart), its 95% interval as a band and whiskers (already
    clipped to the return range)."""
    plt = pyplot()
    settings = list(dict.fromkeys(k[:2] for k in scores))
    fig, axes = plt.subplots(1, len(settings), figsize=(max(7.0, 5.5 * len(settings)), 4.6),
                             squeeze=False)
    for ax, setting in zip(axes[0], settings):
        lines = report.groups([{"c": k[2], "lag": k[3], "s": s} for k, s in scores.items()
                               if k[:2] == setting], ("c",))
        for i, ((corr,), pts) in enumerate(lines.items()):
            pts = sorted(pts, key=lambda p: p["lag"])
            # Each correction a little to the side (DODGE lags apart) so whiskers don't hide.
            x = np.array([p["lag"] for p in pts]) + DODGE * (i - (len(lines) - 1) / 2)
            y = np.array([p["s"].iqm for p in pts])
            lo, hi = np.array([p["s"].low for p in pts]), np.array([p["s"].high for p in pts])
            line = ax.errorbar(x, y, yerr=[y - lo, hi - y], marker="o", capsize=3,
                               label=corr).lines[0]
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
        runs = sorted({s.runs for k, s in scores.items() if k[:2] == setting})
        steps = min(s.env_steps for k, s in scores.items() if k[:2] == setting)
        ax.set_title(f"{setting[1].upper()} on {setting[0]} ({steps:,} env steps, "
                     f"n={'/'.join(map(str, runs))})", fontsize=10)
        ax.set_xticks(sorted({k[3] for k in scores}))
        ax.set_xlabel("policy lag (updates the acting params trail the learner's)")
        ax.set_ylabel(f"IQM of final-20% {axis_label(setting[0])}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(title="staleness_correction", fontsize=8, title_fontsize=8)
    fig.suptitle(f"{title}\n(bands and whiskers: 95% bootstrap interval over runs, clipped "
                 "to the return range)", fontsize=10)
    return save_figure(fig, path)


def plot_throughput_vs_lag(path: str, records: Sequence[dict], title: str) -> str | None:
    """Sebulba SPS per agent against policy lag (mean over seeds, min..max whiskers); None
    (no file) without throughput records."""
    grps = sorted(report.groups([r for r in records if r.get("part") == "throughput"
                                 and r["sps"] is not None], ("lag",)).items())
    if not grps:
        return None
    plt = pyplot()
    x = [lag for (lag,), _ in grps]
    sps = [[r["sps"] for r in recs] for _, recs in grps]
    mean = np.array([np.mean(s) for s in sps])
    err = [mean - [min(s) for s in sps], [max(s) for s in sps] - mean]
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    ax.errorbar(x, mean, yerr=err, marker="o", capsize=4,
                label=f"mean over seeds (n={'/'.join(sorted({str(len(s)) for s in sps}))}), "
                      "whiskers min..max")
    ax.set_xticks(x)
    ax.set_ylim(0, 1.15 * max(max(s) for s in sps) if not math.isnan(mean.max()) else None)
    ax.set_xlabel("policy lag (updates the acting params trail the learner's)")
    ax.set_ylabel("env steps per second (per agent, after compile)")
    jitter = "/".join(str(j) for j in sorted({r.get("jitter_ms") for _, g in grps for r in g}))
    ax.set_title(f"{title}\n(actor jitter uniform 0..{jitter} ms per env step; this host)",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
