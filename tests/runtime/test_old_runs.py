"""Runs written by earlier versions resume, extend and evaluate with today's code, as the
code that wrote them would have (docs/design.md, "Runs outlive upgrades").

The run directories and what their own code did next are tests/fixtures/old_runs
(tests/old_runs.py made them from checkouts of the commits in ``COMMITS``): today's code
continues copies of them and must log the same ``metrics.jsonl`` rows (clock keys aside) and
score the same evaluation: integers and text exactly, floats to ``old_runs.RTOL`` (or
``ATOL`` near zero), under the host's own instruction set and under AVX, the weakest jaxlib
runs on, so that a difference between CPUs shows on any host (docs/design.md, "Determinism
across hosts").
"""

from __future__ import annotations

import json
import os

import pytest

from tests import old_runs
from tests.helpers import REPO, read_metrics, reproducible_part

# The instruction sets the continuations are compiled for: the host's ("") and AVX (XLA's
# cap, ``runtime.config.xla_flags.ISA_FLAG``), the weakest jaxlib runs on: without FMA, the
# rounding furthest from a host's with it.
ISAS = ("", "AVX")
# The default tier runs them uncapped; the long tier capped at AVX too.
CASES = [pytest.param(commit, spec, isa, id=f"{commit}-{spec.mode}-{isa or 'host'}",
                      marks=pytest.mark.slow if isa else ())
         for commit in old_runs.COMMITS for spec in old_runs.SPECS for isa in ISAS]


def _fixture(commit: str, spec: old_runs.Spec) -> tuple[str, dict]:
    run_dir = os.path.join(old_runs.FIXTURES, commit, spec.mode)
    with open(f"{run_dir}.expected.json") as f:
        return run_dir, json.load(f)


@pytest.mark.optimized
@pytest.mark.parametrize("commit,spec,isa", CASES)
def test_an_old_run_continues_as_its_own_code_did(commit, spec, isa, tmp_path):
    """Extended past its end, resumed from an older checkpoint, evaluated: each equals what
    the commit's code did with the same directory, floats to ``old_runs.RTOL``."""
    run_dir, expected = _fixture(commit, spec)
    now = old_runs.continued(REPO, spec, run_dir, str(tmp_path), isa)
    assert old_runs.differences(now, expected) == []


def test_differences_are_exact_on_integers_and_text_and_relative_on_floats():
    """Floats within ``RTOL`` of the larger magnitude, or within ``ATOL``, pass; anything
    else is named."""
    rtol, atol = old_runs.RTOL, old_runs.ATOL
    row = {"update": 3, "env_steps": 1536, "episode_return": 20.0, "loss/value": -2.0,
           "params_lag": None}
    record = {"extended": [row], "evaluate": ["return  186.700  22.792"]}
    close = {"extended": [dict(row, **{"loss/value": -2.0 * (1 + 0.9 * rtol)})],
             "evaluate": ["return  186.7001  22.792"]}
    assert old_runs.differences(close, record) == []
    far = dict(row, **{"loss/value": -2.0 * (1 + 1.1 * rtol)})
    assert old_runs.differences({**record, "extended": [far]}, record) == [
        f"extended[0].loss/value: {far['loss/value']!r}, expected -2.0"]
    for key, value in (("update", 4), ("env_steps", 1536.0), ("params_lag", 0.0)):
        assert old_runs.differences({**record, "extended": [dict(row, **{key: value})]},
                                    record) == [f"extended[0].{key}: {value!r}, expected "
                                                f"{row[key]!r}"]
    assert old_runs.differences({**record, "evaluate": ["length  186.700  22.792"]}, record)
    assert old_runs.differences({**record, "extended": []}, record) == [
        "extended: 0 items, expected 1"]
    tiny = {"extended": [dict(row, **{"loss/value": 0.9 * atol})]}
    assert old_runs.differences(tiny, {"extended": [dict(row, **{"loss/value": 0.0})]}) == []
    tiny = {"extended": [dict(row, **{"loss/value": 1.1 * atol})]}
    assert old_runs.differences(tiny, {"extended": [dict(row, **{"loss/value": 0.0})]})


def test_a_run_records_its_format_version(tmp_path):
    """config.json says which version of the rule wrote it; reading drops the key."""
    from configs import base
    from runtime.config import saved
    from runtime.run.metrics import write_config

    write_config(str(tmp_path), base.get_config())
    written = json.loads((tmp_path / "config.json").read_text())
    assert written[saved.VERSION_KEY] == saved.FORMAT_VERSION
    assert saved.VERSION_KEY not in saved.upgrade_saved(written)
    assert saved.upgrade_saved(written) == json.loads(base.get_config().to_json())


def test_a_version_one_config_reads_the_added_fields_as_the_old_code_ran():
    """A file without ``format_version`` lacks the added fields (and their sweep keys): they
    read as the values that reproduce the older code; a file of today's version is taken as
    it is."""
    from runtime.config import saved

    upgraded = saved.upgrade_saved({"seed": 1, "sweep": {"seed": [3]}})
    assert upgraded == {"seed": 1, **{k: a.value for k, a in saved.ADDED.items()},
                        "sweep": {**{k: [] for k in saved.SWEEP_KEYS}, "seed": [3]}}
    assert {"policy_lag", "decoupled_max_weight", "checkpoint_every_minutes"} <= set(
        upgraded["sweep"])
    current = {"seed": 1, saved.VERSION_KEY: saved.FORMAT_VERSION}
    assert saved.upgrade_saved(current) == {"seed": 1}


def _newer(run_dir: str, tmp_path) -> str:
    workdir = old_runs.copy_run(run_dir, str(tmp_path / "run"))
    path = os.path.join(workdir, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["format_version"] = 99
    with open(path, "w") as f:
        json.dump(config, f)
    return workdir


def test_a_run_from_a_newer_version_is_refused_in_one_line(tmp_path):
    """Train and evaluate both say in one line (exit 2) that a newer version wrote it."""
    spec = old_runs.SPECS[0]
    run_dir, _ = _fixture(old_runs.COMMITS[-1], spec)
    workdir = _newer(run_dir, tmp_path)
    for module, args in ((f"{spec.mode}.main", spec.train_args(workdir, spec.extended_steps)),
                         (f"{spec.mode}.evaluate", [f"--workdir={workdir}"])):
        proc = old_runs.run(REPO, module, args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "format_version" in lines[0] and "run format 99" in lines[0]
    assert reproducible_part(read_metrics(workdir)) == reproducible_part(
        read_metrics(run_dir))  # nothing written


# ----------------------------------------------------------------------------- the train state


def _saved(tmp_path, state) -> "Checkpointer":  # noqa: F821 - imported inside
    from runtime.run.checkpoint import Checkpointer

    ckpt = Checkpointer(str(tmp_path))
    ckpt.save(1, state)
    return ckpt


def test_a_part_an_older_checkpoint_lacks_takes_its_initial_value(tmp_path):
    """Saved without ``ring`` and with an empty ``old`` part: ``w`` restores, ``ring`` keeps
    the fresh state's value, ``old`` is dropped."""
    import jax.numpy as jnp
    import numpy as np

    ckpt = _saved(tmp_path, {"w": jnp.arange(3.0), "old": None})
    fresh = {"w": jnp.zeros(3), "ring": jnp.full((2, 3), 7.0), "empty": None}
    state = ckpt.restore_checked(fresh, 1)
    assert set(state) == {"w", "ring", "empty"} and state["empty"] is None
    np.testing.assert_array_equal(state["w"], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(state["ring"], np.full((2, 3), 7.0))


@pytest.mark.parametrize("fresh,reason", [
    ({"w": "zeros3"}, "it holds extra, which this run's train state has no place for"),
    ({"w": "zeros4", "extra": "zeros3"}, "its w is [3], this run's [4]"),
])
def test_a_checkpoint_this_version_cannot_continue_is_said_so_and_kept(tmp_path, fresh, reason):
    """Not "damaged", not moved aside: one line naming the part and what to do."""
    import jax.numpy as jnp

    from runtime.run.checkpoint import IncompatibleCheckpoint, restore_newest_good

    ckpt = _saved(tmp_path, {"w": jnp.arange(3.0), "extra": jnp.ones(3)})
    like = {k: jnp.zeros(int(v[-1])) for k, v in fresh.items()}
    with pytest.raises(IncompatibleCheckpoint) as e:
        restore_newest_good(ckpt, like, [1], main=True)
    assert reason in str(e.value) and "--fresh" in str(e.value) and "\n" not in str(e.value)
    assert ckpt.steps() == [1]


def test_a_typed_key_in_the_state_is_no_mismatch(tmp_path):
    """A typed PRNG key array is stored as its key data (``[..., 2]``): same structure, no
    refusal (an env state that holds keys, e.g. XLand-MiniGrid's)."""
    import jax
    import numpy as np

    state = {"key": jax.random.split(jax.random.key(0), 3), "w": jax.numpy.ones(2)}
    ckpt = _saved(tmp_path, state)
    fresh = {"key": jax.random.split(jax.random.key(1), 3), "w": jax.numpy.zeros(2)}
    restored = ckpt.restore_checked(fresh, 1)
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]),
                                  jax.random.key_data(state["key"]))


def test_the_sessions_instruction_set_cap_reaches_the_processes_tests_start(monkeypatch):
    """``XLA_FLAGS=--xla_cpu_max_isa=AVX2 make test`` caps every process; a cap a test gives
    comes later, so it wins (XLA takes a repeated flag's last value)."""
    from tests.helpers import entry_env, xla_flags

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4 "
                                    "--xla_cpu_max_isa=AVX2")
    assert xla_flags("--xla_cpu_max_isa=AVX") == "--xla_cpu_max_isa=AVX2 --xla_cpu_max_isa=AVX"
    assert entry_env(optimized=True)["XLA_FLAGS"] == "--xla_cpu_max_isa=AVX2"
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert "XLA_FLAGS" not in entry_env(optimized=True)


# config.json of CartPole PPO runs (8,192 env steps, a row every update, a checkpoint every 2)
# by 28f4887, older than the fixtures' commits: its fields lack the staleness fields and
# checkpoint_every_minutes, whose key its sweep lacks too (tests/fixtures/old_runs/28f4887).
OLDER = {"anakin": "configs/cartpole_ppo.py", "sebulba": "configs/cartpole_ppo_sebulba.py"}


@pytest.mark.parametrize("mode", sorted(OLDER))
def test_a_run_older_than_a_field_a_resume_may_change_extends(mode, tmp_path):
    """A run saved before ``checkpoint_every_minutes`` (a field a resume may change) extends:
    its sweep's missing key reads as not swept (docs/design.md, "Runs outlive upgrades"). A
    continuation of the run measured equal to 28f4887's own, to ``old_runs.RTOL``."""
    import importlib.util

    from runtime.config.validation import derive
    from runtime.run.resume import check_same_config

    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "config.json").write_text(open(os.path.join(
        old_runs.FIXTURES, "28f4887", mode, "config.json")).read())
    spec = importlib.util.spec_from_file_location("config", os.path.join(REPO, OLDER[mode]))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.get_config()
    config.log_every, config.checkpoint_every, config.total_env_steps = 1, 2, 10_240
    sizes = derive(config)
    newest = 8_192 // sizes.steps_per_update
    assert check_same_config(str(workdir), config, sizes.num_updates, sizes.steps_per_update,
                             newest) == 8_192
