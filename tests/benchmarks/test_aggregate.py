"""benchmarks.aggregate: run scores from synthetic run directories, rliable's estimates on the
human-normalised score matrix, the reports, and exit code 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from benchmarks import aggregate
from tests.helpers import REPO

REPS = 300
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# (random, human), written out here so the test does not lean on the table it checks against.
REF = {"Breakout": (1.7, 30.5), "MontezumaRevenge": (0.0, 4753.3), "Pong": (-20.7, 14.6)}


def make_run(root, name, env_id, returns, *, algorithm="ppo", seed_tags=None, config=None):
    """A run directory: config.json and one metrics line per value of ``returns`` (None: no
    episode ended in that window). ``seed_tags``: one line per tag per log step."""
    path = root / name
    path.mkdir(parents=True)
    cfg = {"env_id": env_id, "algorithm": algorithm, "seed": 0, "num_envs": 8}
    (path / "config.json").write_text(json.dumps(config if config is not None else cfg))
    lines = []
    for update, value in enumerate(returns, start=1):
        for tag in seed_tags or [None]:
            row = {"update": update, "env_steps": 1024 * update, "wall_time": 0.1 * update,
                   "sps": 1e4, "episode_return": None if value is None else value + (tag or 0),
                   "loss/total": 0.5}
            if tag is not None:
                row = {"seed": tag, **row}
            lines.append(json.dumps(row))
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return str(path)


def returns_ending_in(last_two):
    """Ten log lines, two without episodes, the last two with values ``last_two``."""
    return [None, -5.0, 0.0, None, 3.0, 1.0, 2.0, 7.0, *last_two]


# Runs per game, named so that sorting by path keeps this order; each score is the mean of
# the last 2 of 8 lines with returns (--last_fraction=0.25).
LAST_TWO = {
    "Breakout": [(10.0, 12.0), (30.0, 40.0), (1.0, 3.0)],
    "MontezumaRevenge": [(0.0, 0.0), (400.0, 0.0), (2500.0, 2500.0)],
    "Pong": [(-21.0, -19.0), (0.0, 2.0), (20.0, 21.0)],
}


def expected_matrices(last_two=LAST_TWO):
    """``(raw, normalised)`` ``[runs, games]``, games sorted by name, from the hand values."""
    raw = np.array([[np.mean(v) for v in last_two[g]] for g in sorted(last_two)]).T
    random = np.array([REF[g][0] for g in sorted(last_two)])
    human = np.array([REF[g][1] for g in sorted(last_two)])
    return raw, (raw - random) / (human - random)


def rliable_reference(hns, reps=REPS, seed=0):
    """rliable called directly: ``([median, mean, IQM, OG], [2, 4] interval)``."""
    from rliable import library, metrics

    fn = lambda x: np.array([metrics.aggregate_median(x), metrics.aggregate_mean(x),
                             metrics.aggregate_iqm(x), metrics.aggregate_optimality_gap(x)])
    saved = np.random.get_state()
    np.random.seed(seed)   # rliable 1.2 resamples with the global RNG, not random_state
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)   # arch: random_state deprecated
            points, intervals = library.get_interval_estimates(
                {"x": hns}, fn, reps=reps, random_state=np.random.RandomState(seed))
    finally:
        np.random.set_state(saved)
    return points["x"], intervals["x"]


@pytest.fixture
def three_by_three(tmp_path):
    runs = []
    for game, lasts in LAST_TWO.items():
        for i, last in enumerate(lasts):
            prefix = "envpool:" if i == 1 else ""
            runs.append(make_run(tmp_path / "runs", f"{game}_{i}", f"{prefix}{game}-v5",
                                 returns_ending_in(last)))
    return runs


def run_main(argv, capsys):
    code = aggregate.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_three_games_three_runs_match_rliable(tmp_path, three_by_three, capsys):
    out = tmp_path / "out"
    code, stdout, _ = run_main([*three_by_three, f"--out={out}", "--last_fraction=0.25",
                                f"--reps={REPS}", "--seed=3"], capsys)
    assert code == 0
    report = json.loads((out / "aggregate.json").read_text())
    raw, hns = expected_matrices()
    assert report["games"] == ["Breakout", "MontezumaRevenge", "Pong"]
    assert report["runs_per_game"] == 3 and report["dropped_runs"] == 0
    np.testing.assert_allclose(report["normalised_score_matrix"], hns, rtol=1e-12)
    for j, game in enumerate(report["games"]):
        g = report["per_game"][game]
        np.testing.assert_allclose([r["raw"] for r in g["runs"]], raw[:, j])
        assert g["raw_mean"] == pytest.approx(raw[:, j].mean())
        assert [r["log_lines_with_returns"] for r in g["runs"]] == [8, 8, 8]
        assert all(r["env_steps"] == 10 * 1024 for r in g["runs"])

    points, intervals = rliable_reference(hns, seed=3)
    for i, metric in enumerate(aggregate.METRICS):
        assert report["metrics"][metric]["point"] == pytest.approx(points[i], rel=1e-12)
        np.testing.assert_allclose(report["metrics"][metric]["ci95"], intervals[:, i],
                                   rtol=1e-12)
    low, high = report["metrics"]["median"]["ci95"]
    assert low < high   # three runs per game: real intervals

    md = (out / "aggregate.md").read_text()
    assert md == stdout
    assert "| metric | point estimate | 95% CI |" in md
    median = report["metrics"]["median"]
    assert f"| Median | {median['point']:.3f} | [{low:.3f}, {high:.3f}] |" in md
    assert "| Pong | 3 |" in md and "collapse" not in md
    assert (out / "aggregate.png").read_bytes()[:8] == PNG_MAGIC


def test_reps_and_seed_are_what_changes_the_intervals(tmp_path, three_by_three, capsys):
    def ci(out, *extra):
        assert aggregate.main([*three_by_three, f"--out={out}", *extra]) == 0
        return json.loads((out / "aggregate.json").read_text())["metrics"]["iqm"]["ci95"]

    first = ci(tmp_path / "a", "--reps=200", "--seed=1")
    assert ci(tmp_path / "b", "--reps=200", "--seed=1") == first
    assert ci(tmp_path / "c", "--reps=200", "--seed=2") != first
    capsys.readouterr()


def test_single_run_intervals_collapse(tmp_path, capsys):
    runs = [make_run(tmp_path, "pong", "Pong-v5", [None, 5.0, 14.6]),
            make_run(tmp_path, "breakout", "Breakout-v5", [1.7, None, 1.7])]
    out = tmp_path / "out"
    code, stdout, _ = run_main([*runs, f"--out={out}", f"--reps={REPS}"], capsys)
    assert code == 0
    report = json.loads((out / "aggregate.json").read_text())
    assert report["runs_per_game"] == 1
    # last_fraction 0.1 of 2 lines with returns: the last line alone.
    assert report["per_game"]["Pong"]["normalised_mean"] == pytest.approx(1.0)
    assert report["per_game"]["Breakout"]["normalised_mean"] == pytest.approx(0.0)
    for metric in aggregate.METRICS:
        e = report["metrics"][metric]
        assert e["ci95"] == pytest.approx([e["point"], e["point"]])
    assert report["metrics"]["mean"]["point"] == pytest.approx(0.5)
    assert report["metrics"]["optimality_gap"]["point"] == pytest.approx(0.5)
    assert "intervals collapse to the point estimates" in stdout
    assert (out / "aggregate.png").read_bytes()[:8] == PNG_MAGIC


def test_seed_tagged_lines_are_separate_runs(tmp_path, capsys):
    # One num_seeds=2 directory per game: seed s adds s to every return.
    runs = [make_run(tmp_path, "pong", "Pong-v5", [None, -20.7, -20.7], seed_tags=[0, 1]),
            make_run(tmp_path, "alien", "Alien-v5", [227.8, 227.8], seed_tags=[0, 1])]
    out = tmp_path / "out"
    assert run_main([*runs, f"--out={out}", f"--reps={REPS}"], capsys)[0] == 0
    report = json.loads((out / "aggregate.json").read_text())
    assert report["runs_per_game"] == 2
    pong = report["per_game"]["Pong"]["runs"]
    assert [r["seed"] for r in pong] == [0, 1]
    assert [r["raw"] for r in pong] == pytest.approx([-20.7, -19.7])


def test_unequal_runs_per_game_refused_or_dropped(tmp_path, capsys):
    runs = [make_run(tmp_path, f"pong{i}", "Pong-v5", [float(i)]) for i in range(3)]
    runs.append(make_run(tmp_path, "breakout0", "Breakout-v5", [5.0]))
    runs.append(make_run(tmp_path, "breakout1", "Breakout-v5", [7.0]))
    code, stdout, err = run_main([*runs, f"--out={tmp_path / 'o'}"], capsys)
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and "Breakout 2, Pong 3" in err
    code, stdout, _ = run_main([*runs, f"--out={tmp_path / 'o'}", "--drop_extra_runs",
                                f"--reps={REPS}"], capsys)
    assert code == 0
    report = json.loads((tmp_path / "o" / "aggregate.json").read_text())
    assert report["runs_per_game"] == 2 and report["dropped_runs"] == 1
    assert [r["raw"] for r in report["per_game"]["Pong"]["runs"]] == [0.0, 1.0]
    assert "1 run(s) beyond the first 2 of each game" in stdout


def test_run_score_takes_the_last_fraction_of_lines_with_returns():
    returns = [float(v) for v in range(1, 31)]
    assert aggregate.run_score(returns, 0.1) == pytest.approx(np.mean([28, 29, 30]))
    assert aggregate.run_score(returns, 1.0) == pytest.approx(15.5)
    assert aggregate.run_score([4.0, 8.0], 0.1) == 8.0   # at least one line


def _bad_inputs(tmp_path):
    ok = make_run(tmp_path, "ok", "Pong-v5", [1.0])
    no_metrics = tmp_path / "no_metrics"
    no_metrics.mkdir()
    (no_metrics / "config.json").write_text(json.dumps({"env_id": "Pong-v5"}))
    no_config = tmp_path / "no_config"
    no_config.mkdir()
    (no_config / "metrics.jsonl").write_text(json.dumps({"episode_return": 1.0}) + "\n")
    cartpole = make_run(tmp_path, "cartpole", "CartPole-v1", [500.0])
    minatar = make_run(tmp_path, "minatar", "Breakout-MinAtar", [10.0])
    no_episodes = make_run(tmp_path, "no_episodes", "Pong-v5", [None, None])
    broken = make_run(tmp_path, "broken", "Pong-v5", [1.0])
    with open(f"{broken}/metrics.jsonl", "a") as f:
        f.write('{"update": 2, "episode_ret\n')
    no_env_id = make_run(tmp_path, "no_env_id", "Pong-v5", [1.0], config={"seed": 1})
    return [
        ([], "RUN_DIR", "no run directories"),
        ([str(tmp_path / "missing")], "missing", "not a directory"),
        ([str(no_metrics)], "no_metrics", "no metrics.jsonl"),
        ([str(no_config)], "no_config", "no config.json"),
        ([ok, cartpole], "cartpole", "not one of the 57 Atari games"),
        ([minatar], "minatar", "'Breakout-MinAtar' is not one of the 57 Atari games"),
        ([no_episodes], "no_episodes", "no metrics.jsonl line has an episode_return"),
        ([broken], "broken/metrics.jsonl:2", "not valid JSON"),
        ([no_env_id], "no_env_id", "no env_id"),
        ([ok, ok], "ok", "given more than once"),
        ([ok, "--last_fraction=0"], "--last_fraction", "must be in (0, 1]"),
    ]


def test_bad_input_exits_2_with_one_line_naming_the_path(tmp_path, capsys):
    for args, path, problem in _bad_inputs(tmp_path):
        code, stdout, err = run_main([*args, f"--out={tmp_path / 'out'}"], capsys)
        assert code == 2, args
        assert stdout == "" and err.count("\n") == 1, (args, err)
        assert path in err and problem in err, (args, err)
    assert not (tmp_path / "out").exists()


def test_out_naming_a_file_exits_2_before_any_work(tmp_path, three_by_three, capsys):
    """``--out`` that is a file, or lies under one: one line naming ``--out``, exit 2,
    checked before the runs are read (``check_args``)."""
    blocker = tmp_path / "report.md"
    blocker.write_text("not a directory")
    for out, problem in ((blocker, f"{blocker} is a file"),
                         (blocker / "sub", f"{blocker} is a file")):
        code, stdout, err = run_main([*three_by_three, f"--out={out}"], capsys)
        assert code == 2 and stdout == "" and err.count("\n") == 1, err
        assert err.startswith("aggregate: --out: ") and problem in err, err


def test_cli_subprocess_writes_reports_and_exits_2_on_bad_input(tmp_path, three_by_three):
    out = tmp_path / "cli"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.aggregate", *three_by_three, f"--out={out}",
         "--reps=200"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| metric | point estimate | 95% CI |" in done.stdout
    assert "| IQM |" in done.stdout
    assert {p.name for p in out.iterdir()} == {"aggregate.md", "aggregate.json", "aggregate.png"}

    cartpole = make_run(tmp_path, "cartpole", "CartPole-v1", [500.0])
    bad = subprocess.run(
        [sys.executable, "-m", "benchmarks.aggregate", cartpole, f"--out={tmp_path / 'x'}"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        f"aggregate: {cartpole}: env_id 'CartPole-v1' is not one of the 57 Atari games"]
