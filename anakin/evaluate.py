"""Anakin evaluation: ``python -m anakin.evaluate --workdir=DIR --episodes=N [--greedy]
[--video=PATH] [--agent=K] [--max_episode_steps=S]``.

Restores the latest checkpoint of the run in DIR on one device and plays N full episodes
with the run's jittable env: a batch of N envs, ``vmap``ped and stepped in jitted chunks of
``CHUNK`` steps until each env finished its first episode (only that one counts). Seeds
follow ``runtime.evaluation`` (keys of ``fold_in(key(seed), EVAL_STREAM)``, a stream training
never uses). With ``num_seeds > 1`` or a sweep, ``--agent=K`` picks the agent (default 0)
and its own seed. Frames for ``--video`` are drawn from env 0's observations
(``runtime.evaluation.obs_frame_fn``; gymnax envs do not render RGB).

Exit codes: 0 done, 1 runtime failure, 2 bad argument (one ``error:`` line).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rlcore.seeding import per_env_keys
from runtime import evaluation as ev

CHUNK = 128  # env steps per jitted call


@struct.dataclass
class PlayCarry:
    """The evaluation envs between steps (leaves ``[N]`` unless noted).

    Attributes:
      state: JaxEnvState ``[N, ...]``.
      obs: ``[N, *obs_shape]`` the obs the next action is taken on.
      t: ``[]`` int32 steps taken.
      finished: bool, the env's first episode ended.
      ret: float32 return of the first episode (where finished).
      length: int32 length of the first episode (where finished).
    """

    state: object
    obs: jax.Array
    t: jax.Array
    finished: jax.Array
    ret: jax.Array
    length: jax.Array


def reset_play(env, roots: ev.EvalRoots, num_envs: int) -> PlayCarry:
    """Resets ``num_envs`` envs with ``per_env_keys(roots.reset, i)``."""
    ids = jnp.arange(num_envs, dtype=jnp.int32)
    state, ts = jax.vmap(env.reset)(per_env_keys(roots.reset, ids))
    return PlayCarry(state=state, obs=ts.obs, t=jnp.int32(0),
                     finished=jnp.zeros(num_envs, bool),
                     ret=jnp.zeros(num_envs, jnp.float32), length=jnp.zeros(num_envs, jnp.int32))


def make_play_chunk(env, apply_fn: Callable, greedy: bool, chunk: int = CHUNK):
    """Builds jitted ``play(params, roots, carry) -> (carry, obs0 [chunk, *obs_shape])``:
    ``chunk`` steps of every env (auto-reset; finished envs keep stepping, uncounted), with
    the observation env 0 acted on at each step.

    Step ``t`` of env ``i`` uses ``per_env_keys(roots.env, i, t)`` for the env and
    ``per_env_keys(roots.action, i, t)`` for the action.
    """
    step_envs = jax.vmap(env.step)

    def one_step(params, roots, c: PlayCarry, _):
        ids = jnp.arange(c.finished.shape[0], dtype=jnp.int32)
        action = ev.policy_actions(apply_fn, params, c.obs, roots.action, c.t, greedy)
        state, ts = step_envs(c.state, action, per_env_keys(roots.env, ids, c.t))
        ended = (ts.terminated | ts.truncated) & ~c.finished
        carry = PlayCarry(
            state=state, obs=ts.obs, t=c.t + 1, finished=c.finished | ended,
            ret=jnp.where(ended, state.stats.completed_return, c.ret),
            length=jnp.where(ended, state.stats.completed_length, c.length))
        return carry, c.obs[0]

    def play(params, roots, carry: PlayCarry):
        return jax.lax.scan(lambda c, x: one_step(params, roots, c, x), carry, length=chunk)

    return jax.jit(play)


def play_episodes(env, apply_fn: Callable, params, roots: ev.EvalRoots, num_episodes: int,
                  greedy: bool) -> tuple[ev.EpisodeResults, np.ndarray]:
    """The first episode of each of ``num_episodes`` envs.

    Args:
      env: a JaxEnv (one env; vmapped here).
      apply_fn: ``(params, obs [N, ...]) -> (logits [N, A], value [N])``.
      params: network parameters (one agent).
      roots: EvalRoots of the agent's seed.
      num_episodes: N.
      greedy: argmax actions instead of samples.

    Returns:
      ``(EpisodeResults [N], obs0 [L, *obs_shape])``: env 0's observations of its first
      episode, one per action (L = its length).
    """
    play = make_play_chunk(env, apply_fn, greedy)
    carry = reset_play(env, roots, num_episodes)
    obs0 = []
    while True:
        carry, chunk_obs = play(params, roots, carry)
        obs0.append(np.asarray(chunk_obs))
        if bool(jnp.all(carry.finished)):
            break
    results = ev.EpisodeResults(returns=np.asarray(carry.ret, np.float64),
                                lengths=np.asarray(carry.length, np.int64))
    return results, np.concatenate(obs0)[: int(results.lengths[0])]


def agent_params(run, learner, agent: int):
    """``(params, seed, description)`` of agent ``agent`` of an AnakinRun's learner state."""
    if agent >= run.num_agents:
        raise ev.EvalError(f"--agent: the run has {run.num_agents} agent(s), got {agent}")
    tags = run.tags[agent]
    if run.num_agents == 1:
        return learner.params, tags["seed"], "agent 0 of 1"
    params = jax.tree.map(lambda x: x[agent], learner.params)
    values = ", ".join(f"{k}={v}" for k, v in tags.items())
    return params, tags["seed"], f"agent {agent} of {run.num_agents} ({values})"


def evaluate(config, args: ev.EvalArgs) -> ev.Evaluation:
    """Restores the run of ``args.workdir`` on one device and plays ``args.episodes``."""
    from anakin.train import MODE, AnakinRun
    from envs import registry
    from runtime.config import DeviceCounts, validate
    from runtime.distributed import data_mesh

    config = ev.one_device_config(config)
    validate(config, MODE, DeviceCounts(devices=1, local_devices=1, processes=1))
    run = AnakinRun(config, mesh=data_mesh(jax.devices()[:1]))
    state, step = ev.restore_latest(args.workdir, run.init_state(), "anakin")
    params, seed, agent = agent_params(run, state.learner, args.agent)
    library, name = registry.resolve(config.env_id, registry.ANAKIN)
    overrides = ev.time_limit_overrides(library, args.max_episode_steps)
    env = registry.make_jax_env(config.env_id, **overrides) if overrides else run.env
    results, obs0 = play_episodes(env, run.network.apply, params, ev.EvalRoots.from_seed(seed),
                                  args.episodes, args.greedy)
    frames = []
    if args.video:
        grid = (env.rows, env.cols) if hasattr(env, "rows") and hasattr(env, "cols") else None
        to_frame = ev.obs_frame_fn(env.spec.obs_shape, env.spec.obs_dtype, name, grid)
        frames = [to_frame(o) for o in obs0]
    header = [f"anakin.evaluate: {config.env_id} ({library}:{name}), checkpoint at update "
              f"{step} of {args.workdir}, {agent}",
              f"eval seeds: keys of fold_in(key({seed}), {ev.EVAL_STREAM}), a stream "
              "training never uses"]
    return ev.Evaluation(results=results, frames=frames, header=header)


if __name__ == "__main__":
    ev.main(evaluate)
