"""The episode player of jittable envs: the first episode of each env of a vmapped batch.

One player, two drivers. ``start_first_episodes`` and ``step_first_episodes`` keep the
bookkeeping (which env finished its first episode, with what return and length; finished
envs keep stepping, uncounted) once; in-training evaluation (``make_train_eval_fn``) runs
them in a ``lax.while_loop`` inside the compiled train step, the evaluate command
(``play_episodes``) in jitted chunks of ``CHUNK`` steps driven from the host, which also
hands back the observations env 0 acted on (for ``--video``). The player lives in anakin/
because it is jittable env machinery (``JaxEnv``, ``vmap``, ``lax`` loops) as Anakin runs
it; Sebulba's host envs have theirs in ``sebulba.episodes``.

Keys (``rlcore.seeding``): in-training evaluation after update ``u`` resets env ``i`` from
``per_env_keys(roots.train_eval, i, u)`` folded with 0 and steps it with that key folded
with ``t + 1``; the evaluate command uses the ``EvaluateRoots`` rule (reset
``per_env_keys(reset, i)``, step ``t``: ``per_env_keys(env, i, t)`` and actions from
``per_env_keys(action, i, t)``).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from envs.base import JaxEnv, JaxEnvState, TimeStep, step_batch
from rlcore.networks import step_network
from rlcore.policy import policy_step
from rlcore.seeding import EvaluateRoots, per_env_keys
from rlcore.types import Array, CoreState, EpisodeSummary
from runtime.commands.stats import EpisodeResults

CHUNK = 128  # env steps per jitted call of the evaluate command


@struct.dataclass
class FirstEpisodes:
    """A batch of envs playing their first episodes (leaves ``[N]`` unless noted).

    Attributes:
      state: JaxEnvState ``[N, ...]``.
      obs: ``[N, *obs_shape]`` the obs the next action is taken on.
      t: ``[]`` int32 steps taken.
      finished: bool, the env's first episode ended.
      ret: float32 return of the first episode (where finished).
      length: int32 length of the first episode (where finished).
      core: a recurrent agent's CoreState ``[N, H]`` before the next action; None for a
        feed-forward one.
      first: a recurrent agent's ``[N]`` bool, ``obs`` starts an episode; None otherwise.
    """

    state: JaxEnvState
    obs: Array
    t: Array
    finished: Array
    ret: Array
    length: Array
    core: CoreState | None = None
    first: Array | None = None


def start_first_episodes(env: JaxEnv, reset_keys: jax.Array,
                         core: CoreState | None = None) -> FirstEpisodes:
    """Resets ``N`` envs with ``reset_keys [N]``; nothing finished yet. ``core``: a
    recurrent agent's initial state ``[N, H]`` (None: feed-forward)."""
    state, ts = jax.vmap(env.reset)(reset_keys)
    n = reset_keys.shape[0]
    return FirstEpisodes(state=state, obs=ts.obs, t=jnp.int32(0), finished=jnp.zeros(n, bool),
                         ret=jnp.zeros(n, jnp.float32), length=jnp.zeros(n, jnp.int32),
                         core=core, first=None if core is None else jnp.ones(n, bool))


def step_first_episodes(env: JaxEnv, c: FirstEpisodes, action: jax.Array,
                        env_keys: jax.Array, core: CoreState | None = None) -> FirstEpisodes:
    """One step of every env (auto-reset) with ``action [N]`` and ``env_keys [N]``; an env
    whose first episode ends here records its return and length. ``core``: the recurrent
    agent's state after choosing ``action`` (None: feed-forward)."""
    return step_first_episodes_ts(env, c, action, env_keys, core)[0]


def step_first_episodes_ts(env: JaxEnv, c: FirstEpisodes, action: jax.Array,
                           env_keys: jax.Array, core: CoreState | None = None
                           ) -> tuple[FirstEpisodes, TimeStep]:
    """``step_first_episodes`` and the step's ``TimeStep [N]`` (its ``final_obs``: the
    observation an episode ended on, before the auto-reset)."""
    state, ts = step_batch(env, c.state, action, env_keys)
    done = ts.terminated | ts.truncated
    ended = done & ~c.finished
    return FirstEpisodes(
        state=state, obs=ts.obs, t=c.t + 1, finished=c.finished | ended,
        ret=jnp.where(ended, state.stats.completed_return, c.ret),
        length=jnp.where(ended, state.stats.completed_length, c.length),
        core=core, first=None if core is None else done), ts


def no_core(n: int) -> None:
    """The initial core state of a feed-forward agent's ``n`` envs: none."""
    del n


# ----------------------------------------------------------------------------- in training


def varying(tree, axis_name: str):
    """``tree`` with every leaf typed as varying over ``axis_name`` (inside shard_map)."""
    def cast(x):
        if axis_name in jax.typeof(x).manual_axis_type.varying:
            return x
        return jax.lax.pcast(x, axis_name, to="varying")

    return jax.tree.map(cast, tree)


def make_train_eval_fn(env: JaxEnv, apply_fn: Callable, max_steps: int,
                       axis_name: str | None = None, initial_core: Callable = no_core):
    """Builds ``evaluate(params, root, env_ids, update) -> EpisodeSummary``: greedy
    (the distribution's mode) episodes, the first one of each env ``env_ids [B]``.

    The envs are reset from ``per_env_keys(root, env_ids, update)`` folded with 0, and step
    ``t`` draws with that key folded with ``t + 1`` (``root``: ``Roots.train_eval``, a stream
    that training never uses). The loop ends when every env finished an episode, or after
    ``max_steps`` steps (unfinished envs do not count). Returns this device's sums. Under
    ``shard_map`` pass the mesh ``axis_name`` the envs are spread over.
    """
    fold = jax.vmap(jax.random.fold_in, in_axes=(0, None))

    def evaluate(params, root, env_ids, update) -> EpisodeSummary:
        keys = per_env_keys(root, env_ids, update)
        init = start_first_episodes(env, fold(keys, 0), initial_core(keys.shape[0]))
        if axis_name is not None:  # the loop's carry must vary over the axis as its outputs do
            init = init.replace(t=None)
            init = varying(init, axis_name).replace(t=jnp.int32(0))

        def running(c: FirstEpisodes):
            return (c.t < max_steps) & ~jnp.all(c.finished)

        def step(c: FirstEpisodes) -> FirstEpisodes:
            dist, _, core = step_network(apply_fn, params, c.obs, c.core, c.first)
            return step_first_episodes(env, c, dist.mode(), fold(keys, c.t + 1),
                                       core)

        c = jax.lax.while_loop(running, step, init)
        return EpisodeSummary(
            return_sum=jnp.sum(jnp.where(c.finished, c.ret, 0.0)),
            length_sum=jnp.sum(jnp.where(c.finished, c.length.astype(jnp.float32), 0.0)),
            count=jnp.sum(c.finished.astype(jnp.int32)))

    return evaluate


# ----------------------------------------------------------------------------- evaluate command


def make_play_chunk(env: JaxEnv, apply_fn: Callable, greedy: bool, chunk: int = CHUNK,
                    frame_of: Callable | None = None):
    """Builds jitted ``play(params, roots, carry) -> (carry, (seen0 [chunk, ...], return0
    [chunk], final0 [chunk, ...]))``: ``chunk`` steps of every env with the
    ``EvaluateRoots`` keys, what env 0 acted on at each step (its observation, or
    ``frame_of(its JaxEnvState)``), its first episode's return after it and the observation
    the step reached before any auto-reset (``TimeStep.final_obs``: the episode's last at its
    final step)."""

    def one_step(params, roots: EvaluateRoots, c: FirstEpisodes, _):
        ids = jnp.arange(c.finished.shape[0], dtype=jnp.int32)
        action, core = policy_step(apply_fn, params, c.obs, c.core, c.first, roots.action, c.t,
                                   greedy)
        nxt, ts = step_first_episodes_ts(env, c, action, per_env_keys(roots.env, ids, c.t),
                                         core)
        return0 = jnp.where(nxt.finished[0], nxt.ret[0], nxt.state.stats.running_return[0])
        seen0 = (c.obs[0] if frame_of is None
                 else frame_of(jax.tree.map(lambda x: x[0], c.state)))
        final0 = jnp.asarray(ts.final_obs[0], c.obs.dtype)
        return nxt, (seen0, return0, final0)

    def play(params, roots, carry: FirstEpisodes):
        return jax.lax.scan(lambda c, x: one_step(params, roots, c, x), carry, length=chunk)

    return jax.jit(play)


def play_episodes(env: JaxEnv, apply_fn: Callable, params, roots: EvaluateRoots,
                  num_episodes: int, greedy: bool,
                  initial_core: Callable = no_core, frame_of: Callable | None = None
                  ) -> tuple[EpisodeResults, np.ndarray, np.ndarray]:
    """The first episode of each of ``num_episodes`` envs (the evaluate command).

    Args:
      env: a JaxEnv (one env; vmapped here).
      apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
      params: network parameters (one agent).
      roots: EvaluateRoots of the agent's seed.
      num_episodes: N.
      greedy: the mode's actions instead of samples.
      initial_core: ``n -> `` a recurrent agent's start state of ``n`` envs.
      frame_of: ``JaxEnvState of one env -> pytree`` kept for env 0 instead of its
        observation (what a renderer draws, e.g. ``BraxEnv.frame_state``); None: the obs.

    Returns:
      ``(EpisodeResults [N], obs0 [L + 1, *obs_shape], return0 [L])``: env 0's observations
      of its first episode, one per action (L = its length), then the one it ended on
      (docs/design.md, "Evaluation": a video shows the episode's last frame); with
      ``frame_of``, its pytrees, leaves ``[L, ...]`` (a state's renderer: the state the
      episode ended in is gone with the auto-reset); and its return after each action.
    """
    play = make_play_chunk(env, apply_fn, greedy, frame_of=frame_of)
    ids = jnp.arange(num_episodes, dtype=jnp.int32)
    carry = start_first_episodes(env, per_env_keys(roots.reset, ids), initial_core(num_episodes))
    obs0, return0, final0 = [], [], []
    while True:
        carry, (chunk_seen, chunk_ret, chunk_final) = play(params, roots, carry)
        obs0.append(jax.tree.map(np.asarray, chunk_seen))
        return0.append(np.asarray(chunk_ret, np.float64))
        final0.append(np.asarray(chunk_final))
        if bool(jnp.all(carry.finished)):
            break
    results = EpisodeResults(returns=np.asarray(carry.ret, np.float64),
                             lengths=np.asarray(carry.length, np.int64))
    length = int(results.lengths[0])
    seen0 = jax.tree.map(lambda *xs: np.concatenate(xs)[:length], *obs0)
    if frame_of is None:
        seen0 = np.concatenate([seen0, np.concatenate(final0)[length - 1:length]])
    return results, seen0, np.concatenate(return0)[:length]
