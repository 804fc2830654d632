"""Metrics for many agents: one line per agent with its tags, the console per variant, the
summary per variant, a TensorBoard run directory per agent."""

import json
import os

import pytest

from rlcore.types import EpisodeSummary
from runtime.run.metrics import MetricsLogger, agent_name
from runtime.run.summary import print_summary

# Two learning rates x two seeds; returns 10, 20 (lr 0.001) and 30, 50 (lr 0.0001).
TAGS = [{"learning_rate": 1e-3, "seed": 0}, {"learning_rate": 1e-3, "seed": 1},
        {"learning_rate": 1e-4, "seed": 0}, {"learning_rate": 1e-4, "seed": 1}]
RETURNS = [10.0, 20.0, 30.0, 50.0]


def _log(logger, update):
    agents = [({"loss/total": 1.0}, EpisodeSummary(return_sum=2 * r, length_sum=4.0, count=2),
               tags) for r, tags in zip(RETURNS, TAGS)]
    return logger.log_agents(update, 100 * update, agents, sps=1000.0)


def test_one_line_per_agent_with_its_tags(tmp_path):
    logger = MetricsLogger(str(tmp_path), total_updates=2, console=False)
    _log(logger, 1)
    logger.close()
    with open(os.path.join(tmp_path, "metrics.jsonl")) as fh:
        rows = [json.loads(line) for line in fh]
    assert [(r["learning_rate"], r["seed"], r["episode_return"]) for r in rows] == [
        (t["learning_rate"], t["seed"], ret) for t, ret in zip(TAGS, RETURNS)]


def test_console_gives_the_return_per_variant(capsys):
    logger = MetricsLogger(None, total_updates=2)
    _log(logger, 1)
    line = capsys.readouterr().err.strip()
    assert "return learning_rate=0.001: 15.0, learning_rate=0.0001: 40.0" in line
    assert "SPS 4,000" in line  # all agents' env steps
    seeds_only = logger.progress_line([{**r, "seed": s} for s, r in enumerate(
        [{"update": 1, "env_steps": 100, "wall_time": 1.0, "sps": 10.0, "episode_return": x}
         for x in (1.0, 3.0)])])
    assert "return 2.00 (1.00..3.00, 2 agents)" in seeds_only


def test_summary_has_a_column_per_variant(capsys):
    logger = MetricsLogger(None, total_updates=2, console=False)
    rows = _log(logger, 1) + _log(logger, 2)
    print_summary(rows)
    out = capsys.readouterr().out
    assert "learning_rate=0.001 | learning_rate=0.0001" in out
    assert "200 ->     15.0 |     40.0" in out
    assert "learning_rate=0.0001: best logged mean return 40.0; final 40.0" in out


def test_returns_in_minus_one_to_one_keep_their_digits(capsys):
    """Returns of a [-1, 1] env read apart (docs/design.md, "Metrics keys"): progress line,
    range, evaluation and summary; tens and hundreds keep one decimal."""
    logger = MetricsLogger(None, total_updates=4, console=False)
    rows = [{"update": 1, "env_steps": 10, "wall_time": 1.0, "sps": 5.0, "seed": s,
             "episode_return": r, "eval/episode_return": -0.0412} for s, r in
            enumerate((0.871, 0.997))]
    assert ("| return 0.934 (0.871..0.997, 2 agents) | eval return -0.0412 |"
            in logger.progress_line(rows))
    print_summary([{**r, "env_steps": 10 * u} for u in (1, 2) for r in rows])
    out = capsys.readouterr().out
    assert "20 ->    0.934" in out
    assert "best logged mean return 0.934; final 0.934" in out
    assert "evaluation return (in training): best -0.0412; final -0.0412" in out
    big = {**rows[0], "episode_return": 196.64}
    assert "| return 196.6 |" in logger.progress_line(big)


def _pbt_rows(update: int, values: tuple[float, float]) -> list[dict]:
    """Two agents of a swept ``learning_rate=0.001`` whose population moved them to
    ``values`` (their ``hparam/learning_rate``)."""
    return [{"update": update, "env_steps": 10 * update, "wall_time": 1.0, "sps": 5.0,
             "learning_rate": 0.001, "seed": s, "episode_return": 20.0,
             "hparam/learning_rate": v} for s, v in enumerate(values)]


def test_a_population_agent_is_labelled_with_its_current_value(capsys):
    """A PBT agent's label says the value it trains with now, not only its first
    (docs/design.md, "Population-based training"); unchanged values add nothing."""
    logger = MetricsLogger(None, total_updates=4, console=False)
    keys = ["learning_rate"]
    assert "return learning_rate=0.001: 20.0 |" in logger.progress_line(
        _pbt_rows(1, (0.001, 0.001)), keys)
    moved = _pbt_rows(2, (0.0008, 0.00125))
    assert ("return learning_rate=0.001 (now learning_rate=0.0008..0.00125): 20.0 |"
            in logger.progress_line(moved, keys))
    print_summary(_pbt_rows(1, (0.001, 0.001)) + moved)
    out = capsys.readouterr().out
    assert "(env steps -> learning_rate=0.001 (now learning_rate=0.0008..0.00125)):" in out
    explored = [{k: v for k, v in r.items() if k != "learning_rate"} for r in moved]
    assert "(now learning_rate=0.0008..0.00125)" in logger.progress_line(explored)


def _scalars(logdir, tag) -> list[tuple[int, float]]:
    """``[(step, value)]`` of ``tag`` in the event files of ``logdir``."""
    import glob
    import struct

    from tensorboardX.proto import event_pb2

    found = []
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        data, pos = open(path, "rb").read(), 0
        while pos + 12 <= len(data):  # TFRecord: u64 length, u32 crc, data, u32 crc
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4
            found += [(event.step, v.simple_value) for v in event.summary.value if v.tag == tag]
    return found


def test_tensorboard_has_a_run_directory_per_agent(tmp_path):
    """Each agent's scalars go to ``tb/<agent>/`` under their plain keys, so TensorBoard
    overlays the seeds and learning rates of ``episode_return`` in one chart; a lone agent's
    event files stay in the run directory."""
    assert agent_name({"learning_rate": 1e-4, "seed": 3}) == "learning_rate=0.0001,seed=3"
    assert agent_name({}) == ""
    logger = MetricsLogger(str(tmp_path), total_updates=2, console=False, agents=TAGS)
    _log(logger, 1)
    logger.close()
    runs = sorted(os.listdir(tmp_path / "tb"))
    assert runs == sorted(agent_name(t) for t in TAGS)
    assert not [f for f in os.listdir(tmp_path) if f.startswith("events.out")]
    assert _scalars(tmp_path / "tb" / "learning_rate=0.0001,seed=1", "episode_return") == [
        (100, 50.0)]
    lone = MetricsLogger(str(tmp_path / "one"), total_updates=2, console=False)
    lone.close()
    assert [f for f in os.listdir(tmp_path / "one") if f.startswith("events.out")]


def test_eta_comes_from_the_steady_rate_only():
    """No ETA before a steady update is known (compile time is no basis for one); after
    ``steady_from``, the time per update since then times the updates left."""
    logger = MetricsLogger(None, total_updates=100, console=False)
    row = {"update": 10, "env_steps": 100, "wall_time": 60.0, "sps": 1.0,
           "episode_return": 1.0}
    assert logger.progress_line(row).endswith("| ETA -")
    logger.steady_from(10, logger.start + 60.0)  # a 60 s compile-laden first call
    assert logger.progress_line(row).endswith("| ETA -")
    later = {**row, "update": 20, "wall_time": 62.0}  # 10 updates in 2 s
    assert logger.eta_s(20, logger.start + 62.0) == pytest.approx(16.0)
    assert logger.progress_line(later).endswith("| ETA 0:00:16")


def test_progress_line_shows_the_evaluation_return():
    logger = MetricsLogger(None, total_updates=4, console=False)
    rows = [{"update": 2, "env_steps": 10, "wall_time": 1.0, "sps": 5.0, "episode_return": r,
             "eval/episode_return": e} for r, e in ((1.0, 10.0), (3.0, 20.0))]
    assert "| return 2.00 (1.00..3.00, 2 agents) | eval return 15.0 |" in logger.progress_line(rows)


def test_progress_line_keeps_the_last_known_return_and_labels_sps():
    """A window without an ended episode shows the last known return, marked; SPS counts
    every agent and says how many; ``-`` where nothing is known yet."""
    logger = MetricsLogger(None, total_updates=4, console=False)
    row = {"update": 1, "env_steps": 10, "wall_time": 1.0, "sps": 5.0, "episode_return": None}
    assert "| return - |" in logger.progress_line(row)
    assert "| return 7.00 |" in logger.progress_line({**row, "episode_return": 7.0})
    assert "| return 7.00 (last) |" in logger.progress_line(row)
    assert "| SPS - |" in logger.progress_line({**row, "sps": None})
    resumed = MetricsLogger(None, total_updates=4, console=False)
    resumed.recall([{**row, "episode_return": 3.0}, {**row, "update": 2}])
    assert "| return 3.00 (last) |" in resumed.progress_line({**row, "update": 3})
    rows = [{**row, "seed": s, "episode_return": 1.0} for s in range(4)]
    assert "| SPS 20 (4 agents) | return 1.00 (1.00..1.00, 4 agents) |" in logger.progress_line(
        rows)


def test_sps_counts_from_the_steady_point():
    """After ``steady_from`` (the compiling first update done at 50 s), a line's SPS counts
    only the updates since; a line of the compiling update alone has none."""
    logger = MetricsLogger(None, total_updates=10, console=False)
    one = [({}, EpisodeSummary.zero(), {})]
    logger.steady_from(1, logger.start + 50.0, 100)
    assert logger.log_agents(1, 100, one, at=logger.start + 50.0)[0]["sps"] is None
    assert logger.log_agents(3, 300, one, at=logger.start + 52.0)[0]["sps"] == pytest.approx(
        100.0)
