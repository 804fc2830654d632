"""benchmarks.curves and runtime.run.curves: lines per swept values with a band over seeds (a
3 learning rates x 2 seeds sweep is 3 lines of 2 seeds each), the final-20% statistic, the
two-panel PNG, the wall-clock of a resumed run, the axis label of the env, and the one-line
exit-2 refusals of a run with nothing to plot or a damaged file."""

import json

import numpy as np
import pytest

from benchmarks import curves
from envs import registry
from runtime.run import curves as run_curves
from runtime.run import files


def _run(path, rows, env_id=None):
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if env_id:
        (path / "config.json").write_text(json.dumps({"env_id": env_id}))
    return str(path)


def _png(path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_statistic_and_plot(tmp_path, capsys):
    # Two agents of one program (seed keys) and a plain run; 10 lines each, 1000 steps apart.
    many = _run(tmp_path / "many", [{"seed": s, "env_steps": 1000 * (i + 1), "wall_time": i,
                                     "episode_return": float(i + s)}
                                    for i in range(10) for s in (0, 1)])
    one = _run(tmp_path / "one", [{"env_steps": 1000 * (i + 1), "wall_time": i,
                                   "episode_return": 2.0 * i} for i in range(10)])
    out = tmp_path / "c.png"
    curves.main([f"--run=A:{many}", f"--run=B:{one}", f"--out={out}", "--target=9"])
    text = capsys.readouterr().out
    # lines past 8000 steps: i = 8, 9 -> seed 0: 8.5, seed 1: 9.5; plain run: 17.0
    assert "A: final-20% mean 9.00 (per agent 8.50, 9.50), 1/2 at >= 9" in text
    assert "B: final-20% mean 17.0 (per agent 17.0), 1/1 at >= 9" in text
    assert _png(out)


def _sweep_rows():
    """3 learning rates x 2 seeds, as a sweep's metrics.jsonl holds them: the return of
    agent (lr index v, seed s) at line i is 10 v + s + i."""
    lrs = (1e-3, 3e-4, 1e-4)
    return [{"learning_rate": lr, "seed": s, "update": i + 1, "env_steps": 100 * (i + 1),
             "wall_time": 0.5 * i, "episode_return": 10.0 * v + s + i}
            for i in range(5) for v, lr in enumerate(lrs) for s in (0, 1)]


def test_a_3_by_2_sweep_is_3_lines_of_2_seeds(tmp_path, capsys):
    run = _run(tmp_path / "sweep", _sweep_rows(), "CartPole-v1")
    lines = run_curves.run_lines(files.read_metrics(run))
    assert [line.label for line in lines] == [
        "learning_rate=0.001", "learning_rate=0.0003", "learning_rate=0.0001"]
    assert all(line.seeds == [0, 1] for line in lines)
    for v, line in enumerate(lines):  # no line mixes learning rates
        x, mean, low, high = run_curves.band(line.steps)
        np.testing.assert_array_equal(x, [100, 200, 300, 400, 500])
        np.testing.assert_allclose(mean, 10 * v + 0.5 + np.arange(5))
        np.testing.assert_allclose(low, 10 * v + np.arange(5))
        np.testing.assert_allclose(high, 10 * v + 1 + np.arange(5))
    curves.main([run])  # one run: its curve.png, the same drawing a run writes
    text = capsys.readouterr().out
    assert "sweep: learning_rate=0.0003: final-20% mean 14.5 (per agent 14.0, 15.0)" in text
    assert _png(tmp_path / "sweep" / "curve.png")
    assert run_curves.write_run_curve(run) == str(tmp_path / "sweep" / "curve.png")


def _refusal(argv, capsys) -> str:
    """The one stderr line of ``benchmarks.curves`` refusing ``argv`` with exit 2."""
    with pytest.raises(SystemExit) as exited:
        curves.main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err
    return err


GOOD = {"env_steps": 10, "wall_time": 1.0, "episode_return": 1.0}


def test_an_empty_metrics_file_is_refused(tmp_path, capsys):
    run = _run(tmp_path / "r", [])
    err = _refusal([run, f"--out={tmp_path / 'c.png'}"], capsys)
    assert f"{run}/metrics.jsonl: no lines" in err
    assert not (tmp_path / "c.png").exists()


def test_a_run_without_a_finished_episode_is_refused(tmp_path, capsys):
    run = _run(tmp_path / "r", [{"env_steps": 10 * i, "wall_time": 1.0 * i,
                                 "episode_return": None} for i in (1, 2)])
    err = _refusal([run], capsys)
    assert f"{run}/metrics.jsonl: no line has a finite episode_return" in err
    assert "no episode has finished yet" in err
    assert not (tmp_path / "r" / "curve.png").exists()


@pytest.mark.parametrize("bad, problem", [("[1, 2]", "not a JSON object"),
                                          ('{"env_steps": 2', "not valid JSON")])
def test_a_bad_metrics_line_is_refused_with_its_number(tmp_path, capsys, bad, problem):
    run = _run(tmp_path / "r", [GOOD])
    with open(tmp_path / "r" / "metrics.jsonl", "a") as f:
        f.write(bad + "\n" + json.dumps(GOOD) + "\n")
    err = _refusal([f"--run=A:{run}"], capsys)
    assert f"{run}/metrics.jsonl:2: {problem}" in err


def test_a_torn_config_is_refused(tmp_path, capsys):
    run = _run(tmp_path / "r", [GOOD], "CartPole-v1")
    (tmp_path / "r" / "config.json").write_text('{"env_id": "CartPole-v1", "se')
    err = _refusal([run], capsys)
    assert f"{run}/config.json: not readable JSON" in err
    assert not (tmp_path / "r" / "curve.png").exists()


def test_wall_clock_of_a_resumed_run_is_joined():
    rows = [{"wall_time": t} for t in (1.0, 2.0, 3.0, 0.5, 1.5)]  # resumed after 3.0 s
    assert run_curves.joined_wall(rows) == [1.0, 2.0, 3.0, 3.5, 4.5]


def test_no_finished_episode_writes_no_curve(tmp_path):
    run = _run(tmp_path / "r", [{"env_steps": 10, "wall_time": 1.0, "episode_return": None}])
    assert run_curves.write_run_curve(run) is None
    assert not (tmp_path / "r" / "curve.png").exists()


def test_the_y_axis_fits_the_env():
    def return_label(env_ids):
        return run_curves.common_label(registry.return_axis_label(e) for e in env_ids)

    assert return_label(["CartPole-v1"]) == "mean episode return (sum of rewards)"
    assert return_label(["envpool:Breakout-v5"]) == (
        "mean episode return (game score, unclipped)")
    assert return_label(["Breakout-v5", "CartPole-v1"]) == "mean episode return"


def test_a_3_by_2_sweep_run_writes_its_curve(tmp_path):
    """A real Anakin run of 3 learning rates x 2 seeds draws curve.png as it closes, from
    lines that group into 3 variants of 2 seeds."""
    from anakin.train import train
    from configs import cartpole_ppo

    c = cartpole_ppo.get_config()
    c.num_envs, c.num_steps, c.total_env_steps = 8, 32, 8 * 32 * 4
    c.log_every, c.updates_per_call, c.num_devices, c.num_seeds = 1, 4, 1, 2
    c.sweep.learning_rate = (1e-4, 3e-4, 1e-3)
    train(c, str(tmp_path))
    assert _png(tmp_path / "curve.png")
    lines = run_curves.run_lines(files.read_metrics(str(tmp_path)))
    assert [(line.label, line.seeds) for line in lines] == [
        (f"learning_rate={lr:g}", [0, 1]) for lr in (1e-4, 3e-4, 1e-3)]


def test_a_population_adds_each_agents_hyperparameters(tmp_path, capsys):
    """A PBT run's ``hparam/<name>`` keys: each agent's values against env steps, in a row
    of their own below the returns (runtime.run.curves and benchmarks.curves alike)."""
    rows = [{"learning_rate": lr, "seed": s, "env_steps": 1000 * (i + 1), "wall_time": i,
             "episode_return": float(i), "hparam/learning_rate": lr * (1.25 if i > 4 else 1)}
            for i in range(10) for lr in (1e-3, 1e-4) for s in (0, 1)]
    lines = run_curves.run_lines(rows)
    assert run_curves.hparam_names(lines) == ["learning_rate"]
    assert lines[0].hparams[0]["learning_rate"][-1] == (10_000, 1.25e-3)
    workdir = _run(tmp_path / "pbt", rows)
    assert run_curves.write_run_curve(workdir) is not None
    out = tmp_path / "c.png"
    curves.main([workdir, f"--out={out}"])
    assert _png(out) and _png(tmp_path / "pbt" / "curve.png")


def test_small_returns_and_a_population_label(tmp_path, capsys):
    """Returns in [-1, 1] read apart in the statistic, and a PBT agent's line is labelled
    with the value it trains with now (docs/design.md, "Population-based training")."""
    rows = [{"learning_rate": 1e-3, "seed": s, "update": i + 1, "env_steps": 100 * (i + 1),
             "wall_time": i, "episode_return": 0.9 + 0.01 * s + 0.001 * i,
             "hparam/learning_rate": 1e-3 if i < 3 else (8e-4, 1.25e-3)[s]}
            for i in range(5) for s in (0, 1)]
    run = _run(tmp_path / "pbt", rows)
    lines = run_curves.run_lines(files.read_metrics(run))
    assert [line.label for line in lines] == [
        "learning_rate=0.001 (now learning_rate=0.0008..0.00125)"]
    curves.main([run])
    text = capsys.readouterr().out
    assert ("learning_rate=0.001 (now learning_rate=0.0008..0.00125): final-20% mean 0.909 "
            "(per agent 0.904, 0.914)") in text
