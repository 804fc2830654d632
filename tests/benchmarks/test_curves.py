"""benchmarks.curves: per-agent lines of finished runs, the final-20% statistic of
benchmarks.seeds, a PNG."""

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
    curves.main([f"--run=A:{many}", f"--run=B:{one}", f"--out={out}", "--target=9"])
    text = capsys.readouterr().out
    # lines past 8000 steps: i = 8, 9 -> seed 0: 8.5, seed 1: 9.5; plain run: 17.0
    assert "A: final-20% mean 9.00 (per agent 8.5, 9.5), 1/2 at >= 9" in text
    assert "B: final-20% mean 17.00 (per agent 17.0), 1/1 at >= 9" in text
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
