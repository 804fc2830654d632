"""Env steps per second of a jittable env alone: ``python -m benchmarks.env_steps
--env_id=craftax:Craftax-Classic-Symbolic-v1 [--num_envs=64] [--steps=100] [--repeats=3]
[--lazy_reset_chunk=K]``.

A batch of ``num_envs`` envs (``envs.registry.make_jax_env``) stepped ``steps`` times with
uniformly random actions in one jitted ``lax.scan``, through the batch step the trainers use
(``envs.base.step_batch``: the same-step auto-reset included, lazy where the env's
``lazy_reset_chunk`` is set; ``--lazy_reset_chunk`` overrides it, 0 for eager); prints the
compile seconds and, for each of ``repeats`` timed calls after it, the env steps per second.
The figure of a suite's row in docs/results.md.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from benchmarks.common import env_ids_known, flag_checks
from envs import registry
from envs.base import step_batch
from rlcore.types import EnvSpec
from runtime.config.fields import POSITIVE, Ints
from runtime.process.arguments import OneLineParser, doc_summary

# The flags' rules, checked before any work (docs/design.md, "Exit codes").
CHECK = flag_checks({"num_envs": POSITIVE, "steps": POSITIVE, "repeats": POSITIVE,
                     "lazy_reset_chunk": Ints(-1, "an integer >= -1")},
                    env_ids_known("env_id", registry.ANAKIN))


def random_actions(key: jax.Array, spec: EnvSpec, shape: tuple[int, ...]) -> jax.Array:
    """Uniform actions ``[*shape, *action_shape]``: indices, or boxes within the bounds."""
    if not spec.action_shape:
        return jax.random.randint(key, shape, 0, spec.num_actions)
    low, high = jnp.asarray(spec.action_low), jnp.asarray(spec.action_high)
    return jax.random.uniform(key, (*shape, spec.num_actions), minval=low, maxval=high)


def make_run(env, num_envs: int, steps: int):
    """Jitted ``run(state, key) -> (state, reward sum)``: ``steps`` random steps of the
    batch."""
    def run(state, key):
        def one(state, k):
            k_act, k_env = jax.random.split(k)
            action = random_actions(k_act, env.spec, (num_envs,))
            state, ts = step_batch(env, state, action, jax.random.split(k_env, num_envs))
            return state, jnp.sum(ts.reward)

        state, rewards = jax.lax.scan(one, state, jax.random.split(key, steps))
        return state, jnp.sum(rewards)

    return jax.jit(run)


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags, checked (``CHECK``) before any work."""
    parser = OneLineParser(prog="python -m benchmarks.env_steps",
                           description=doc_summary(__doc__), check=CHECK)
    parser.add_argument("--env_id", required=True, help="an Anakin env id")
    parser.add_argument("--num_envs", type=int, default=64, help="envs of the batch")
    parser.add_argument("--steps", type=int, default=100, help="env steps per call")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls")
    parser.add_argument("--lazy_reset_chunk", type=int, default=-1,
                        help="episodes drawn per pass of the lazy reset; 0 eager; -1 the env's")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    env = registry.make_jax_env(args.env_id)
    if args.lazy_reset_chunk >= 0:
        env.lazy_reset_chunk = args.lazy_reset_chunk
    state, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), args.num_envs))
    run = make_run(env, args.num_envs, args.steps)
    t = time.perf_counter()
    compiled = run.lower(state, jax.random.key(1)).compile()
    print(f"{args.env_id}: {args.num_envs} envs, compile {time.perf_counter() - t:.1f} s")
    for r in range(args.repeats):
        t = time.perf_counter()
        state, total = jax.block_until_ready(compiled(state, jax.random.key(2 + r)))
        sps = args.num_envs * args.steps / (time.perf_counter() - t)
        print(f"  call {r + 1}: {sps:,.0f} env steps/s")


if __name__ == "__main__":
    main()
