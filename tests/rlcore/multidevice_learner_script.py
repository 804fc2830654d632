"""Runs ``make_update_fn`` on one device and sharded over 4 host devices; saves both results.

Started by ``test_learner.py`` in a subprocess whose environment has
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (XLA reads it once, at start-up, so
the test process itself cannot switch). Usage: ``python multidevice_learner_script.py OUT.npz
[feed_forward|recurrent]``.

Saved arrays, for ``algo`` in ``ppo``, ``ppo_sequences``, ``impala``, ``ppo_gaussian``,
``impala_gaussian``, ``ppo_decoupled`` (the staleness correction ``decoupled`` on stale
behaviour logits: ``one``, ``one_micro``, ``four``, ``four_micro``), ``ppo_lstm`` and
``impala_gru`` (``*_gaussian``: a diagonal Gaussian
policy over 3-dimensional box actions, only ``one`` and ``four`` / ``four_novma``; the last
two: a recurrent core after the torso, trajectories with a random start state and random
episode starts; only ``one``, ``four`` and for the LSTM ``four_micro``):
  ``{algo}/{run}/params/{path}`` and ``{algo}/{run}/metrics/{key}/{u}`` (``key`` as in
  metrics.jsonl: ``loss/<name>``, ``stale/<name>``) with ``run`` ``one``
  (no axis_name, jitted), ``four`` (``jax.shard_map`` over mesh axis ``data``, default
  ``check_vma=True``, as anakin/ and sebulba/ call it; PPO only), ``four_novma``
  (``check_vma=False``), ``one_micro`` and ``four_micro`` (each minibatch's gradient
  accumulated over 2 micro-batches, one device and four with ``check_vma=True``);
and minibatch memberships ``mb/{n}dev`` ``[E * M, b]`` of global env indices, n = 1, 2, 4.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from rlcore import learner, optim
from rlcore.algorithms import PPO, Impala
from rlcore.algorithms.base import SAMPLES, SEQUENCES
from rlcore.distributions import Categorical, DiagGaussian
from rlcore.networks import MLPActorCritic, RecurrentActorCritic, unroll_network
from rlcore.types import CoreState, LearnerState, Trajectory

T, B, OBS, A = 5, 16, 3, 3
H = 8  # recurrent core units
NUM_UPDATES = 3
AXIS = "data"


def make_trajectory(net, params, seed):
    """Random but fixed rollout with terminations and truncations; behaviour logits close to
    the network's so that PPO's ratios are not all clipped. For a recurrent ``net``: a random
    start state (LSTM: ``c`` and ``h``; GRU: ``h``) and episode starts consistent with the
    ends (``first[t] = done[t - 1]``, random at ``t = 0``)."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(T, B, OBS)).astype(np.float32)
    terminated = rng.random((T, B)) < 0.15
    truncated = rng.random((T, B)) < 0.1
    core, first = None, None
    if isinstance(net, RecurrentActorCritic):
        c = jnp.asarray(rng.normal(size=(B, H)), jnp.float32) if net.cell == "lstm" else None
        core = CoreState(h=jnp.tanh(jnp.asarray(rng.normal(size=(B, H)), jnp.float32)), c=c)
        first = jnp.asarray(np.concatenate([rng.random((1, B)) < 0.3,
                                            (terminated | truncated)[:-1]]))
    dist, value = unroll_network(net.apply, params, jnp.asarray(obs), core, first)
    behaviour = dist.params()
    behaviour = behaviour + 0.3 * jnp.asarray(rng.normal(size=behaviour.shape), jnp.float32)
    if isinstance(dist, DiagGaussian):  # box actions sampled from the behaviour policy
        mu = DiagGaussian.from_params(behaviour)
        action = mu.mean + jnp.exp(mu.log_std) * jnp.asarray(rng.normal(size=(T, B, A)),
                                                             jnp.float32)
    else:
        action = jnp.asarray(rng.integers(0, A, size=(T, B)), jnp.int32)
    return Trajectory(
        obs=jnp.asarray(obs),
        action=action,
        reward=jnp.asarray(rng.normal(size=(T, B)), jnp.float32),
        terminated=jnp.asarray(terminated),
        truncated=jnp.asarray(truncated),
        behaviour_dist_params=behaviour,
        behaviour_value=None,  # recomputed by PPO (params change between updates)
        bootstrap_obs=jnp.asarray(rng.normal(size=(B, OBS)), jnp.float32),
        core_state=core,
        first=first,
    )


OPTIMIZER_CONSTANTS = dict(anneal_lr=True, adam_eps=1e-5, rmsprop_decay=0.99, rmsprop_eps=0.01)


def agent(algorithm):
    """``(net, params, optimizer, hparams, update kwargs, cell)`` of ``algorithm`` (see
    ``run``)."""
    cell = algorithm.split("_")[-1]
    if cell in ("lstm", "gru"):
        net = RecurrentActorCritic(torso=MLPActorCritic(num_actions=A, hidden=(8,), heads=False),
                                   num_actions=A, cell=cell, hidden_size=H)
        params = net.init(jax.random.key(0), jnp.zeros((1, 1, OBS)), net.initial_core(1),
                          jnp.ones((1, 1), bool))
    else:
        dist = DiagGaussian if cell == "gaussian" else Categorical
        net = MLPActorCritic(num_actions=A, hidden=(8,), distribution=dist)
        params = net.init(jax.random.key(0), jnp.zeros((1, OBS)))
    if algorithm.startswith("ppo"):
        opt = optim.make_optimizer("adam", 3e-3, max_grad_norm=0.5,
                                   num_updates=50, steps_per_update=2,
                                   **OPTIMIZER_CONSTANTS)
        hp = PPO(gamma=0.99, gae_lambda=0.95, clip_eps=0.2, clip_vloss=True, norm_adv=True,
                 vf_coef=0.5, ent_coef=0.01, clip_rho=1.0,
                 staleness_correction="decoupled" if algorithm == "ppo_decoupled" else "none",
                 decoupled_max_weight=1.0, filter_threshold=0.2)
        kind = SAMPLES if algorithm in ("ppo", "ppo_decoupled") else SEQUENCES
        kw = dict(num_epochs=2, num_minibatches=2, minibatch=kind)
    else:
        opt = optim.make_optimizer("rmsprop", 3e-3, max_grad_norm=0.5,
                                   num_updates=50, steps_per_update=2,
                                   **OPTIMIZER_CONSTANTS)
        hp = Impala(gamma=0.99, vf_coef=0.5, ent_coef=0.01, vtrace_lambda=0.9, clip_rho=1.0,
                    clip_pg_rho=1.0)
        kw = dict(num_epochs=1, num_minibatches=2)
    return net, params, opt, hp, kw, cell


def four_device_variants(algorithm, cell):
    """``(name, check_vma, microbatches)`` of the four-device runs of ``algorithm``.

    The default check_vma=True only for PPO: both algorithms share the gradient step.
    Micro-batched (2 chunks of each device's share) under check_vma=True for every one.
    Recurrent: fewer compiles (the script's time): both cells on four devices, the LSTM
    also micro-batched there."""
    if cell == "gru":
        return (("four", True, 1),)
    if cell == "lstm":
        return (("four", True, 1), ("four_micro", True, 2))
    if algorithm == "ppo_decoupled":  # the proximal pass per device, the weights' chunks
        return (("four", True, 1), ("four_micro", True, 2))
    if cell == "gaussian":  # the family changes the loss's log-probs only: one run each
        return (("four", True, 1),) if algorithm.startswith("ppo") else (
            ("four_novma", False, 1),)
    if algorithm.startswith("ppo"):
        return (("four", True, 1), ("four_novma", False, 1), ("four_micro", True, 2))
    return (("four_novma", False, 1), ("four_micro", True, 2))


def run(algorithm, mesh):
    """``algorithm``: ``ppo`` (minibatches of samples, its own kind), ``ppo_sequences`` (of
    whole sequences) or ``impala`` (sequences); ``ppo_lstm``, ``impala_gru``: recurrent
    (sequences)."""
    net, params, opt, hp, kw, cell = agent(algorithm)
    runs = {"one": jax.jit(learner.make_update_fn(hp, net.apply, opt, **kw))}
    if cell not in ("lstm", "gru", "gaussian"):
        runs["one_micro"] = jax.jit(learner.make_update_fn(hp, net.apply, opt, microbatches=2,
                                                           **kw))
    core = net.initial_core(1) if cell in ("lstm", "gru") else None
    spec = Trajectory.env_partition(AXIS, core_state=core)
    for run_name, check_vma, micro in four_device_variants(algorithm, cell):
        runs[run_name] = jax.jit(
            jax.shard_map(
                learner.make_update_fn(hp, net.apply, opt, axis_name=AXIS, microbatches=micro,
                                       **kw),
                mesh=mesh,
                in_specs=(P(), spec, P()),
                out_specs=(P(), P()),
                check_vma=check_vma,
            )
        )
    out = {}
    for run_name, update in runs.items():
        out.update(results(algorithm, run_name, update, net, params, opt))
    return out


def results(algorithm, run_name, update, net, params, opt):
    """Metrics of every update and the final params of ``NUM_UPDATES`` updates by
    ``update``, keyed ``<algorithm>/<run_name>/...``."""
    out = {}
    state = LearnerState(params=params, opt_state=opt.init(params),
                         update=jnp.zeros((), jnp.int32))
    for u in range(NUM_UPDATES):
        traj = make_trajectory(net, params, seed=100 + u)
        state, metrics = update(state, traj, jax.random.fold_in(jax.random.key(7), u))
        for name, value in metrics.scalars().items():  # loss/<name>, stale/<name>
            out[f"{algorithm}/{run_name}/metrics/{name}/{u}"] = np.asarray(value)
    assert int(state.update) == NUM_UPDATES
    for path, leaf in jax.tree_util.tree_leaves_with_path(state.params):
        out[f"{algorithm}/{run_name}/params/{jax.tree_util.keystr(path)}"] = np.asarray(leaf)
    return out


def minibatch_memberships(num_devices, num_envs=16, num_minibatches=2, num_epochs=3):
    """Global env indices of every minibatch, ``[E * M, num_envs // M]``."""
    key = jax.random.key(3)
    if num_devices == 1:
        return np.asarray(learner.minibatch_indices(key, num_envs, num_minibatches, num_epochs))
    mesh = Mesh(np.array(jax.devices()[:num_devices]), (AXIS,))
    local = num_envs // num_devices

    def f(k):
        idx = learner.minibatch_indices(k, local, num_minibatches, num_epochs, AXIS)
        return idx + jax.lax.axis_index(AXIS) * local  # local -> global env index

    g = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P(), out_specs=P(None, AXIS)))
    return np.asarray(g(key))


def sample_memberships(num_devices, num_steps=T, num_envs=16, num_minibatches=2,
                       num_epochs=3):
    """Global sample ids (``step * num_envs + global env``) of every minibatch,
    ``[E * M, T * num_envs // M]``."""
    key = jax.random.key(3)
    local = num_envs // num_devices

    def f(k):
        steps, envs = learner.sample_minibatch_indices(
            k, num_steps, local, num_minibatches, num_epochs,
            AXIS if num_devices > 1 else None)
        first = jax.lax.axis_index(AXIS) * local if num_devices > 1 else 0
        return (steps * num_envs + envs + first).reshape((steps.shape[0], -1))

    if num_devices == 1:
        return np.asarray(f(key))
    mesh = Mesh(np.array(jax.devices()[:num_devices]), (AXIS,))
    g = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P(), out_specs=P(None, AXIS)))
    return np.asarray(g(key))


FEED_FORWARD = ("ppo", "ppo_sequences", "impala", "ppo_gaussian", "impala_gaussian",
                "ppo_decoupled")
RECURRENT = ("ppo_lstm", "impala_gru")


def main(path, which="feed_forward"):
    """``which``: ``feed_forward`` (those algorithms and the memberships) or ``recurrent``."""
    assert jax.device_count() == 4, jax.devices()
    mesh = Mesh(np.array(jax.devices()), (AXIS,))
    out = {}
    for algorithm in FEED_FORWARD if which == "feed_forward" else RECURRENT:
        out.update(run(algorithm, mesh))
    if which == "feed_forward":
        for n in (1, 2, 4):
            out[f"mb/{n}dev"] = minibatch_memberships(n)
            out[f"samples/{n}dev"] = sample_memberships(n)
    np.savez(path, **out)


if __name__ == "__main__":
    main(*sys.argv[1:])
