"""Sebulba learner: assembles the actors' rollout pieces into one global batch sharded over
the learner mesh and runs the shared rlcore update on it, data-parallel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rlcore.hparams import HParams
from rlcore.learner import make_update_fn_for
from rlcore.losses import LossMetrics
from rlcore.types import EpisodeSummary, LearnerState, Trajectory
from runtime import distributed
from sebulba.actor import RolloutItem
from sebulba.layout import Layout

AXIS = distributed.DATA_AXIS


def traj_spec(core_state=None, final_value: bool = False,
              discounted_return: bool = False) -> Trajectory:
    """The env axis over the learner mesh; the actors do not ship behaviour values;
    ``core_state``: a recurrent agent's CoreState (any leaves), None for feed-forward;
    ``final_value``, ``discounted_return``: the rollouts carry that Trajectory field."""
    return Trajectory.env_partition(AXIS, with_value=False, core_state=core_state,
                                    final_value=final_value,
                                    discounted_return=discounted_return)


TRAJ_SPEC = traj_spec()  # a feed-forward agent's


@struct.dataclass
class LearnerOutput:
    """What one learner step reports (replicated scalars).

    Attributes:
      loss: LossMetrics averaged over the update's gradient steps and devices.
      episodes: the episodes that ended in the update's rollouts, over every process.
    """

    loss: LossMetrics
    episodes: EpisodeSummary


def assemble(items: list[RolloutItem], layout: Layout) -> Trajectory:
    """One global Trajectory ``[T, num_envs, ...]`` sharded over the learner mesh.

    Each local learner shard's envs come from the pieces the actor threads placed on its
    device, ordered by global env index, so the batch does not depend on how envs are
    spread over threads and actor devices.
    """
    per_shard = []
    for s, _device, _lo, _hi in layout.local_shards():
        pieces = sorted((p for it in items for p in it.pieces if p.shard == s),
                        key=lambda p: p.first_env)
        per_shard.append(Trajectory.concat_envs([p.trajectory for p in pieces]))
    first = per_shard[0]
    spec = traj_spec(first.core_state, first.final_value is not None,
                     first.discounted_return is not None)
    return jax.tree.map(lambda spec, *shards: _global_array(layout, spec, shards),
                        spec, *per_shard, is_leaf=lambda x: isinstance(x, P))


def _global_array(layout: Layout, spec: P, shards) -> jax.Array:
    env_axis = list(spec).index(AXIS)
    shape = list(shards[0].shape)
    shape[env_axis] = layout.num_envs
    return jax.make_array_from_single_device_arrays(
        tuple(shape), NamedSharding(layout.learner_mesh, spec), list(shards))


def episode_array(items: list[RolloutItem], layout: Layout,
                  info_names: tuple[str, ...] = ()) -> jax.Array:
    """This process's episode sums as a float32 ``[num_shards, 3 + K]`` array sharded over
    the mesh (``EpisodeSummary.as_list(info_names)``: return, length and count sums, then
    the sums of the env's K per-episode values; on the first local shard, zeros on the
    others)."""
    width = 3 + len(info_names)
    total = np.sum([it.episodes.as_list(info_names) for it in items], axis=0,
                   dtype=np.float32).reshape(1, width)
    arrays = [jax.device_put(total if i == 0 else np.zeros_like(total), d)
              for i, (_s, d, _lo, _hi) in enumerate(layout.local_shards())]
    n = layout.learner_mesh.devices.size
    return jax.make_array_from_single_device_arrays(
        (n, width), NamedSharding(layout.learner_mesh, P(AXIS)), arrays)


def make_learner_step(hp: HParams, apply_fn, optimizer_of, layout: Layout, roots,
                      core_state=None, final_value: bool = False,
                      discounted_return: bool = False, observe=None,
                      info_names: tuple[str, ...] = (), state_spec=None):
    """Jitted ``(state, trajectory, episodes, update, num_updates) -> (state,
    LearnerOutput)`` over the learner mesh (params replicated, env axis sharded), with the
    algorithm, epochs and minibatches of ``hp`` and the optimizer ``optimizer_of(num_updates)``
    (``rlcore.optim.optimizer_for`` of the run: the run's length is an argument, traced, so
    a longer run or an extension compiles nothing new; docs/design.md, "Compile time");
    ``core_state``: a recurrent agent's CoreState (any leaves, for
    the trajectory's structure), None for feed-forward; ``final_value``,
    ``discounted_return``: the rollouts carry that Trajectory field; ``observe``: the
    normalisation statistics' update (``rlcore.normalize.observer``), or None;
    ``info_names``: the env's ``EnvSpec.episode_info`` (``episode_array``'s columns);
    ``state_spec``: the learner state's PartitionSpecs (``rlcore.types.state_partition``;
    None: replicated).

    The input state is not donated: the trainer keeps the last completed update's state
    alive while the next update runs, to checkpoint it if a signal abandons that update
    (one more copy of params and optimizer state on each learner device).
    """
    def device_step(state: LearnerState, traj: Trajectory, episodes, update, num_updates):
        update_fn = make_update_fn_for(hp, apply_fn, optimizer_of(num_updates), AXIS, observe)
        state, loss = update_fn(state, traj, jax.random.fold_in(roots.update, update))
        sums = jax.lax.psum(jnp.sum(episodes, axis=0), AXIS)
        return state, LearnerOutput(loss=loss,
                                    episodes=EpisodeSummary.from_list(sums, info_names))

    state_spec = P() if state_spec is None else state_spec
    step = jax.shard_map(device_step, mesh=layout.learner_mesh,
                         in_specs=(state_spec,
                                   traj_spec(core_state, final_value, discounted_return),
                                   P(AXIS), P(), P()),
                         out_specs=(state_spec, P()))
    return jax.jit(step)
