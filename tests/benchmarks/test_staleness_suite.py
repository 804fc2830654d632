"""The ``staleness`` ablation suite: its grid of cells, its return statistic (IQM over runs of
the final-20% mean return, rliable's bootstrap interval) and its report on synthetic records,
and (slow tier) a tiny scaled slice run end to end."""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from benchmarks import ablate, ablate_report, ablate_suites, aggregate, staleness_report
from envs import registry
from rlcore.algorithms import REGISTRY as ALGORITHMS
from tests.helpers import REPO, cell_config

LAGS = (0, 1, 2, 4, 8)
PPO = ("none", "decoupled", "vtrace", "lr_scale", "filter")


def test_staleness_cells_cover_the_issue_grid():
    cells = ablate_suites.suite_cells("staleness", num_seeds=5)
    returns = [c for c in cells if c.field("part") == "returns"]
    want = ({("CartPole-v1", "ppo", g, k) for g in LAGS for k in PPO}
            | {("Breakout-MinAtar", "ppo", g, k) for g in LAGS for k in PPO}
            | {("Breakout-MinAtar", "impala", g, k) for g in LAGS for k in ("none", "lr_scale")}
            | {("Breakout-MinAtar", "pqn", g, "none") for g in LAGS})
    got = [(c.field("env"), c.field("algorithm"), c.field("lag"), c.field("correction"))
           for c in returns]
    assert sorted(got) == sorted(want) and len(got) == 65
    minatar = {cell_config(c).total_env_steps for c in returns
               if c.field("env") == "Breakout-MinAtar"}
    assert all(abs(steps - 1_500_000) < 1_500 for steps in minatar), minatar  # PPO, IMPALA, PQN
    budgets = {}
    for c in returns:
        cfg = cell_config(c)
        assert c.mode == "anakin" and cfg.num_seeds == 5 and c.seeds == tuple(range(5))
        assert (cfg.policy_lag, cfg.staleness_correction) == (c.field("lag"),
                                                              c.field("correction"))
        assert cfg.staleness_correction in ALGORITHMS[cfg.algorithm].staleness_corrections
        budgets.setdefault((c.field("env"), c.field("algorithm")), set()).add(
            (cfg.total_env_steps, cfg.log_every, cfg.num_envs, cfg.num_steps))
    assert all(len(b) == 1 for b in budgets.values())  # equal env steps within a setting
    throughput = [c for c in cells if c.field("part") == "throughput"]
    assert sorted((c.field("lag"), c.seeds) for c in throughput) == sorted(
        (g, (s,)) for g in LAGS for s in range(5))
    for c in throughput:
        cfg = cell_config(c)
        assert c.mode == "sebulba" and cfg.policy_lag == c.field("lag")
        assert cfg.debug.actor_jitter_ms == ablate_suites.STALE_JITTER_MS > 0
    assert len({c.name for c in cells}) == len(cells)


def test_iqm_interval_is_the_trimmed_mean_with_a_bootstrap_interval():
    scores = [10.0, 20.0, 30.0, 40.0, 500.0]
    iqm, lo, hi = aggregate.iqm_interval(scores)
    assert iqm == pytest.approx(stats.trim_mean(scores, 0.25)) == pytest.approx(30.0)
    assert 10.0 <= lo < iqm < hi <= 500.0
    assert aggregate.iqm_interval(scores) == (iqm, lo, hi)  # seeded: reproducible
    assert aggregate.iqm_interval([7.0]) == (7.0, 7.0, 7.0)
    # Against a plain percentile bootstrap of the trimmed mean (many more resamples).
    rng = np.random.default_rng(1)
    x = rng.normal(100.0, 20.0, size=30)
    _, lo, hi = aggregate.iqm_interval(x, reps=4000)
    draws = x[rng.integers(0, x.size, size=(40_000, x.size))]
    ref = np.percentile(stats.trim_mean(draws, 0.25, axis=1), [2.5, 97.5])
    np.testing.assert_allclose([lo, hi], ref, atol=1.0)  # the IQM's standard error is ~4


def _record(env, alg, corr, lag, seed, final, part="returns", sps=None):
    """A finished run whose log lines' returns are 0 for 80% of training, then ``final``."""
    curve = [(100 * i, float(i), 0.0 if i <= 8 else final) for i in range(1, 11)]
    return {"part": part, "env": env, "algorithm": alg, "correction": corr, "lag": lag,
            "seed": seed, "env_steps": 1000, "curve": curve, "sps": sps, "jitter_ms": 10,
            "params_lag": float(lag), "learner_wait_frac": 0.5, "actor_wait_frac": 0.1}


def test_staleness_report_on_synthetic_records(tmp_path):
    finals = (500.0, 500.0, 500.0, 490.0, 20.0)  # CartPole: intervals reach the 500 ceiling
    records = [_record("CartPole-v1", "ppo", corr, lag, s, f - 10 * lag)
               for corr in ("none", "lr_scale") for lag in (0, 2, 8)
               for s, f in enumerate(finals)]
    records += [_record("CartPole-v1", "ppo", "none", lag, s, 0.0, "throughput", sps)
                for lag, sps in ((0, 100.0), (2, 180.0)) for s in range(2)]
    scores = staleness_report.lag_scores(records, registry.return_range)
    assert len(scores) == 6  # throughput records are not scored
    s = scores[("CartPole-v1", "ppo", "none", 0)]
    # Final 20% = the last 2 of 10 lines = ``final``; IQM of 5 = mean of the middle 3.
    assert s.iqm == pytest.approx((500 + 500 + 490) / 3) and s.runs == 5
    assert 0.0 <= s.low <= s.iqm <= s.high <= 500.0 and s.env_steps == 1000
    assert scores[("CartPole-v1", "ppo", "none", 8)].iqm == pytest.approx((420 * 2 + 410) / 3)
    table = staleness_report.returns_table(scores)
    assert "| CartPole-v1 | ppo | lr_scale |" in table and "| lag 8 |" in table
    throughput = staleness_report.throughput_table(records)
    assert "| 2 | 180 (180..180) | 1.80x | 2.00 |" in throughput
    sections, plots = ablate._staleness_report(records, None, lambda n: str(tmp_path / f"{n}.png"))
    assert [t for t, _ in sections] == ["Return against policy lag", "Within 5% of lag 0",
                                        "Throughput against policy lag (Sebulba)"]
    for p in plots:
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_within_five_percent_of_lag0_uncorrected():
    """The reference is the setting's uncorrected lag 0; a dip breaks "every lag up to", a lag
    not run does not."""
    def score(iqm):
        return staleness_report.LagScore(iqm, iqm, iqm, 5, 1000)

    scores = {("E", "ppo", "none", 0): score(100.0), ("E", "ppo", "none", 1): score(95.0),
              ("E", "ppo", "none", 2): score(94.9), ("E", "ppo", "none", 4): score(120.0),
              ("E", "ppo", "vtrace", 0): score(90.0), ("E", "ppo", "vtrace", 4): score(99.0),
              ("E", "ppo", "filter", 1): score(96.0), ("E", "ppo", "filter", 4): score(9.0),
              ("F", "impala", "lr_scale", 0): score(1.0)}  # no uncorrected lag 0: left out
    kept = staleness_report.within_of_lag0(scores)
    assert kept == {("E", "ppo", "none"): {0: True, 1: True, 2: False, 4: True},
                    ("E", "ppo", "vtrace"): {0: False, 4: True},
                    ("E", "ppo", "filter"): {1: True, 4: False}}
    table = staleness_report.within_table(scores)
    assert "| E | ppo | none | yes | yes | no | yes | 1 |" in table
    assert "| E | ppo | vtrace | no | - | - | yes | none |" in table
    assert "| E | ppo | filter | - | yes | - | no | 1 |" in table  # lags not run do not count


@pytest.mark.slow
def test_tiny_staleness_slice_runs_and_reports(tmp_path):
    """Two Anakin cells (2 seeds each) and two Sebulba cells of CartPole at a tiny budget."""
    out = tmp_path / "stale"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.ablate", "--suite=staleness", "--seeds=2",
         f"--out={out}", "--budget_scale=0.1", "--no_progress",
         "--cells=^(anakin-ppo-CartPole-v1-lag2-(none|vtrace)-|sebulba-ppo-CartPole-v1-lag"
         "[02]-j4-s0)"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["part"], r["lag"], r["correction"]) for r in rows) == sorted(
        [("returns", "2", "none")] * 2 + [("returns", "2", "vtrace")] * 2
        + [("throughput", "0", "none"), ("throughput", "2", "none")])
    for r in rows:
        if r["part"] == "throughput":
            assert float(r["params_lag_max"]) == float(r["lag"])
    md = (out / "results.md").read_text()
    assert "| CartPole-v1 | ppo | vtrace |" in md and "| 2 | " in md
    assert sorted(p.name for p in out.glob("*.png")) == ["return_vs_lag.png",
                                                          "throughput_vs_lag.png"]


def test_report_rebuilt_from_two_csvs_equals_the_report_of_all_runs(tmp_path):
    """Two invocations' results.csv (the runs' ``return_last20`` kept there) merge into the
    same scores as the runs read together; --from_csv writes that report, other suites and
    missing files exit 2."""
    records = [_record("Breakout-MinAtar", "ppo", corr, lag, s, 30.0 + s - lag)
               for corr, lags in (("none", (0,)), ("vtrace", (1, 4))) for lag in lags
               for s in range(5)]
    for rec in records:  # what ablate_report.run_records adds from the log lines
        rec["return_last20"] = ablate_report.return_last20([p[2] for p in rec["curve"]])
    paths = []
    for name, part in (("a", records[:5]), ("b", records[5:])):
        (tmp_path / name).mkdir()
        paths.append(str(tmp_path / name / "results.csv"))
        ablate_report.write_csv(paths[-1], part)
    read = [r for p in paths for r in ablate_report.read_csv(p)]
    assert "curve" not in read[0] and read[0]["lag"] == 0 and read[0]["correction"] == "none"
    assert staleness_report.lag_scores(read) == staleness_report.lag_scores(records)
    out = tmp_path / "merged"
    assert ablate.main(["--suite=staleness", f"--out={out}",
                        f"--from_csv={','.join(paths)}"]) == 0
    md = (out / "results.md").read_text()
    assert "Rebuilt from a/results.csv, b/results.csv." in md
    # IQMs 32 (none, lag 0), 31 and 28 (vtrace, lags 1 and 4): 95% of 32 is 30.4.
    assert "| Breakout-MinAtar | ppo | vtrace | - | yes | no | 1 |" in md
    assert (out / "return_vs_lag.png").read_bytes()[:4] == b"\x89PNG"
    for argv in (["--suite=pipelines", f"--from_csv={paths[0]}"],
                 ["--suite=staleness", f"--from_csv={tmp_path / 'none.csv'}"]):
        with pytest.raises(SystemExit) as stop:
            ablate.parse_args([*argv, f"--out={out}"])
        assert stop.value.code == 2


def test_a_written_report_reads_back_as_its_scores(tmp_path):
    """``scores_from_report`` reads the return table ``returns_table`` wrote (to its printed
    digits), so that a study part whose results.csv predates ``return_last20`` joins a
    rebuilt report (``ablate --from_csv=part/results.md,...``)."""
    scores = {("Breakout-MinAtar", "ppo", "none", 0): staleness_report.LagScore(
                  37.84, 23.2, 62.1, 5, 1_499_136),
              ("Breakout-MinAtar", "ppo", "none", 4): staleness_report.LagScore(
                  25.6, 25.6, 25.6, 5, 1_499_136),
              ("Breakout-MinAtar", "pqn", "none", 1): staleness_report.LagScore(
                  -1.5, -2.25, 1234.5, 3, 1_499_136)}
    path = tmp_path / "results.md"
    path.write_text(f"# x\n\n## {staleness_report.RETURNS_HEADING}\n\n"
                    f"{staleness_report.returns_table(scores)}\n\n## Plots\n")
    back = staleness_report.scores_from_report(str(path))
    assert set(back) == set(scores)
    for key, s in scores.items():
        np.testing.assert_allclose(back[key][:3], s[:3], rtol=5e-3)
        assert back[key][3:] == s[3:]
