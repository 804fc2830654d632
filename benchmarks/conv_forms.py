"""Conv forms x update unroll: the learner update of the Atari PPO config, timed.

``python -m benchmarks.conv_forms [--networks=impala_resnet,nature_cnn] [--forms=gemm,xla]
[--unrolls=0,1] [--num_envs=16] [--num_steps=32] [--repeats=3]`` compiles the one-device
Sebulba learner update (``configs/atari_ppo.py``: 4 epochs x 4 minibatches of the
``num_envs x num_steps`` rollout) for every network, conv form (``rlcore.networks.Conv``:
one GEMM over patches, or XLA's convolution) and ``update_unroll`` (0 fully unrolled, 1
rolled), and prints its compile seconds, seconds per update (median of ``repeats``) and
XLA's bytes for it (arguments + outputs + temporaries, as benchmarks/memory_check.py). On
CPU it shows whether a rolled update is as fast as the unrolled one (docs/design.md, "Memory
plan"); on GPU/TPU
which form ``Conv``'s ``auto`` should pick there.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import jax
import numpy as np

from benchmarks.common import flag_checks, format_table
from benchmarks.memory_check import ATARI_SPEC, measured_bytes
from rlcore.learner import init_learner_state, make_update_fn_for
from rlcore.networks import CONV_FORMS, IMAGE_NETWORKS, NETWORKS
from rlcore.optim import optimizer_for
from rlcore.types import Trajectory
from runtime.config.fields import NATURAL, POSITIVE, Choice, hparams_of
from runtime.process.arguments import OneLineParser, doc_summary, int_list, str_list

# The flags' rules, checked before any work (docs/design.md, "Exit codes").
CHECK = flag_checks({"networks": Choice(IMAGE_NETWORKS), "forms": Choice(CONV_FORMS),
                     "unrolls": NATURAL, "num_envs": POSITIVE, "num_steps": POSITIVE,
                     "repeats": POSITIVE})


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags, checked (``CHECK``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.conv_forms", description=doc_summary(__doc__),
                      check=CHECK)
    p.add_argument("--networks", type=str_list, default=["impala_resnet", "nature_cnn"],
                   help="comma-separated image networks")
    p.add_argument("--forms", type=str_list, default=["gemm", "xla"],
                   help=f"comma-separated, of {', '.join(CONV_FORMS)}")
    p.add_argument("--unrolls", type=int_list, default=[0, 1],
                   help="comma-separated update_unroll values")
    p.add_argument("--num_envs", type=int, default=16, help="envs of the update's batch")
    p.add_argument("--num_steps", type=int, default=32, help="rollout length")
    p.add_argument("--repeats", type=int, default=3, help="timed updates")
    return p.parse_args(argv)


def random_trajectory(t: int, b: int, seed: int = 0) -> Trajectory:
    """A ``[T, B]`` Atari-shaped trajectory of random frames and actions."""
    rng = np.random.default_rng(seed)
    obs = tuple(ATARI_SPEC.obs_shape)
    return Trajectory(
        obs=rng.integers(0, 256, (t, b) + obs, dtype=np.uint8),
        action=rng.integers(0, ATARI_SPEC.num_actions, (t, b)).astype(np.int32),
        reward=rng.standard_normal((t, b)).astype(np.float32),
        terminated=rng.random((t, b)) < 0.01, truncated=np.zeros((t, b), bool),
        behaviour_dist_params=np.zeros((t, b, ATARI_SPEC.num_actions), np.float32),
        behaviour_value=None,
        bootstrap_obs=rng.integers(0, 256, (b,) + obs, dtype=np.uint8))


def time_update(network: str, form: str, unroll: int, args) -> tuple[float, float, int]:
    """``(compile s, median s per update, XLA bytes)`` of one learner update."""
    from configs import atari_ppo

    config = atari_ppo.get_config()
    config.num_envs, config.num_steps = args.num_envs, args.num_steps
    config.update_unroll, config.microbatches = unroll, 1
    net = NETWORKS[network](num_actions=ATARI_SPEC.num_actions, conv_form=form)
    hp = hparams_of(config)
    opt = optimizer_for(hp, 1000)
    update = jax.jit(make_update_fn_for(hp, net.apply, opt))
    state = jax.jit(functools.partial(init_learner_state, net, opt, spec=ATARI_SPEC))(
        jax.random.key(0))
    traj = jax.device_put(random_trajectory(args.num_steps, args.num_envs))
    start = time.perf_counter()
    compiled = update.lower(state, traj, jax.random.key(1)).compile()
    compile_s = time.perf_counter() - start
    state, _ = jax.block_until_ready(compiled(state, traj, jax.random.key(1)))  # warm-up
    times = []
    for i in range(args.repeats):
        start = time.perf_counter()
        state, _ = jax.block_until_ready(compiled(state, traj, jax.random.key(2 + i)))
        times.append(time.perf_counter() - start)
    return compile_s, statistics.median(times), measured_bytes(compiled)


def main(argv=None):
    args = parse_args(argv)
    rows = []
    for network in args.networks:
        for form in args.forms:
            for unroll in args.unrolls:
                compile_s, step_s, nbytes = time_update(network, form, unroll, args)
                rows.append([network, form, unroll, f"{compile_s:.1f}", f"{step_s:.3f}",
                             f"{nbytes / 2**20:,.0f}"])
                print(*rows[-1], flush=True)
    print(f"{jax.default_backend()}: learner update of configs/atari_ppo.py, "
          f"{args.num_envs} envs x {args.num_steps} steps, 4 epochs x 4 minibatches")
    print(format_table(["network", "conv form", "update_unroll", "compile s", "s / update",
                        "XLA MiB"], rows))


if __name__ == "__main__":
    main()
