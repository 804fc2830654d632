"""The ablation harness: suite definitions, the statistics of its report, and a tiny
end-to-end run that resumes."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from benchmarks import ablate, ablate_report, ablate_suites
from benchmarks.figures import pyplot
from tests.helpers import REPO, cell_config

# Fields that must be equal between the two architectures of one (env, algorithm) setting.
MATCHED = ("env_id", "algorithm", "network", "num_envs", "num_steps", "num_epochs",
           "num_minibatches", "learning_rate", "anneal_lr", "optimizer", "adam_eps",
           "max_grad_norm", "total_env_steps", "gamma", "gae_lambda", "clip_eps", "clip_vloss",
           "norm_adv", "vf_coef", "ent_coef", "vtrace_lambda", "clip_rho", "clip_pg_rho",
           "log_every", "normalize_obs", "normalize_reward", "bootstrap_time_limits")


def test_architectures_cells_have_matched_hyperparameters():
    cells = ablate_suites.suite_cells("architectures", num_seeds=2)
    anakin = [c for c in cells if c.mode == "anakin"]
    assert len(anakin) == 5 and len(cells) == 5 * 3
    assert {c.field("env") for c in anakin} == {"CartPole-v1", "Breakout-MinAtar", "Pendulum-v1"}
    for a in anakin:
        ca = cell_config(a)
        assert ca.num_seeds == 2 and a.seeds == (0, 1)
        twins = [c for c in cells if c.mode == "sebulba" and c.fields[1:] == a.fields[1:]]
        assert [t.seeds for t in twins] == [(0,), (1,)]
        for t in twins:
            cs = cell_config(t)
            for field in MATCHED:
                va, vs = ca[field], cs[field]
                if field == "env_id":  # the same gymnax env, named for each mode
                    va, vs = va.split(":")[-1], vs.split(":")[-1]
                assert va == vs, (a.name, t.name, field)


def test_suites_cover_the_issue_grid():
    pipes = ablate_suites.suite_cells("pipelines", 1)
    assert {(c.field("pipeline"), c.field("jitter_ms"), c.field("threads")) for c in pipes} == {
        (p, j, t) for p in ("sync", "cleanba", "async") for j in (0, 10, 50) for t in (1, 2)}
    assert {c.field("split") for c in ablate_suites.suite_cells("devices", 1)} == {
        "1+1", "1+3", "2+2"}
    atari = ablate_suites.suite_cells("atari-smoke", 1)
    assert {c.field("algorithm") for c in atari} == {"ppo", "impala"}
    names = [c.name for s in ablate_suites.SUITES for c in ablate_suites.suite_cells(s, 3)]
    assert len(names) == len(set(names))
    with pytest.raises(ValueError, match="suite"):
        ablate_suites.suite_cells("nope", 1)


def test_budget_scale_keeps_two_updates():
    sizes = (("num_envs", 8), ("num_steps", 16))
    assert dict(ablate_suites.budget_overrides(sizes, 1280, 1.0)) == {
        "total_env_steps": 1280, "log_every": 1}
    assert dict(ablate_suites.budget_overrides(sizes, 1280, 1e-6))["total_env_steps"] == 256


def test_steady_rate_and_compile_time():
    # First call of 10 updates took 12 s; 30 more updates took 6 s: 0.2 s per update.
    timing = {"first_call_updates": 10, "first_call_s": 12.0, "start_update": 0,
              "end_update": 40, "train_s": 18.0}
    sps, compile_s = ablate_report.steady_rate(timing, steps_per_update=1000)
    assert sps == pytest.approx(5000.0) and compile_s == pytest.approx(10.0)
    assert ablate_report.steady_rate(dict(timing, end_update=10), 1000) == (None, None)


def test_threshold_final_return_and_spread():
    rows = [{"update": u, "env_steps": 100 * u, "wall_time": float(u), "episode_return": r,
             "loss/total": 0.1 * u, "params_lag": 1.0}
            for u, r in zip(range(1, 7), (None, 10.0, 480.0, 470.0, 500.0, 490.0))]
    hit = ablate_report.first_reaching(rows, 475.0)
    assert hit["env_steps"] == 300 and hit["wall_time"] == 3.0
    assert ablate_report.first_reaching(rows, 501.0) is None
    assert ablate_report.final_return(rows) == pytest.approx((470 + 500 + 490) / 3)
    assert ablate_report.curve_spread(rows, rows) == 0.0
    other = [dict(r) for r in rows]
    other[4]["loss/total"] += 0.25
    assert ablate_report.curve_spread(rows, other) == pytest.approx(0.25)
    assert ablate_report.curve_spread(rows, other[:-1]) == math.inf
    other[0]["episode_return"] = 3.0  # one has an episode where the other has none
    assert ablate_report.curve_spread(rows, other) == math.inf


def test_mean_ci_is_the_student_t_interval():
    from scipy import stats

    values = [10.0, 12.0, 20.0, 15.0]
    m, lo, hi = ablate_report.mean_ci(values)
    ref = stats.t.interval(0.95, 3, loc=np.mean(values), scale=stats.sem(values))
    assert m == pytest.approx(14.25)
    assert (lo, hi) == (pytest.approx(ref[0]), pytest.approx(ref[1]))
    assert lo < 10.0 and hi > 20.0  # 3 degrees of freedom: wider than the seeds' range
    assert ablate_report.mean_ci([7.0]) == (7.0, 7.0, 7.0)
    assert ablate_report.mean_ci([None, 3.0, 3.0]) == (3.0, 3.0, 3.0)


def test_return_bands_stay_inside_the_return_range():
    """Three CartPole seeds at 500, 500 and 100: the t-interval runs past 500 and below 0, the
    band is clipped to [0, 500] (the registry's range) and says so; the mean is untouched."""
    from envs import registry

    curves = [[(0, 500.0), (10, 500.0)], [(0, 500.0), (10, 500.0)], [(0, 100.0), (10, 100.0)]]
    grid = np.array([0.0, 5.0, 10.0])
    mean, lo, hi, clipped = ablate_report.band(curves, grid)
    assert not clipped and hi.max() > 500 and lo.min() < 0
    lowest, highest = registry.return_range("CartPole-v1")
    mean_c, lo_c, hi_c, clipped = ablate_report.band(curves, grid, lowest, highest)
    assert clipped and (lo_c >= 0).all() and (hi_c <= 500).all()
    np.testing.assert_array_equal(mean_c, mean)
    assert ablate_report.panel_range([{"env": "CartPole-v1"}], registry.return_range) == (0, 500)
    assert ablate_report.panel_range([{"env": "a"}, {"env": "b"}], registry.return_range) == (
        None, None)
    assert registry.return_range("gymnax:Breakout-MinAtar") == (0.0, None)
    assert registry.return_range("Catch-own") == (-1.0, 1.0)
    assert registry.return_range("Pong-v5") == (None, None)
    for name in registry.RETURN_RANGES:  # every row names an env the registry knows
        assert any(spelling in registry.accepted_ids(m) for spelling in
                   (name, f"own:{name}", f"brax:{name}")
                   for m in (registry.ANAKIN, registry.SEBULBA)), name


def test_wait_fractions():
    stages = {s: 0.0 for s in ablate_report.ACTOR_STAGES + ablate_report.LEARNER_STAGES}
    stages.update(env_step=1.0, inference=2.0, params_wait=1.0, rollout_queue_wait=1.0,
                  learner_step=3.0)
    assert ablate_report.wait_fractions(stages) == (pytest.approx(0.25), pytest.approx(0.25))


def _stage_records(pipes=ablate_suites.PIPELINES, jitters=ablate_suites.JITTERS_MS,
                   threads=ablate_suites.THREADS) -> list[dict]:
    """One record per group of the pipelines grid, every stage time set (actors 0.2 s,
    learner 0.4 s per update)."""
    stages = ablate_report.ACTOR_STAGES + ablate_report.LEARNER_STAGES
    return [{"pipeline": p, "jitter_ms": j, "threads": t,
             **{f"{s}_s": 0.1 if s in ablate_report.LEARNER_STAGES else 0.04 for s in stages}}
            for p in pipes for j in jitters for t in threads]


def _png_size(path) -> tuple[int, int]:
    """``(width, height)`` in pixels, from the PNG's header."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _fits(fig) -> bool:
    """Whether everything a drawn figure shows (texts, legend, axes) lies inside it: nothing
    clipped in its PNG."""
    fig.canvas.draw()
    drawn, page = fig.get_tightbbox(fig.canvas.get_renderer()), fig.bbox_inches
    tol = 1 / 110  # one pixel at the plots' dpi
    return (drawn.x0 >= page.x0 - tol and drawn.y0 >= page.y0 - tol
            and drawn.x1 <= page.x1 + tol and drawn.y1 <= page.y1 + tol)


@pytest.mark.parametrize("num_groups", [1, 4, 18])
def test_stage_plot_width_is_bounded_and_its_labels_fit(tmp_path, num_groups):
    """The pipelines grid (18 groups) was 2596 px wide; now every group count gives the same
    width, one labelled bar per group and thread kind, title, axis unit and legend in the
    figure."""
    fields = ablate_report.PIPE_FIELDS
    recs = _stage_records()[:num_groups]
    path = ablate_report.plot_stages(str(tmp_path / "stages.png"), recs, fields, "Stages")
    width, height = _png_size(path)
    assert width <= 1000 and height <= 110 * ablate_report.stage_figure_size(18)[1] + 1
    assert width == _png_size(ablate_report.plot_stages(
        str(tmp_path / "one.png"), recs[:1], fields, "Stages"))[0]
    fig = ablate_report.stage_figure(recs, fields, "Sebulba stage times per update")
    try:
        assert _fits(fig)
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert len(labels) == 2 * num_groups
        assert labels[:2] == ["sync, jitter 0 ms, 1 thr: actor",
                              "sync, jitter 0 ms, 1 thr: learner"]
        assert "seconds per update" in ax.get_xlabel()
        assert fig.get_suptitle() == "Sebulba stage times per update"
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legend == list(ablate_report.ACTOR_STAGES + ablate_report.LEARNER_STAGES)
    finally:
        pyplot().close(fig)


def test_bad_arguments_exit_2_with_one_line(capsys):
    for argv, message in (
            (["--suite=nope", "--out=x"], "config error: --suite"),
            (["--suite=pipelines", "--out=x", "--seeds=0"], "config error: --seeds"),
            (["--suite=pipelines", "--out=x", "--seeds=abc"], "config error: argument --seeds"),
            (["--suite=pipelines", "--out=x", "--budget_scale=inf"],
             "config error: --budget_scale"),
            (["--suite=pipelines", "--out=x", "--cells=("], "config error: --cells"),
            (["--out=x"], "config error: the following arguments are required: --suite"),
            (["--suite=,", "--out=x"], "config error: --suite: no suite named in ','"),
            (["--suite=pipelines", f"--out={__file__}"], f"config error: --out: {__file__} is a "
             "file"),
            (["--suite=pipelines", f"--out={__file__}/sub"], f"config error: --out: {__file__}/sub "
             f"cannot be a directory: {__file__} is a file")):
        with pytest.raises(SystemExit) as e:
            ablate.parse_args(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1, err


def test_cell_env_sets_fake_devices_only_where_asked(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4 --foo=1")
    pipe = ablate_suites.suite_cells("pipelines", 1)[0]
    dev = ablate_suites.suite_cells("devices", 1)[0]
    assert ablate.cell_env(pipe)["XLA_FLAGS"] == "--foo=1"
    assert "device_count=4" in ablate.cell_env(dev)["XLA_FLAGS"]


def _finish(out: str, cell) -> None:
    """Writes the ``cell.json`` of a finished run of ``cell``'s command."""
    workdir = ablate.cell_dir(out, cell)
    os.makedirs(workdir)
    with open(os.path.join(workdir, "cell.json"), "w") as f:
        json.dump({"name": cell.name, "command": ablate.cell_command(cell, workdir)}, f)


def test_cells_not_selected_are_not_run_not_unfinished(tmp_path):
    """Selected and failed, or left by an earlier invocation: not finished; never selected and
    never started: not run, named with the --cells expression."""
    a, b, c, d = ablate_suites.suite_cells("pipelines", 1)[:4]
    out = str(tmp_path)
    _finish(out, a)
    os.makedirs(ablate.cell_dir(out, c))  # an earlier invocation's interrupted attempt
    not_finished, not_run = ablate.missing_cells([a, b, c, d], out, {a.name, b.name})
    assert (not_finished, not_run) == ([b.name, c.name], [d.name])
    assert ablate.missing_cells([a, b, c, d], out) == ([b.name, c.name, d.name], [])
    note = ablate.missing_note(not_finished, not_run, "^x-")
    assert f"): {b.name}, {c.name}.\n" in note and note.count("Not finished") == 1
    assert f"\nNot run (not selected by --cells=^x-): {d.name}.\n" in note
    assert ablate.missing_note([], [], "") == ""


def _run_ablate(out, *extra):
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.ablate", "--suite=pipelines", "--seeds=1",
         f"--out={out}", "--budget_scale=0.15", "--no_progress",
         "--cells=^(sync|cleanba|async)-j(0|10)-t1-", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_tiny_pipelines_suite_writes_results_and_resumes(tmp_path):
    out = tmp_path / "abl"
    proc = _run_ablate(out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["pipeline"], r["jitter_ms"]) for r in rows) == sorted(
        (p, j) for p in ("sync", "cleanba", "async") for j in ("0", "10"))
    for r in rows:
        assert float(r["sps"]) > 0 and r["final_return"] != ""
        lag = float(r["params_lag_max"])
        assert lag == {"sync": 0.0, "cleanba": 1.0}.get(r["pipeline"], lag)
    md = (out / "results.md").read_text()
    assert "| sync | 0 | identical |" in md and "| cleanba | 0 | identical |" in md
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["return_vs_env_steps.png", "sebulba_stage_times.png", "sps.png"]
    for p in out.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    # Resume: finished cells are not run again; a cell without cell.json is.
    marks = {c: os.path.getmtime(out / "runs" / c / "cell.json")
             for c in os.listdir(out / "runs")}
    os.remove(out / "runs" / "async-j10-t1-s0" / "cell.json")
    again = _run_ablate(out)
    assert again.returncode == 0, again.stderr[-3000:]
    for c, t in marks.items():
        changed = os.path.getmtime(out / "runs" / c / "cell.json") != t
        assert changed == (c == "async-j10-t1-s0"), c
    # A cell finished with another budget is not done; a --cells rerun reports the suite.
    stale = out / "runs" / "sync-j10-t1-s0" / "cell.json"
    record = json.loads(stale.read_text())
    record["command"] = [re.sub(r"total_env_steps=(\d+)", lambda m: f"total_env_steps="
                                f"{int(m.group(1)) * 10}", a) for a in record["command"]]
    stale.write_text(json.dumps(record))
    marks = {c: os.path.getmtime(out / "runs" / c / "cell.json")
             for c in os.listdir(out / "runs")}
    third = _run_ablate(out, "--cells=^sync-j10-t1-")
    assert third.returncode == 0, third.stderr[-3000:]
    for c, t in marks.items():
        changed = os.path.getmtime(out / "runs" / c / "cell.json") != t
        assert changed == (c == "sync-j10-t1-s0"), c
    with open(out / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == 6  # the whole suite's finished runs
    md = (out / "results.md").read_text()
    assert "Not finished" not in md  # every selected cell finished
    never = [c.name for c in ablate_suites.suite_cells("pipelines", 1)
             if not re.search(r"-(j0|j10)-t1-", c.name)]  # no invocation here selected them
    assert f"Not run (not selected by --cells=^sync-j10-t1-): {', '.join(never)}." in md


def _processes_naming(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    pids.append(int(pid))
        except OSError:  # gone meanwhile
            pass
    return pids


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_stops_the_cell_in_flight_with_one_line(tmp_path, signum):
    """SIGTERM or SIGINT to the suite while a cell runs: the cell's process is stopped too (no
    orphan training on), no report is written, one line says how to continue, 143 / 130."""
    out = tmp_path / "abl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.ablate", "--suite=pipelines", "--seeds=1",
         f"--out={out}", "--no_progress", "--cells=^sync-j0-t1-"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cell_dir = out / "runs" / "sync-j0-t1-s0"
    deadline = time.monotonic() + 120
    while not _processes_naming(str(cell_dir)) and proc.poll() is None:
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.1)
    time.sleep(1.0)  # the cell is importing or compiling
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, stderr
    name = signal.Signals(signum).name
    assert stderr.splitlines() == [
        f"ablate: {name} stopped cell sync-j0-t1-s0 of suite pipelines (it starts over next "
        f"time); the finished cells are kept in {out}: run the same command to continue"]
    assert _processes_naming(str(cell_dir)) == []
    assert not (cell_dir / "cell.json").exists() and not (out / "results.md").exists()


def test_no_sebulba_record_writes_no_stage_plot(tmp_path):
    """An ablation without a Sebulba cell: no empty stage plot (and no matplotlib warning)."""
    import warnings

    anakin = [{"arch": "anakin", "env": "CartPole-v1", "algorithm": "ppo", "sps": 1.0}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ablate_report.plot_stages(str(tmp_path / "s.png"), anakin, ("env",), "S") is None
    assert not (tmp_path / "s.png").exists()
