"""The env's own arguments, ``env_kwargs``: given on the command line or in a config, passed
to the user's env class and to the suites, recorded in ``config.json``, used again by
evaluate and ``load_policy``, refused by name where the env does not take them, and part of
what a resume may not change (docs/design.md, "The env's own arguments")."""

from __future__ import annotations

import json
import os
import textwrap

import jax
import numpy as np
import pytest

from configs import cartpole_ppo
from envs import registry
from rlcore.errors import ConfigError
from runtime.config.saved import upgrade_saved
from tests.helpers import REPO, assert_floats_close, config_error_lines, entry_env, run_entry

MODULE = textwrap.dedent('''
    """A line of ``size`` cells: walk right to the end (+1), -0.01 a step."""
    import jax
    import jax.numpy as jnp

    from rlcore.types import EnvSpec


    class Line:
        def __init__(self, size=4, max_steps=20):
            self.size, self.max_steps = size, max_steps
            self.spec = EnvSpec(obs_shape=(size,), obs_dtype="float32", num_actions=2)

        def reset(self, key):
            return jax.nn.one_hot(0, self.size), (jnp.int32(0), jnp.int32(0))

        def step(self, state, action, key):
            pos, time = state
            pos = jnp.clip(pos + jnp.where(action == 1, 1, -1), 0, self.size - 1)
            done = pos == self.size - 1
            return (jax.nn.one_hot(pos, self.size), (pos, time + 1),
                    jnp.where(done, 1.0, -0.01), done, time + 1 >= self.max_steps)
''')
ENV_ID = "kwargenvs:Line"
SHORT = ["--config.total_env_steps=2048", "--config.num_envs=4", "--config.num_steps=16"]


@pytest.fixture
def user_env(tmp_path, monkeypatch):
    """``kwargenvs`` (``MODULE``) importable here and in a command: the command's env."""
    root = tmp_path / "outside"
    root.mkdir()
    (root / "kwargenvs.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(root))
    return dict(entry_env(), PYTHONPATH=os.pathsep.join([str(root), REPO]))


def _train(env: dict, module: str, config: str, workdir, *overrides: str):
    return run_entry(module, [f"--config={REPO}/configs/{config}", f"--config.env_id={ENV_ID}",
                              *SHORT, *overrides, f"--workdir={workdir}"], env=env)


@pytest.mark.parametrize("module,config", [
    ("anakin", "cartpole_ppo.py"),
    pytest.param("sebulba", "cartpole_ppo_sebulba.py", marks=pytest.mark.slow)])  # 11 s
def test_a_size_argument_trains_is_recorded_and_rebuilds_the_env(user_env, tmp_path, module,
                                                                 config):
    """``--config.env_kwargs.size=7`` trains in both architectures, ``config.json`` records
    it, and evaluate and ``load_policy`` rebuild the 7-cell env from it."""
    workdir = tmp_path / "run"
    proc = _train(user_env, f"{module}.main", config, workdir, "--config.env_kwargs.size=7")
    assert proc.returncode == 0, proc.stderr[-2000:]
    saved = json.loads((workdir / "config.json").read_text())
    assert saved["env_kwargs"] == {"size": 7}
    proc = run_entry(f"{module}.evaluate", [f"--workdir={workdir}", "--episodes=2"],
                     env=user_env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from runtime.commands.policy import load_policy

    policy, params = load_policy(str(workdir))
    action = policy(params, np.zeros((3, 7), np.float32), jax.random.key(0))
    assert action.shape == (3,)


def test_another_value_on_resume_is_refused(user_env, tmp_path):
    """A resume with another ``env_kwargs`` value changes the env: refused in one line."""
    workdir = tmp_path / "run"
    assert _train(user_env, "anakin.main", "cartpole_ppo.py", workdir,
                  "--config.env_kwargs.size=7").returncode == 0
    proc = _train(user_env, "anakin.main", "cartpole_ppo.py", workdir,
                  "--config.env_kwargs.size=5", "--config.total_env_steps=4096")
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("config error: env_kwargs.size: ")
    assert "made with 7, not 5" in lines[0]


@pytest.mark.parametrize("flags,start", [
    (["--config.env_kwargs.colour=3"], "config error: env_kwargs.colour: kwargenvs:Line "
     "takes no argument 'colour' (it takes: size, max_steps)"),
    (["--config.sweep.env_kwargs.size=5,7"], "config error: sweep.env_kwargs.size: "
     "kwargenvs:Line does not build with a traced size, as each agent of a sweep builds it "
     "(env_id: 'kwargenvs:Line' has spec obs_shape="),
    (["--config.sweep.env_kwargs.colour=5,6"], "config error: sweep.env_kwargs.colour: "
     "kwargenvs:Line takes no argument 'colour'"),
    (["--config.sweep.env_kwargs.max_steps=5,x"], "config error: sweep.env_kwargs.max_steps: "
     "values must be numbers, got (5, 'x')"),
    (["--config.sweep.env_kwargs.max_steps=5,20", "--config.num_seeds=2",
      "--config.pbt.interval=4", "--config.pbt.explore=env_kwargs.max_steps,"],
     "config error: pbt.explore: 'env_kwargs.max_steps' is an argument of the agent's env"),
])
def test_a_bad_or_unsweepable_argument_is_one_line_exit_2_before_compiling(user_env, tmp_path,
                                                                           flags, start):
    """An argument the class does not take, one that sets a shape swept, a swept value
    that is not a number, an env argument explored by PBT: one line, exit 2, no run."""
    proc = _train(user_env, "anakin.main", "cartpole_ppo.py", tmp_path / "run", *flags)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith(start), lines
    assert "compil" not in proc.stdout.lower()


def _sweep_config(**env_kwargs):
    config = cartpole_ppo.get_config()
    config.env_id, config.total_env_steps, config.num_envs, config.num_steps = (
        ENV_ID, 2048, 4, 16)
    config.env_kwargs.update(env_kwargs)
    return config


def test_a_swept_numeric_argument_trains_each_agent_on_its_own_env(user_env, tmp_path):
    """``sweep.env_kwargs.max_steps=5,20``: one program, each agent's env built with its
    value traced; agent 0 logs the single run with ``max_steps=5`` (to float roundoff),
    and the evaluate command builds agent 0's env with 5."""
    import ml_collections

    import anakin
    from runtime.config.sweep import agent_env_kwargs
    from runtime.distributed import data_mesh

    config = _sweep_config()
    config.sweep.env_kwargs = ml_collections.ConfigDict({"max_steps": (5, 20)})
    mesh = data_mesh(jax.devices()[:1])
    swept = anakin.run(config, str(tmp_path / "sweep"), mesh=mesh).rows
    single = anakin.run(_sweep_config(max_steps=5), str(tmp_path / "single"), mesh=mesh).rows
    mine = [r for r in swept if r["env_kwargs.max_steps"] == 5]
    assert len(mine) == len(single) > 0
    assert_floats_close(mine, single)
    other = [r for r in swept if r["env_kwargs.max_steps"] == 20]
    assert other[-1]["episode_length"] != mine[-1]["episode_length"]
    saved = json.loads((tmp_path / "sweep" / "config.json").read_text())
    assert saved["sweep"]["env_kwargs"] == {"max_steps": [5, 20]}
    assert [agent_env_kwargs(config, a) for a in (0, 1)] == [{"max_steps": 5},
                                                             {"max_steps": 20}]


@pytest.mark.slow  # 14 s
def test_a_swept_argument_logs_the_same_on_one_and_four_devices(user_env, tmp_path):
    """The sweep of ``max_steps`` on 1 device and on 4 (8 envs): the same rows (floats to
    1e-5), as every sweep's."""
    from tests.helpers import read_metrics, xla_flags

    env = dict(user_env, XLA_FLAGS=xla_flags("--xla_force_host_platform_device_count=4"))
    rows = []
    for devices in (1, 4):
        workdir = tmp_path / f"d{devices}"
        proc = _train(env, "anakin.main", "cartpole_ppo.py", workdir, "--config.num_envs=8",
                      "--config.num_minibatches=2", f"--config.num_devices={devices}",
                      "--config.sweep.env_kwargs.max_steps=5,20")
        assert proc.returncode == 0, proc.stderr[-2000:]
        rows.append(read_metrics(str(workdir)))
    assert len(rows[0]) == 2
    assert_floats_close(rows[1], rows[0])


def test_the_command_line_sets_a_sweeps_tuple_and_agents_keep_their_env_values():
    """``--config.sweep.env_kwargs.NAME=V1,V2`` is a tuple of literals; the agents' values
    are ``[A]`` constants (int32 for ints), not hyperparameters the population holds."""
    from runtime.config import pbt, sweep
    from runtime.config.algo import set_own

    config = cartpole_ppo.get_config()
    config.num_seeds = 2
    set_own(config, [("sweep.env_kwargs.max_steps", "5,20"),
                     ("sweep.env_kwargs.scale", "0.5,1.5"), ("env_kwargs.size", "7")])
    assert tuple(config.sweep.env_kwargs.max_steps) == (5, 20)
    assert config.env_kwargs.size == 7
    assert sweep.num_agents(config) == 8
    values = sweep.agent_env_values(config)
    assert values["max_steps"].dtype == np.int32 and values["scale"].dtype == np.float32
    assert values["max_steps"].tolist() == [5, 5, 5, 5, 20, 20, 20, 20]
    assert values["scale"].tolist() == [0.5, 0.5, 1.5, 1.5] * 2
    assert sweep.agent_hparams(config) is None and pbt.names(config) == ()


def test_a_config_file_sets_them_and_the_suites_take_them(user_env):
    """``c.env_kwargs.NAME`` in a config; gymnax's env params and our own envs' arguments
    by name, refused by name where the suite does not take them."""
    from anakin.mode import MODE
    from runtime.config.validation import DeviceCounts, validate

    config = cartpole_ppo.get_config()
    config.env_id = ENV_ID
    config.env_kwargs.size = 9
    validate(config, MODE, DeviceCounts(devices=1, local_devices=1, processes=1))
    assert MODE.spec(config).obs_shape == (9,)
    assert registry.make_jax_env("own:Catch", rows=4, cols=3).spec.obs_shape == (12,)
    assert registry.make_jax_env("CartPole-v1", max_steps_in_episode=50) is not None
    registry.check_jax_env_id("CartPole-v1", max_steps_in_episode=50)
    with pytest.raises(ConfigError, match="^env_kwargs.width: own:Catch takes no argument"):
        registry.check_jax_env_id("own:Catch", width=3)
    with pytest.raises(ConfigError, match="^env_kwargs.gravity_x: CartPole-v1 takes no"):
        registry.check_jax_env_id("CartPole-v1", gravity_x=3.0)


def test_a_lambda_from_python_says_to_pass_the_class_with_env_kwargs(user_env):
    """``anakin.run(config, env=lambda: ...)`` has no import path to record: one line that
    says what to pass instead."""
    import kwargenvs

    import anakin

    config = cartpole_ppo.get_config()
    with pytest.raises(ConfigError, match="^env_id: .*config.env_kwargs"):
        anakin.run(config, env=lambda: kwargenvs.Line(size=7))


def test_an_old_run_without_them_reads_as_none():
    """A ``config.json`` written before the field reads as ``env_kwargs={}``."""
    assert upgrade_saved({"seed": 1, "format_version": 4})["env_kwargs"] == {}
    assert "env_kwargs" not in upgrade_saved({"seed": 1, "format_version": 5})


def test_evaluation_plays_whole_games_where_training_loses_lives():
    """``episodic_life`` (a lost life ends the learner's episode) is off in the evaluation's
    env arguments, in training and in the evaluate command; the others stay as given."""
    from runtime.config.env_args import env_kwargs_of, evaluation_kwargs_of

    config = cartpole_ppo.get_config()
    config.env_kwargs.episodic_life = True
    config.env_kwargs.noop_max = 30
    assert env_kwargs_of(config) == {"episodic_life": True, "noop_max": 30}
    assert evaluation_kwargs_of(config) == {"episodic_life": False, "noop_max": 30}
    config.env_kwargs = {"noop_max": 30}
    assert evaluation_kwargs_of(config) == {"noop_max": 30}


@pytest.mark.parametrize("given, message", [
    ({"foo": 1}, "env_kwargs.foo: EnvPool's Breakout-v5 has no option 'foo' (its options: "),
    ({"seed": 3}, "env_kwargs.seed: Sebulba sets EnvPool's seed itself"),
    ({"noop_max": 0}, "env_kwargs.noop_max: must be an integer >= 1, got 0"),
    ({"stack_num": -2}, "env_kwargs.stack_num: must be an integer >= 1, got -2"),
    ({"episodic_life": 1}, "env_kwargs.episodic_life: must be of type bool, as EnvPool's "
     "default False, got 1"),
    ({"repeat_action_probability": 1.5}, "env_kwargs.repeat_action_probability: must be in "
     "[0, 1], got 1.5"),
])
def test_envpool_options_by_name_and_value(given, message):
    """An EnvPool env takes its own options (PQN's Atari: episodic life, noop 30, no sticky
    actions); a name it lacks, one Sebulba sets, or a value EnvPool would crash on (a 0
    noop_max segfaults it) is one line before anything runs."""
    registry.check_host_env_id("Breakout-v5", episodic_life=True, noop_max=30,
                               repeat_action_probability=0.0, full_action_space=False)
    with pytest.raises(ConfigError) as e:
        registry.check_host_env_id("Breakout-v5", **given)
    assert str(e.value).startswith(message), str(e.value)
