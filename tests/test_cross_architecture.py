"""Anakin against Sebulba on one env (gymnax CartPole; Sebulba through the host adapter,
``envs.jax_host``) at one seed and policy lag: how close their learner batches and metrics
are (docs/design.md, "Pipelines and staleness").

Both draw actions from the same keys (``rlcore.seeding``) with the same initial params, but
their envs draw from different streams (Anakin ``per_env_keys(roots.env, i, u, t)``, the
host adapter ``host_env_root`` with a call counter), so their batches differ from the first
observation on. ``AnakinKeyedHost`` serves Sebulba the envs with Anakin's keys; with it
the two architectures see the same data and differ only by floating point.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import anakin.train as anakin_train
import sebulba.train as sebulba_train
from configs import cartpole_ppo_sebulba
from envs import registry
from envs.jax_host import JaxHostEnv
from rlcore.seeding import Roots, per_env_keys
from runtime.distributed import data_mesh

UPDATES = 7
FIELDS = ("obs", "action", "reward", "terminated", "truncated", "bootstrap_obs",
          "behaviour_dist_params")


def _config(lag: int):
    """gymnax CartPole, 8 envs x 16 steps, UPDATES updates, one device for both."""
    c = cartpole_ppo_sebulba.get_config()
    c.env_id = "gymnax:CartPole-v1"
    c.actor_device_ids = c.learner_device_ids = (0,)
    c.num_envs, c.num_steps, c.num_minibatches = 8, 16, 2
    c.total_env_steps = 8 * 16 * UPDATES
    c.log_every = c.updates_per_call = c.num_devices = 1
    c.policy_lag = lag
    return c


class AnakinKeyedHost(JaxHostEnv):
    """A JaxHostEnv whose env ``g`` draws Anakin's keys: reset ``per_env_keys(env_root, g)``,
    call ``c >= 1`` (step ``t`` of rollout ``u``, ``c - 1 = u * T + t``)
    ``per_env_keys(env_root, g, u, t)``."""

    def __init__(self, env, num_envs, *, env_root, num_steps, first_env_index=0):
        super().__init__(env, num_envs, root=env_root, first_env_index=first_env_index)
        self._root_keys = jnp.arange(first_env_index, first_env_index + num_envs)  # env ids

        def reset(ids, counter, completed):
            state, ts = jax.vmap(env.reset)(per_env_keys(env_root, ids))
            return state.replace(stats=state.stats.replace(
                completed_return=completed.completed_return,
                completed_length=completed.completed_length)), ts

        def step(ids, counter, state, actions):
            u, t = (counter - 1) // num_steps, (counter - 1) % num_steps
            return jax.vmap(env.step)(state, actions, per_env_keys(env_root, ids, u, t))

        self._reset_fn, self._step_fn = jax.jit(reset), jax.jit(step)


def _sebulba(config, anakin_keys: bool, monkeypatch) -> tuple[dict, list[dict]]:
    """The batches and rows of a Sebulba run (with Anakin's env keys or its own)."""
    if anakin_keys:
        env_root = Roots.from_seed(config.seed).env
        monkeypatch.setattr(sebulba_train, "make_host_env", lambda env_id, n, **kw: (
            AnakinKeyedHost(registry.make_jax_env(env_id), n, env_root=env_root,
                            num_steps=config.num_steps,
                            first_env_index=kw["first_env_index"])))
    sebulba_train.prepare(config)
    seen = {}
    rows = sebulba_train.train(config, None, on_batch=lambda u, batch: seen.__setitem__(
        u, jax.tree.map(np.asarray, batch)))
    return seen, rows


def _anakin(config, monkeypatch) -> tuple[dict, list[dict]]:
    """The batches of an Anakin run's UPDATES updates, as the learner receives them, and
    its rows."""
    seen = {}
    make = anakin_train.AnakinRun.agent_update_fn

    def agent_update_fn(self, swept, num_updates):
        update = make(self, swept, num_updates)

        def recorded(learner, traj, key):
            jax.debug.callback(lambda u, t: seen.__setitem__(
                int(u), jax.tree.map(np.asarray, t)), learner.update, traj)
            return update(learner, traj, key)

        return recorded

    monkeypatch.setattr(anakin_train.AnakinRun, "agent_update_fn", agent_update_fn)
    anakin_train.prepare(config)
    rows = anakin_train.train(config, None, mesh=data_mesh(jax.devices()[:1]))
    assert sorted(seen) == list(range(UPDATES))
    return seen, rows


def max_abs_diffs(a: dict, b: dict) -> dict[str, float]:
    """Per field, the largest ``|a - b|`` over every update's batch."""
    return {name: max(float(np.max(np.abs(np.asarray(getattr(a[u], name), np.float64)
                                          - np.asarray(getattr(b[u], name), np.float64))))
                      for u in a)
            for name in FIELDS}


def max_loss_diffs(a: list[dict], b: list[dict]) -> dict[str, float]:
    """Per ``loss/`` key, the largest ``|a - b| / max(|a|, 1e-3)`` over the rows."""
    assert [r["update"] for r in a] == [r["update"] for r in b]
    keys = [k for k in a[0] if k.startswith("loss/")]
    return {k: max(abs(ra[k] - rb[k]) / max(abs(ra[k]), 1e-3) for ra, rb in zip(a, b))
            for k in keys}


@functools.cache
def _anakin_cached(lag: int) -> tuple[dict, list[dict]]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _anakin(_config(lag), monkeypatch)


EXACT = ("action", "reward", "terminated", "truncated")


@pytest.mark.parametrize("lag", [pytest.param(0, marks=pytest.mark.slow),
                                 pytest.param(1, marks=pytest.mark.slow), 4])
def test_with_anakin_keys_batches_agree_to_float_error(lag, monkeypatch):
    """Sebulba serving Anakin's env keys, 7 updates: the same actions, rewards and flags bit
    for bit at every lag; observations to float error (XLA fuses the env step differently
    in Anakin's scan and the host adapter's call), behaviour logits and losses to float
    error."""
    batches, rows = _sebulba(_config(lag), True, monkeypatch)
    anakin_batches, anakin_rows = _anakin_cached(lag)
    diffs, losses = max_abs_diffs(anakin_batches, batches), max_loss_diffs(anakin_rows, rows)
    print(f"lag {lag}, Anakin keys: batches {diffs}; losses (relative) {losses}")
    assert [diffs[k] for k in EXACT] == [0.0] * len(EXACT), diffs
    assert diffs["obs"] < 1e-4 and diffs["bootstrap_obs"] < 1e-4, diffs
    assert diffs["behaviour_dist_params"] < 1e-3, diffs
    assert max(losses.values()) < 1e-2, losses
    assert [r["episode_return"] for r in rows] == [r["episode_return"] for r in anakin_rows]


@pytest.mark.slow
def test_with_their_own_env_keys_the_batches_differ(monkeypatch):
    """As the two architectures run: same action keys and initial params, different env
    streams: no observation agrees."""
    batches, rows = _sebulba(_config(0), False, monkeypatch)
    anakin_batches, anakin_rows = _anakin_cached(0)
    print(f"lag 0, own keys: batches {max_abs_diffs(anakin_batches, batches)}; losses "
          f"(relative) {max_loss_diffs(anakin_rows, rows)}")
    assert all(not np.any(np.all(anakin_batches[u].obs == batches[u].obs, axis=-1))
               for u in anakin_batches)
