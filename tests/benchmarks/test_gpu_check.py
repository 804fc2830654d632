"""benchmarks/gpu_check.sh and its helper benchmarks.gpu_check_table, without a GPU and
without running the benchmarks (``bash benchmarks/gpu_check.sh --cpu`` runs them all, in
about 1.5 minutes on 2 cores: too long for the suite).

The table is checked on synthetic step outputs; the script on what it does before the
steps: a bad argument, an empty wheels folder, missing modules (a stand-in python).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks import gpu_check_table as gct
from benchmarks import sebulba_throughput
from benchmarks.common import format_table
from tests.helpers import REPO

SCRIPT = os.path.join(REPO, "benchmarks", "gpu_check.sh")
SEBULBA_LOG = "\n".join([
    "Breakout-v5, impala_resnet, 128 envs x 128 steps, 2 actor threads, env_threads 0, "
    "4 epochs x 4 minibatches",
    format_table(sebulba_throughput.HEADERS, [["shared", "20,000", "18,000", "12,000",
                                               "50,000", "15,000", "0.83", "40,000"]]),
    "plain jitted PPO step, one minibatch: 9,000 samples/s",
    "seconds per update, per stage (actor stages averaged over threads):",
    format_table(["split", "env_step", "inference"], [["shared", "0.500", "0.100"]]), ""])


def write_outputs(out, *, anakin_rc="0 150 40", run_rc="143 300 301"):
    """What the three steps leave in ``out`` (GPU-like memory records)."""
    (out / "anakin.json").write_text(json.dumps({
        "results": [{"num_envs": 64, "env_sps": 1e6, "train_sps": 2e5,
                     "train_update_s": 0.04}],
        "first_update": [{"config": "cartpole_ppo", "seconds": 12.5}],
        "agents": [{"agents": 64, "envs_per_agent": 4, "total_sps": 3e6,
                    "first_call_s": 8.0}],
    }))
    (out / "sebulba.log").write_text(SEBULBA_LOG)
    run = out / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(
        {"env_id": "Breakout-v5", "algorithm": "ppo", "network": "impala_resnet",
         "num_envs": 128}))
    rows = [{"update": 5 * i, "env_steps": 5 * i * 16384, "wall_time": 40.0 + 5 * i,
             "sps": 16384.0, "time/learner_step_s": 0.2 * i, "time/env_step_s": 0.5}
            for i in (1, 2, 3)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows)
                                       + '{"update": 20, "env_st')  # cut by SIGTERM
    for step in gct.STEPS:
        (out / f"{step}.mem.json").write_text(json.dumps(
            {"device": "cuda:0 (NVIDIA H200)", "peak_bytes": 3 * 2**30,
             "limit_bytes": 100 * 2**30}))
    (out / "anakin.rc").write_text(anakin_rc)
    (out / "sebulba.rc").write_text("0 110 60")
    (out / "run.rc").write_text(run_rc)


def cells_of(out):
    device, cells = gct.table(str(out))
    return device, {(row[1]): row for row in cells}


def test_table_reads_every_step(tmp_path):
    write_outputs(tmp_path)
    device, rows = cells_of(tmp_path)
    assert device == "cuda:0 (NVIDIA H200)"
    env = rows["random-action env, 64 envs"]
    assert env[0] == "anakin_throughput" and env[2] == "1,000,000" and env[3] == "-"
    assert env[5] == "3.00 GiB of 100.00 GiB"
    assert rows["PPO training, 64 envs (s per update)"][4] == "0.04"
    assert rows["time to first update, configs/cartpole_ppo.py"][4] == "12.5"
    # Sebulba throughput: Atari, so frames/s = 4 x env steps/s.
    assert rows["(a) raw EnvPool env, split shared"][2:4] == ["20,000", "80,000"]
    assert rows["(b) actor loop, trivial policy, split shared"][2] == "18,000"
    assert rows["(c) actor with the network, split shared"][2] == "12,000"
    assert rows["(d) learner only, split shared"][2] == "50,000"
    assert rows["(e) end to end, split shared (efficiency 0.83)"][3] == "60,000"
    # The run: SPS between the first and the last complete line; stages after the first,
    # in pipeline order; the run ending on its timer (143) is no failure.
    run = [r for r in rows.values() if r[1].startswith("ppo Breakout-v5")]
    assert len(run) == 1
    assert run[0][2] == f"{2 * 5 * 16384 / 10:,.0f}" and run[0][3] == f"{4 * 16384:,.0f}"
    stages = [r[1] for r in rows.values() if "stage" in r[1]]
    assert stages == ["  stage env_step (s per update)", "  stage learner_step (s per update)"]
    assert rows["  stage learner_step (s per update)"][4] == "0.5"  # mean of 0.4, 0.6
    assert not any("failed" in k or "timed out" in k for k in rows)


def test_table_says_which_step_failed_or_timed_out(tmp_path):
    write_outputs(tmp_path, anakin_rc="143 150 150", run_rc="1 300 20")
    (tmp_path / "sebulba.rc").unlink()
    (tmp_path / "sebulba.log").unlink()
    _, rows = cells_of(tmp_path)
    notes = [k for k in rows if k.startswith(("timed out", "failed", "did not run"))]
    assert notes == [
        f"timed out after 150 s (exit code 143); see {tmp_path}/anakin.log",
        f"did not run; see {tmp_path}/sebulba.log",
        f"failed with exit code 1; see {tmp_path}/run.log",
    ]
    assert rows[notes[1]][0] == "sebulba_throughput" and "no results" in rows


def test_memory_cell_without_stats():
    assert gct.memory_cell(None) == "n/a (not recorded)"
    assert gct.memory_cell({"device": "TFRT_CPU_0 (cpu)", "peak_bytes": None}) == \
        "n/a (no memory stats)"


def test_measure_runs_the_module_and_records_the_device(tmp_path):
    memory = tmp_path / "m.json"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check_table", "measure",
         f"--memory_out={memory}", "json.tool", "--sort-keys"],
        input='{"b": 1, "a": 2}', cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.index('"a"') < done.stdout.index('"b"')  # ran with its arguments
    record = json.loads(memory.read_text())
    assert record["device"].endswith("(cpu)") and record["peak_bytes"] is None


def run_script(*args, python=None, timeout=60):
    env = dict(os.environ)
    if python is not None:
        env["PYTHON"] = python
    return subprocess.run(["bash", SCRIPT, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_script_bad_argument_prints_usage():
    done = run_script("--gpu")
    assert done.returncode == 2
    assert "usage: bash benchmarks/gpu_check.sh" in done.stderr


def test_script_empty_wheels_folder(tmp_path):
    done = run_script(f"--wheels={tmp_path}")
    assert done.returncode == 1
    assert done.stderr.strip() == f"no wheels (*.whl) in --wheels={tmp_path}"


def test_script_names_the_missing_modules_in_one_line(tmp_path):
    fake = tmp_path / "python"  # imports fail for envpool and gymnax, succeed otherwise
    fake.write_text('#!/usr/bin/env bash\n'
                    'case "$2" in "import envpool"|"import gymnax") exit 1;; esac\n'
                    'echo "ran: $*" >&2; exit 0\n')
    fake.chmod(0o755)
    done = run_script("--cpu", f"--out={tmp_path / 'out'}", python=str(fake))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "missing Python modules: envpool gymnax (pass --wheels=DIR with their wheels)"]
    assert not (tmp_path / "out").exists()  # nothing ran


def test_script_runs_only_the_named_steps_and_keeps_the_others_outputs(tmp_path):
    fake = tmp_path / "python"  # every import succeeds; a module run records its arguments
    fake.write_text('#!/usr/bin/env bash\necho "ran: $*"; exit 0\n')
    fake.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    (out / "anakin.json").write_text("{}")  # an earlier call's step
    (out / "run.log").write_text("old")
    done = run_script("--cpu", "--steps=run", f"--out={out}", python=str(fake))
    assert done.returncode == 0, done.stderr
    assert (out / "anakin.json").read_text() == "{}"
    assert "sebulba.main" in (out / "run.log").read_text()
    assert not (out / "sebulba.log").exists() and not (out / "det_a.log").exists()
    assert "[run] exit 0" in done.stdout and "[anakin]" not in done.stdout


def test_script_refuses_an_unknown_step():
    done = run_script("--steps=anakin,gpu")
    assert done.returncode == 2
    assert done.stderr.strip() == "--steps: unknown step 'gpu' (anakin, sebulba, run, det)"


def test_determinism_line_compares_metrics_clock_aside(tmp_path):
    def write(name, rows):
        os.makedirs(tmp_path / name, exist_ok=True)
        with open(tmp_path / name / "metrics.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)

    rows = [{"update": u, "wall_time": 0.1 * u, "sps": 9.0, "loss/total": 1.0 / u,
             "time/update_s": 0.01} for u in (5, 10)]
    write("a", rows)
    write("b", [{**r, "wall_time": 7.0, "sps": 1.0} for r in rows])
    assert gct.determinism_line(str(tmp_path / "a"), str(tmp_path / "b")) == (
        "determinism: identical metrics in both runs (2 lines, clock aside)")
    write("c", [rows[0], {**rows[1], "loss/total": 0.5000001}])
    assert gct.determinism_line(str(tmp_path / "a"), str(tmp_path / "c")) == (
        "determinism: the runs differ from line 2 (update 10): loss/total")
    assert gct.determinism_line(str(tmp_path / "a"), str(tmp_path / "none")).startswith(
        "determinism: no metrics to compare")


def test_table_reads_the_columns_sebulba_throughput_prints():
    assert [k for k, _ in gct.SEBULBA_STAGES] == sebulba_throughput.HEADERS[1:6]
