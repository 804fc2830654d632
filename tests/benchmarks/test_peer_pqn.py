"""benchmarks.peer_pqn: bad flags refused in one line with exit 2 before anything runs, and
the learning statistic (the final-20% mean of each update's training return, the same rule
on both sides) on made-up rows (the runs themselves need the peer's environment)."""

from __future__ import annotations

import pytest

from benchmarks import peer_pqn
from rlcore.numbers import readable
from tests.helpers import assert_refused_before_running


@pytest.fixture
def good(tmp_path) -> list[str]:
    """Flags that pass the checks: a stand-in Python and a checkout with the peer's script."""
    python = tmp_path / "python"
    python.write_text("")
    (tmp_path / "peer" / "purejaxql").mkdir(parents=True)
    (tmp_path / "peer" / "purejaxql" / "pqn_minatar.py").write_text("")
    return [f"--peer_python={python}", f"--peer_dir={tmp_path / 'peer'}",
            f"--out={tmp_path / 'out'}", "--total=262144"]


def test_good_flags_pass(good):
    args = peer_pqn.parse_args(good)
    assert args.games == ["Breakout-MinAtar", "Asterix-MinAtar"] and args.seeds == 3


@pytest.mark.parametrize("argv,flag", [
    (["--seeds=0"], "--seeds"),
    (["--seeds=-2"], "--seeds"),
    (["--games=Pong-MinAtar"], "--games"),
    (["--games=Breakout-MinAtar,Seaquest-MinAtar"], "--games"),  # not in the peer's gymnax
    (["--games=Breakout-MinAtar,Breakout-MinAtar"], "--games"),
    (["--peer_dir=MISSING"], "--peer_dir"),
    (["--peer_dir=EMPTY"], "--peer_dir"),  # a directory without purejaxql/pqn_minatar.py
    (["--peer_python=MISSING"], "--peer_python"),
    (["--total=100"], "--total"),
    (["--speed_total=102400"], "--speed_total"),  # ours' first call only: no steady rate
])
def test_bad_flags_are_one_line_exit_2_and_nothing_runs(good, argv, flag, tmp_path, capsys,
                                                        monkeypatch):
    (tmp_path / "empty").mkdir()
    fill = {"MISSING": str(tmp_path / "missing"), "EMPTY": str(tmp_path / "empty")}
    argv = [f"{name}={fill.get(value, value)}" for name, value in
            (a.split("=", 1) for a in argv)]
    assert_refused_before_running(peer_pqn.main, [*good, *argv], flag, tmp_path / "out", capsys,
                                  monkeypatch)


def test_a_missing_peer_dir_flag_is_one_line_exit_2(good, capsys):
    with pytest.raises(SystemExit) as exited:
        peer_pqn.parse_args([a for a in good if not a.startswith("--peer_dir")])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--peer_dir" in err[0], err


def _ours_row(seed: int, update: int, ret: float | None) -> dict:
    return {"seed": seed, "update": update, "env_steps": 100 * update, "episode_return": ret,
            "wall_time": 1.0 * update}


def test_the_statistic_is_the_plain_mean_past_80_percent_on_both_sides():
    # 10 updates of 100 env steps per seed, total 1000: the window is updates 9 and 10 (env
    # steps 900, 1000 > 800; 800 itself is out). Seed 1 ended no episode in update 10.
    rows = [_ours_row(s, u, float(10 * s + u)) for u in range(1, 11) for s in (0, 1)]
    rows[-1]["episode_return"] = None  # seed 1, update 10
    ours = peer_pqn.ours_curves(list(reversed(rows)))  # any order: by update
    assert [step for step, _ in ours[0]] == list(range(100, 1001, 100))
    assert peer_pqn.final_values(ours, 1000) == [9.5, 19.0]

    peer = {"seeds": [
        {"index": i, "env_step": [100 * u for u in range(1, 11)],
         "completed_episode_return_mean": [None if (i, u) == (1, 10) else float(10 * i + u)
                                           for u in range(1, 11)]} for i in (0, 1)]}
    assert peer_pqn.final_values(peer_pqn.peer_curves(peer), 1000) == [9.5, 19.0]


def test_the_window_mean_is_unweighted_and_none_without_episodes():
    assert peer_pqn.window_mean([(850, 2.0), (900, 4.0), (950, 9.0)], 1000) == 5.0
    assert peer_pqn.window_mean([(700, 3.0), (900, None)], 1000) is None
    assert peer_pqn.window_mean([(799, 3.0), (801, 1.0)], 1000, fraction=0.5) == 2.0


def test_the_summary_has_the_mean_and_an_iqm_interval_around_it():
    s = peer_pqn.summarise([4.0, None, 1.0, 10.0], reps=200)
    assert s["per_seed"] == [4.0, None, 1.0, 10.0] and s["mean"] == 5.0
    assert s["iqm"] == pytest.approx(5.0)  # scipy's trimmed mean of 3 cuts nothing
    assert 1.0 <= s["lo"] <= s["iqm"] <= s["hi"] <= 10.0
    assert peer_pqn.summarise([4.0, 1.0, 10.0], reps=200) == dict(s, per_seed=[4.0, 1.0, 10.0])
    table = peer_pqn.learning_table({"Breakout-MinAtar": {"ours": s}})
    assert "4.00, -, 1.00, 10.0" in table and f"5.00 [{readable(s['lo'])}, " in table
