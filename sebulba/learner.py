"""Sebulba learner: assembles the actors' rollout pieces into one global batch sharded over
the learner mesh and runs the shared rlcore update on it, data-parallel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rlcore import distributed
from rlcore.learner import make_update_fn
from rlcore.losses import LossMetrics
from rlcore.types import LearnerState, Trajectory
from sebulba.actor import RolloutItem
from sebulba.pipeline import Layout

AXIS = distributed.DATA_AXIS
# Trajectory leaves are [T, B, ...] sharded on B; bootstrap_obs is [B, ...].
TRAJ_SPEC = Trajectory(obs=P(None, AXIS), action=P(None, AXIS), reward=P(None, AXIS),
                       terminated=P(None, AXIS), truncated=P(None, AXIS),
                       behaviour_logits=P(None, AXIS), behaviour_value=P(None, AXIS),
                       bootstrap_obs=P(AXIS))


@struct.dataclass
class LearnerOutput:
    """What one learner step reports (replicated scalars).

    Attributes:
      loss: LossMetrics averaged over the update's gradient steps and devices.
      episodes: ``[3]`` (return sum, length sum, count) over every process's actors.
    """

    loss: LossMetrics
    episodes: jax.Array


def assemble(items: list[RolloutItem], layout: Layout) -> Trajectory:
    """One global Trajectory ``[T, num_envs, ...]`` sharded over the learner mesh.

    Each local learner shard's envs come from the pieces the actor threads placed on its
    device, ordered by global env index, so the batch does not depend on how envs are
    spread over threads and actor devices.
    """
    per_shard = []
    for s, _device, _lo, _hi in layout.local_shards():
        pieces = sorted(((it.offsets[s], it.pieces[s]) for it in items if s in it.pieces),
                        key=lambda p: p[0])
        trajs = [p[1] for p in pieces]
        per_shard.append(trajs[0] if len(trajs) == 1 else _concat_envs(trajs))
    return jax.tree.map(
        lambda spec, *shards: _global_array(layout, spec, shards),
        TRAJ_SPEC, *per_shard, is_leaf=lambda x: isinstance(x, P))


def _concat_envs(trajs: list[Trajectory]) -> Trajectory:
    """Concatenates Trajectories along the env axis (on their common device)."""
    body = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1),
                        *[t.replace(bootstrap_obs=None) for t in trajs])
    return body.replace(bootstrap_obs=jnp.concatenate([t.bootstrap_obs for t in trajs], 0))


def _global_array(layout: Layout, spec: P, shards) -> jax.Array:
    env_axis = list(spec).index(AXIS)
    shape = list(shards[0].shape)
    shape[env_axis] = layout.num_envs
    return jax.make_array_from_single_device_arrays(
        tuple(shape), NamedSharding(layout.learner_mesh, spec), list(shards))


def episode_array(items: list[RolloutItem], layout: Layout) -> jax.Array:
    """This process's episode sums as a ``[num_shards, 3]`` array sharded over the mesh
    (the sums on the first local shard, zeros on the others)."""
    total = np.sum([it.episodes for it in items], axis=0, dtype=np.float32).reshape(1, 3)
    arrays = [jax.device_put(total if i == 0 else np.zeros_like(total), d)
              for i, (_s, d, _lo, _hi) in enumerate(layout.local_shards())]
    n = layout.learner_mesh.devices.size
    return jax.make_array_from_single_device_arrays(
        (n, 3), NamedSharding(layout.learner_mesh, P(AXIS)), arrays)


def make_learner_step(config, apply_fn, optimizer, hparams, unroll, layout: Layout, roots):
    """Jitted ``(state, trajectory, episodes, update) -> (state, LearnerOutput)`` over the
    learner mesh (params replicated, env axis sharded)."""
    update_fn = make_update_fn(
        config.algorithm, apply_fn, optimizer, num_epochs=config.num_epochs,
        num_minibatches=config.num_minibatches, axis_name=AXIS, hparams=hparams,
        unroll=unroll)

    def device_step(state: LearnerState, traj: Trajectory, episodes, update):
        state, loss = update_fn(state, traj, jax.random.fold_in(roots.update, update))
        return state, LearnerOutput(loss=loss,
                                    episodes=jax.lax.psum(jnp.sum(episodes, axis=0), AXIS))

    step = jax.shard_map(device_step, mesh=layout.learner_mesh,
                         in_specs=(P(), TRAJ_SPEC, P(AXIS), P()), out_specs=(P(), P()))
    return jax.jit(step, donate_argnums=0)
