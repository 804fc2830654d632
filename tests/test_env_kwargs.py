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
from tests.helpers import REPO, config_error_lines, entry_env, run_entry

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


@pytest.mark.parametrize("flag,start", [
    ("--config.env_kwargs.colour=3", "config error: env_kwargs.colour: kwargenvs:Line "
     "takes no argument 'colour' (it takes: size, max_steps)"),
    ("--config.sweep.env_kwargs.size=5,7", "config error: sweep.env_kwargs.size: an env's "
     "arguments may set its shapes"),
])
def test_a_bad_or_swept_argument_is_one_line_exit_2_before_compiling(user_env, tmp_path,
                                                                     flag, start):
    """An argument the class does not take, or a swept one: one line, exit 2, no run."""
    proc = _train(user_env, "anakin.main", "cartpole_ppo.py", tmp_path / "run", flag)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith(start), lines
    assert "compil" not in proc.stdout.lower()


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
