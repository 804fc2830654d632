"""benchmarks.curves: mean lines with bands (clipped to the env's return range) of finished
runs, the final-20% statistic of benchmarks.seeds, a PNG."""

import json

from benchmarks import curves


def _run(path, rows):
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_statistic_and_plot(tmp_path, capsys):
    # Two agents of one program (seed keys) and a plain run; 10 lines each, 1000 steps apart.
    many = _run(tmp_path / "many", [{"seed": s, "env_steps": 1000 * (i + 1),
                                     "episode_return": float(i + s)}
                                    for i in range(10) for s in (0, 1)])
    one = _run(tmp_path / "one", [{"env_steps": 1000 * (i + 1), "episode_return": 2.0 * i}
                                  for i in range(10)])
    out = tmp_path / "c.png"
    curves.main([f"--run=A:{many}", f"--run=B:{one}", f"--out={out}", "--target=9", "--each"])
    text = capsys.readouterr().out
    # lines past 8000 steps: i = 8, 9 -> seed 0: 8.5, seed 1: 9.5; plain run: 17.0
    assert "A: final-20% mean 9.00 (per agent 8.5, 9.5), 1/2 at >= 9" in text
    assert "B: final-20% mean 17.00 (per agent 17.0), 1/1 at >= 9" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_band_bounds_come_from_the_runs_env(tmp_path):
    a = _run(tmp_path / "a", [{"env_steps": 1, "episode_return": 1.0}])
    b = _run(tmp_path / "b", [{"env_steps": 1, "episode_return": 1.0}])
    assert curves.env_range([a]) == (None, None)  # no config.json: no bound
    (tmp_path / "a" / "config.json").write_text(json.dumps({"env_id": "MaskedCartPole-own"}))
    assert curves.env_range([a]) == (0.0, 500.0)
    (tmp_path / "b" / "config.json").write_text(json.dumps({"env_id": "Recall-own"}))
    assert curves.env_range([b]) == (-1.0, 1.0)
    assert curves.env_range([a, b]) == (None, None)  # two envs: no common bound
