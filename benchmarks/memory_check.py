"""The update plan's figure (``runtime.config.plan``: XLA's for one agent's update on one
device, with the state's exact sizes) beside XLA's figure for the whole compiled program.

``python -m benchmarks.memory_check`` compiles (does not run) the update of
``configs/atari_ppo.py`` with a small ``num_envs`` (``python -m benchmarks.memory_check
NUM_ENVS NUM_STEPS``; default 8 32) rolled and fully unrolled (the plan's candidates; the
Sebulba learner runs that update), and the whole Anakin call of
``configs/minatar_breakout_ppo.py`` with its own sizes, on one CPU device, and prints the
plan's figure next to ``compiled.memory_analysis()`` of the program (arguments + outputs +
temporaries, less the bytes outputs alias from donated arguments: what the memory check
reads). With ``--shipped``: the whole call of every shipped config that Anakin runs, each
with its own sizes.
"""

from __future__ import annotations

import sys
import time

import jax

from anakin import train as anakin_train
from rlcore.types import EnvSpec
from runtime.config import plan
from runtime.config.env_args import env_kwargs_of
from sebulba import train as sebulba_train

# Breakout-v5 under the Atari protocol (full action space); no EnvPool probe needed.
ATARI_SPEC = EnvSpec(obs_shape=(4, 84, 84), obs_dtype="uint8", num_actions=18)


def measured_bytes(compiled) -> int:
    """Arguments + outputs + temporaries of a compiled program, less aliased outputs."""
    m = compiled.memory_analysis()
    return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
            - m.alias_size_in_bytes)


def plan_bytes(config, spec: EnvSpec, mode, num_shards: int = 1) -> int:
    """The plan's figure (``runtime.config.plan.plan_figure``) for ``config``'s own
    ``update_unroll`` and ``microbatches``."""
    program = plan.UpdateProgram.of(config, spec, mode, num_shards)
    resolved = plan.UpdatePlan(config.update_unroll, config.microbatches)
    return plan.plan_figure(config, program, resolved, mode).total


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
    """``(name, plan bytes, measured bytes, compile seconds)`` of each shipped Anakin
    config's call with its own sizes, on one device (its plan resolved as a run resolves
    it)."""
    import importlib

    out = []
    for name in names:
        c = importlib.import_module(f"configs.{name}").get_config()
        c.num_devices = 1
        t0 = time.perf_counter()
        compiled, spec = compile_anakin_call(c)
        agents = anakin_train.MODE.num_agents(c)
        out.append((f"{name} (B={c.num_envs}, T={c.num_steps}, A={agents})",
                    plan_bytes(resolved(c, spec), spec, anakin_train.MODE),
                    measured_bytes(compiled), time.perf_counter() - t0))
    return out


def resolved(config, spec: EnvSpec):
    """``config`` with its update plan resolved (``plan.update_plan``) on one device."""
    chosen = plan.update_plan(config, spec, anakin_train.MODE, 1)
    config.update_unroll, config.microbatches = chosen.unroll, chosen.microbatches
    return config


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
    """``(name, plan bytes, measured bytes, compile seconds)`` of the programs: the Atari
    update with a rolled gradient-step loop (``update_unroll=1``) and fully unrolled (with
    XLA CPU's concurrency-optimized scheduler on, every unrolled step keeps its buffers;
    the Atari configs turn it off), the plan's own program (so the two agree), and the
    MinAtar Anakin call."""
    out = []
    for unroll in (1, 0):
        c = atari_config(atari_envs, atari_steps)
        c.update_unroll = unroll
        t0 = time.perf_counter()
        program = plan.UpdateProgram.of(c, ATARI_SPEC, sebulba_train.MODE, 1)
        measured = plan.update_figure(program, plan.UpdatePlan(unroll, 1)).total
        out.append((f"atari_ppo update (B={c.num_envs}, T={c.num_steps}, unroll={unroll})",
                    plan_bytes(c, ATARI_SPEC, sebulba_train.MODE), measured,
                    time.perf_counter() - t0))
    c = minatar_config()
    t0 = time.perf_counter()
    compiled, spec = compile_anakin_call(c)
    out.append((f"minatar_breakout_ppo anakin call (B={c.num_envs}, T={c.num_steps})",
                plan_bytes(c, spec, anakin_train.MODE), measured_bytes(compiled),
                time.perf_counter() - t0))
    return out


def parse_args(argv=None):
    from benchmarks.common import flag_checks
    from runtime.config.fields import POSITIVE
    from runtime.process.arguments import OneLineParser, doc_summary

    p = OneLineParser(prog="python -m benchmarks.memory_check",
                      description=doc_summary(__doc__),
                      check=flag_checks({"num_envs": POSITIVE, "num_steps": POSITIVE}))
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
    print(f"{'program':58} {'plan MiB':>12} {'measured MiB':>12} {'ratio':>6} "
          f"{'compile s':>9}")
    table = (shipped_rows(shipped_anakin_configs()) if args.shipped
             else rows(atari_envs, atari_steps))
    for name, planned, measured, secs in table:
        print(f"{name:58} {planned / mib:12.1f} {measured / mib:12.1f} "
              f"{planned / measured:6.2f} {secs:9.1f}")


if __name__ == "__main__":
    main(sys.argv)
