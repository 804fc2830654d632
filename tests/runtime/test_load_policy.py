"""runtime.load_policy: a run's trained agent as a jitted function of observations. Its
greedy episodes on the evaluate commands' seeds are theirs (Anakin with 2 agents, Sebulba,
a recurrent agent carrying its state), one observation acts as a batch's row, an older
version's run loads, ``import runtime`` stays free of JAX, and bad input is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from anakin import evaluate as anakin_evaluate
from anakin.episodes import start_first_episodes, step_first_episodes
from anakin.train import train as anakin_train
from configs import cartpole_ppo, cartpole_ppo_sebulba, masked_cartpole_ppo
from envs import registry
from rlcore.seeding import EvaluateRoots, evaluate_host_seed, per_env_keys
from runtime import load_policy
from runtime.commands.evaluation import EvalArgs, EvalError, load_config
from runtime.commands.policy import Policy
from runtime.config.sweep import agent_tags
from runtime.distributed import data_mesh
from sebulba import evaluate as sebulba_evaluate
from sebulba.episodes import play_first_episodes
from sebulba.host_envs import make_host_env
from sebulba.train import prepare as sebulba_prepare
from sebulba.train import train as sebulba_train
from tests.helpers import REPO
from tests.old_runs import COMMITS, FIXTURES, copy_run

EPISODES = 4


def _tiny(config, updates: int):
    config.total_env_steps = config.num_envs * config.num_steps * updates
    config.log_every = config.updates_per_call = 1
    return config


def _train_anakin(config, workdir):
    anakin_train(config, str(workdir), mesh=data_mesh(jax.devices()[:1]))
    return str(workdir)


@pytest.fixture(scope="module")
def anakin_run(tmp_path_factory):
    """configs/cartpole_ppo.py, 2 seeds (agents), 2 updates."""
    config = _tiny(cartpole_ppo.get_config(), 2)
    config.num_seeds = 2
    return _train_anakin(config, tmp_path_factory.mktemp("anakin") / "run")


@pytest.fixture(scope="module")
def sebulba_run(tmp_path_factory):
    """configs/cartpole_ppo_sebulba.py (EnvPool), actors and learner on device 0, 2
    updates."""
    config = _tiny(cartpole_ppo_sebulba.get_config(), 2)
    workdir = tmp_path_factory.mktemp("sebulba") / "run"
    sebulba_prepare(config)
    sebulba_train(config, str(workdir))
    return str(workdir)


@pytest.fixture(scope="module")
def recurrent_run(tmp_path_factory):
    """configs/masked_cartpole_ppo.py (an LSTM core; Anakin), 1 update."""
    config = _tiny(masked_cartpole_ppo.get_config(), 1)
    return _train_anakin(config, tmp_path_factory.mktemp("recurrent") / "run")


def _greedy_returns(evaluate, workdir: str, agent: int = 0) -> np.ndarray:
    """The returns of the evaluate command's ``--greedy --episodes=EPISODES`` (in process)."""
    config = load_config(workdir, evaluate.config_defaults())
    args = EvalArgs(workdir=workdir, episodes=EPISODES, greedy=True, agent=agent)
    return evaluate.evaluate(config, args).results.returns


def _play_jax_env(env_id: str, policy: Policy, params, seed: int) -> np.ndarray:
    """First-episode returns of ``EPISODES`` jittable envs reset and stepped with the evaluate
    command's keys (``EvaluateRoots.from_seed(seed)``), acting with ``policy``; a recurrent
    agent's state carried from step to step."""
    env = registry.make_jax_env(env_id)
    roots = EvaluateRoots.from_seed(seed)
    ids = jnp.arange(EPISODES, dtype=jnp.int32)
    step = jax.jit(lambda c, action: step_first_episodes(
        env, c, action, per_env_keys(roots.env, ids, c.t)))
    c = start_first_episodes(env, per_env_keys(roots.reset, ids))
    state = policy.initial_state(EPISODES)
    while not bool(jnp.all(c.finished)):
        if policy.recurrent:
            action, state = policy(params, c.obs, None, state)
        else:
            action = policy(params, c.obs, None)
        c = step(c, action)
    return np.asarray(c.ret, np.float64)


def test_anakin_greedy_episodes_are_the_evaluate_commands(anakin_run):
    """Agent 1 of a 2-seed run, with its own seed: the returns ``anakin.evaluate --greedy
    --agent=1`` gives."""
    policy, params = load_policy(anakin_run, agent=1)
    assert not policy.recurrent and policy.initial_state() is None
    config = load_config(anakin_run, anakin_evaluate.config_defaults())
    seed = agent_tags(config)[1]["seed"]
    returns = _play_jax_env(config.env_id, policy, params, seed)
    np.testing.assert_array_equal(returns, _greedy_returns(anakin_evaluate, anakin_run, 1))


def test_sebulba_greedy_episodes_are_the_evaluate_commands(sebulba_run):
    """The EnvPool pool seeded as ``sebulba.evaluate`` seeds it: its ``--greedy`` returns."""
    policy, params = load_policy(sebulba_run)
    config = load_config(sebulba_run, sebulba_evaluate.config_defaults())
    env = make_host_env(config.env_id, EPISODES, seed=evaluate_host_seed(config.seed))
    try:
        episodes = play_first_episodes(env, lambda obs, t, first: policy(params, obs, None))
    finally:
        env.close()
    np.testing.assert_array_equal(episodes.returns,
                                  _greedy_returns(sebulba_evaluate, sebulba_run))


def test_one_observation_acts_as_a_row_of_a_batch(sebulba_run):
    """Greedy: each row's action is its observation's alone. Sampled: one observation draws
    with the key row 0 of a batch draws with; the same key, the same actions."""
    obs = jax.random.normal(jax.random.key(0), (6, 4))
    for greedy in (True, False):
        policy, params = load_policy(sebulba_run, greedy=greedy)
        key = jax.random.key(7)
        batch = policy(params, obs, key)
        assert batch.shape == (6,) and batch.dtype == jnp.int32
        one = policy(params, obs[0], key)
        assert one.shape == () and int(one) == int(batch[0])
        np.testing.assert_array_equal(policy(params, np.asarray(obs), key), batch)
        if greedy:
            singles = [int(policy(params, o, key)) for o in obs]
            np.testing.assert_array_equal(singles, batch)
    with pytest.raises(ValueError, match=r"^policy: obs must be \[4\] .* got \[6, 2\]$"):
        policy(params, obs[:, :2], key)
    with pytest.raises(ValueError, match="^policy: a feed-forward agent takes no state$"):
        policy(params, obs, key, jnp.zeros((6, 8)))
    with pytest.raises(ValueError, match=r"^policy: sampling \(greedy=False\) needs a key$"):
        policy(params, obs, None)


def test_recurrent_policy_carries_its_state(recurrent_run):
    """An LSTM agent: ``(action, state)`` out, the state moves; its greedy episodes with the
    state carried are ``anakin.evaluate --greedy``'s."""
    policy, params = load_policy(recurrent_run)
    assert policy.recurrent
    one, batch = policy.initial_state(), policy.initial_state(3)
    assert one.h.shape == (64,) and batch.h.shape == (3, 64) and batch.c.shape == (3, 64)
    obs = jnp.ones((2,))  # the masked env shows [x, theta]
    action, state = policy(params, obs, None, one)
    assert action.shape == () and state.h.shape == (64,)
    assert float(jnp.abs(state.h).sum()) > 0
    _, again = policy(params, obs, None, state)
    assert not np.array_equal(again.h, state.h)  # the second step starts from the first's
    with pytest.raises(ValueError, match="^policy: a recurrent agent takes its state"):
        policy(params, obs, None)
    config = load_config(recurrent_run, anakin_evaluate.config_defaults())
    returns = _play_jax_env(config.env_id, policy, params, config.seed)
    np.testing.assert_array_equal(returns, _greedy_returns(anakin_evaluate, recurrent_run))


@pytest.mark.parametrize("mode", ["anakin", "sebulba"])
def test_a_run_of_an_older_version_loads(mode, tmp_path):
    """A run written before run formats had versions (tests/old_runs.py; a copy): its
    architecture told by its checkpoint, its config upgraded, its agent acting."""
    workdir = copy_run(os.path.join(FIXTURES, COMMITS[-1], mode), str(tmp_path / mode))
    policy, params = load_policy(workdir)
    actions = policy(params, np.zeros((3, 4), np.float32), None)
    assert actions.shape == (3,) and actions.dtype == jnp.int32


def _fake_run(path, checkpoint: bool) -> str:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(cartpole_ppo.get_config().to_dict()))
    if checkpoint:
        (path / "checkpoints" / "1").mkdir(parents=True)  # a step without its files
    return str(path)


def _one_line(workdir, **kwargs) -> str:
    with pytest.raises(EvalError) as raised:
        load_policy(workdir, **kwargs)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_bad_input_is_one_line(tmp_path, anakin_run, sebulba_run):
    """Not a run, no checkpoint, a checkpoint that does not read, an agent the run does not
    have: one line naming the argument, before any restore."""
    assert _one_line(str(tmp_path / "missing")).startswith("workdir: no such run directory")
    assert _one_line(str(tmp_path)).endswith("has no config.json (not a run directory)")
    no_ckpt = _fake_run(tmp_path / "a", checkpoint=False)
    assert _one_line(no_ckpt).startswith("workdir: no checkpoint in ")
    empty = _fake_run(tmp_path / "b", checkpoint=True)
    assert _one_line(empty).startswith(f"workdir: checkpoint {empty}/checkpoints/1 does not "
                                       "read (")
    assert _one_line(anakin_run, agent=2) == "agent: the run has 2 agents (0..1), got 2"
    assert _one_line(sebulba_run, agent=1) == "agent: the run has 1 agent (0), got 1"
    assert _one_line(anakin_run, agent=-1) == "agent: must be >= 0, got -1"
    assert _one_line(anakin_run, agent="1") == "agent: must be an int, got '1'"


def test_a_torn_checkpoint_is_one_error_and_nothing_on_stderr(tmp_path, anakin_run):
    """Its data file cut in half: each of 10 loads raises the one-line error, and the
    tracebacks of the read's late I/O callbacks (tensorstore finishing after orbax's
    event loop closed, on other threads) go to the details file, not to stderr."""
    import shutil

    workdir = tmp_path / "torn"
    shutil.copytree(anakin_run, workdir)
    step = max(int(d) for d in os.listdir(workdir / "checkpoints") if d.isdigit())
    data = workdir / "checkpoints" / str(step) / "default" / "d"
    for f in data.iterdir():
        f.write_bytes(f.read_bytes()[:f.stat().st_size // 2])
    script = ("import runtime\n"
              "for _ in range(10):\n"
              "    try:\n"
              f"        runtime.load_policy({str(workdir)!r})\n"
              "    except Exception as e:\n"
              "        print(e)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 10, proc.stderr[-2000:]
    assert all(ln.startswith(f"workdir: checkpoint {workdir}/checkpoints/{step} ") for ln in lines)
    assert proc.stderr == ""


def test_import_runtime_imports_no_jax():
    """``runtime.load_policy`` loads on first use: ``import runtime`` alone starts no JAX."""
    code = ("import sys, runtime; assert 'jax' not in sys.modules, 'jax'; "
            "assert runtime.load_policy.__module__ == 'runtime.commands.policy'")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
