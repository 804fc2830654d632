"""``runtime.config.memory``'s estimate against XLA's own accounting of the compiled programs.

``python -m benchmarks.memory_check`` compiles (does not run) the Sebulba learner update of
``configs/atari_ppo.py`` with a small ``num_envs`` (``python -m benchmarks.memory_check
NUM_ENVS NUM_STEPS``; default 8 32) and the whole Anakin call of
``configs/minatar_breakout_ppo.py`` with its own sizes, on one CPU device, and prints the
estimate next to ``compiled.memory_analysis()`` (arguments + outputs + temporaries, less
the bytes outputs alias from donated arguments: what the memory check reads). With
``--shipped``: the whole call of every shipped config that Anakin runs, each with its own
sizes.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp

from anakin import train as anakin_train
from rlcore.learner import init_learner_state, make_update_fn_for
from rlcore.networks import make_network
from rlcore.optim import optimizer_for
from rlcore.types import EnvSpec, Trajectory
from runtime.config import memory
from runtime.config.env_args import env_kwargs_of
from runtime.config.fields import hparams_of
from sebulba import train as sebulba_train

# Breakout-v5 under the Atari protocol (full action space); no EnvPool probe needed.
ATARI_SPEC = EnvSpec(obs_shape=(4, 84, 84), obs_dtype="uint8", num_actions=18)


def measured_bytes(compiled) -> int:
    """Arguments + outputs + temporaries of a compiled program, less aliased outputs."""
    m = compiled.memory_analysis()
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            - m.alias_size_in_bytes)


def trajectory_shapes(spec: EnvSpec, t: int, b: int, with_value: bool) -> Trajectory:
    """ShapeDtypeStructs of a Trajectory ``[T, B]`` of ``spec``."""
    s = jax.ShapeDtypeStruct
    obs = tuple(spec.obs_shape)
    return Trajectory(
        obs=s((t, b) + obs, jnp.dtype(spec.obs_dtype)), action=s((t, b), jnp.int32),
        reward=s((t, b), jnp.float32), terminated=s((t, b), jnp.bool_),
        truncated=s((t, b), jnp.bool_), behaviour_dist_params=s((t, b, spec.num_actions),
                                                            jnp.float32),
        behaviour_value=s((t, b), jnp.float32) if with_value else None,
        bootstrap_obs=s((b,) + obs, jnp.dtype(spec.obs_dtype)))


def compile_learner_update(config, spec: EnvSpec):
    """The one-device learner update (Sebulba's: no behaviour values), compiled."""
    net = make_network(config.network, spec)
    hp = hparams_of(config)
    opt = optimizer_for(hp, 1000)
    update = make_update_fn_for(hp, net.apply, opt)
    state = jax.eval_shape(lambda k: init_learner_state(net, opt, k, spec), jax.random.key(0))
    traj = trajectory_shapes(spec, config.num_steps, config.num_envs, with_value=False)
    return jax.jit(update, donate_argnums=0).lower(state, traj, jax.random.key(1)).compile()


def compile_anakin_call(config):
    """The whole Anakin call (rollout + update, ``updates_per_call`` slots) on one device,
    compiled from the state's shapes as a run compiles it (``memory_check`` off here: the
    figure is what is measured)."""
    from anakin.train import AnakinRun
    from runtime import distributed

    config.memory_check = False
    run = AnakinRun(config, distributed.data_mesh(jax.devices()[:1]))
    run.compile(run.abstract_state())
    return run._call, run.env.spec


def shipped_anakin_configs() -> list[str]:
    """The configs/ files whose env Anakin runs (``configs/<name>.py``), sorted."""
    import importlib
    import pathlib

    names = []
    for path in sorted(pathlib.Path(__file__).resolve().parent.parent.glob("configs/*.py")):
        if path.stem in ("__init__", "base", "atari_base"):
            continue
        config = importlib.import_module(f"configs.{path.stem}").get_config()
        try:
            anakin_train.MODE.check_env_id(config.env_id, **env_kwargs_of(config))
        except Exception:  # noqa: BLE001 - a Sebulba-only env, or a suite not installed
            continue
        names.append(path.stem)
    return names


def shipped_rows(names: list[str]):
    """``(name, estimate, measured bytes, compile seconds)`` of each shipped Anakin
    config's call with its own sizes, on one device."""
    import importlib

    out = []
    for name in names:
        c = importlib.import_module(f"configs.{name}").get_config()
        c.num_devices = 1
        t0 = time.perf_counter()
        compiled, spec = compile_anakin_call(c)
        agents = anakin_train.MODE.num_agents(c)
        out.append((f"{name} (B={c.num_envs}, T={c.num_steps}, A={agents})",
                    memory.estimate(c, spec, anakin_train.MODE, 1), measured_bytes(compiled),
                    time.perf_counter() - t0))
    return out


def atari_config(num_envs: int = 8, num_steps: int = 32):
    """configs/atari_ppo.py with a small batch (1 learner device)."""
    from configs import atari_ppo

    c = atari_ppo.get_config()
    c.num_envs, c.num_steps, c.num_actor_threads = num_envs, num_steps, 1
    c.microbatches = 1  # one pass per minibatch (the config's -1 is resolved by the runtime)
    return c


def minatar_config():
    """configs/minatar_breakout_ppo.py with its own sizes, on one device."""
    from configs import minatar_breakout_ppo

    c = minatar_breakout_ppo.get_config()
    c.num_devices = 1
    return c


def rows(atari_envs: int = 8, atari_steps: int = 32):
    """``(name, estimate, measured bytes, compile seconds)`` of the programs: the Atari
    learner with a rolled gradient-step loop (``update_unroll=1``) and with the config's own
    ``update_unroll=0`` (with XLA CPU's concurrency-optimized scheduler on, every unrolled
    step keeps its buffers: ``runtime.config.memory.live_steps``), and the MinAtar Anakin call."""
    out = []
    for unroll in (1, 0):
        c = atari_config(atari_envs, atari_steps)
        c.update_unroll = unroll
        t0 = time.perf_counter()
        measured = measured_bytes(compile_learner_update(c, ATARI_SPEC))
        out.append((f"atari_ppo learner (B={c.num_envs}, T={c.num_steps}, unroll={unroll})",
                    memory.estimate(c, ATARI_SPEC, sebulba_train.MODE, 1), measured,
                    time.perf_counter() - t0))
    c = minatar_config()
    t0 = time.perf_counter()
    compiled, spec = compile_anakin_call(c)
    out.append((f"minatar_breakout_ppo anakin call (B={c.num_envs}, T={c.num_steps})",
                memory.estimate(c, spec, anakin_train.MODE, 1), measured_bytes(compiled),
                time.perf_counter() - t0))
    return out


def parse_args(argv=None):
    from runtime.process.arguments import OneLineParser, doc_summary

    p = OneLineParser(prog="python -m benchmarks.memory_check",
                      description=doc_summary(__doc__))
    p.add_argument("num_envs", nargs="?", type=int, default=8,
                   help="envs of the Atari learner update (default: %(default)s)")
    p.add_argument("num_steps", nargs="?", type=int, default=32,
                   help="rollout length of the Atari learner update (default: %(default)s)")
    p.add_argument("--shipped", action="store_true",
                   help="instead: every shipped config that Anakin runs, its whole call with "
                   "its own sizes on one device")
    return p.parse_args(argv)


def main(argv) -> None:
    from runtime.config.xla_flags import apply_xla_cpu_flags

    args = parse_args(argv[1:])
    apply_xla_cpu_flags(atari_config())  # the runs' XLA CPU flags (scheduler), before JAX starts
    atari_envs, atari_steps = args.num_envs, args.num_steps
    mib = 2**20
    print(f"{'program':58} {'estimate MiB':>12} {'measured MiB':>12} {'ratio':>6} "
          f"{'compile s':>9}")
    table = (shipped_rows(shipped_anakin_configs()) if args.shipped
             else rows(atari_envs, atari_steps))
    for name, est, measured, secs in table:
        print(f"{name:58} {est.total / mib:12.1f} {measured / mib:12.1f} "
              f"{est.total / measured:6.2f} {secs:9.1f}")
        print(f"  parts MiB: rollout obs {est.rollout_obs / mib:.1f}, trajectory "
              f"{est.trajectory / mib:.1f}, minibatch {est.minibatch / mib:.1f}, value pass "
              f"{est.value_pass / mib:.1f}, params+optim {est.params_optimizer / mib:.1f}")


if __name__ == "__main__":
    main(sys.argv)
