"""Anakin throughput: raw jittable-env steps/s vs Anakin PPO training SPS, with a breakdown.

For each ``num_envs`` it measures, on the default (first) device:

(a) env steps/s of the jittable env alone: one jitted ``lax.scan`` of ``num_steps`` vmapped
    ``env.step`` calls with uniform random actions;
(b) training SPS of Anakin PPO (``configs/cartpole_ppo.py`` with that ``num_envs``, one
    device, ``num_steps`` 128, 4 minibatches, 4 epochs, 10 updates per call) over several
    calls after the first (compiling) call, whose time is reported too;
(c) per update: the rollout alone (``make_rollout_fn``, same params and envs) and the update
    alone (``make_update_fn_for`` on a trajectory of the same shape), several per jitted scan
    like the training call, and "train / (rollout + update)": the training time per update
    over the sum of the two parts timed apart. It is a ratio of durations, so never negative:
    above 1 the training step costs more than its parts (the skip ``cond``, episode sums,
    dispatch, host sync); below 1 it costs less than the parts run as separate programs
    (possible reasons, not told apart here: XLA fuses and overlaps across the
    rollout/update seam; the training call donates its state; each of the three is the
    best of a few calls timed at another moment on a possibly shared host). It replaces
    an "other ms/update" column, the training time minus the parts, which was negative
    whenever the ratio is below 1 (64 to 2048 envs on 2 CPU cores): the parts' times
    are proportions, not additive costs, and leave no "other" cost to read off.

Each row (and the first update of each config, the op profile, each agents and recurrent
row) runs in a Python process of its own that starts JAX with the XLA CPU intra-op threads a
run of its size gets (``cpu_threads`` 0, auto: one thread for an update of at most 1024 env
steps on one device, e.g. the 4-env rows; XLA's one per core above; the "XLA CPU threads"
column). "CPU s / 1k steps" is the process's CPU seconds (all threads) over the timed
training calls per 1000 env steps.

Every timing is the best of its timed calls (the host may be shared; the mean training time
is in the JSON too), after a warm-up or ahead-of-time compile.

Beside each row, the seconds to compile its training call ahead of time in a fresh process
with JAX's persistent compilation cache empty (cold) and then, in another process, with the
cache the first left (warm): what a first run and a rerun, resume or evaluation of the same
config pay (docs/performance.md, "Compile cache"). The other measurements run without
the cache, so their first call compiles.

It also times the first update of the unmodified CartPole configs (build + init + first call,
incl. compile), measured first so that little is compiled beforehand, and gives:

- an op profile of the small-batch case (``--profile_envs``, default 4): for one rollout
  step and one gradient step, each compiled on its own, the HLO instructions XLA runs
  (after fusion; parameters, constants, tuples and bitcasts not counted), of which fusions
  and dots, XLA's cost-analysis flops and bytes, and the best time per call (which includes
  a jitted call's dispatch, ~10-30 us on CPU);
- the agents table (``--num_seeds``, default 1,8,64,256 agents at ``--agents_envs`` 4 envs
  each): total env steps/s of all agents of one program and the speed-up over one agent;
- the recurrent table (``--recurrent``, default lstm,gru, at ``--recurrent_envs`` envs):
  training SPS of the agent with that core (``--recurrent_hidden`` units after the 2x64
  actor torso; minibatches of whole sequences, its only kind) against the feed-forward
  agent of the same torso and minibatch kind (sequences) at the same sizes.

Run: ``python -m benchmarks.anakin_throughput [--num_envs=4,64,512,2048] [--json_out=f.json]``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import math
import os
import re
import shutil
import tempfile
import time

import jax
import jax.numpy as jnp

from anakin.rollout import make_rollout_fn, reset_envs
from anakin.train import AnakinRun, prepare
from benchmarks.common import (
    cpu_s_per_1k,
    flag_checks,
    format_table,
    in_fresh_process,
    time_calls,
    timed,
    validate_configs,
    xla_cpu_threads,
)
from envs import registry
from envs.base import step_batch
from rlcore.algorithms import make_algorithm
from rlcore.learner import make_gradient_step, make_update_fn_for
from rlcore.networks import CORES
from runtime.config.fields import ABOVE_ZERO, NATURAL, POSITIVE, Choice
from runtime.config.xla_flags import apply_compile_cache, apply_xla_cpu_flags, cpu_threads_for
from runtime.process.arguments import OneLineParser, doc_summary, int_list, str_list

PROFILE_HEADERS = ("part", "HLO ops", "fusions", "dots", "MFLOP", "MB accessed", "us/call")
AGENT_HEADERS = ("agents", "envs/agent", "total env steps/s", "per agent", "x one agent",
                 "first call s")
RECURRENT_HEADERS = ("core", "num_envs", "feed-forward SPS", "recurrent SPS",
                     "recurrent / feed-forward", "first call s")
HEADERS = ("num_envs", "XLA CPU threads", "env steps/s (random)", "train SPS",
           "CPU s / 1k steps", "train/env ratio", "train ms/update", "rollout ms/update",
           "update ms/update", "train / (rollout + update)", "first call s",
           "compile s (cold cache)", "compile s (warm cache)")


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags, checked (``check_args``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.anakin_throughput",
                      description=doc_summary(__doc__), check=check_args)
    p.add_argument("--env_id", default="CartPole-v1", help="an Anakin env id")
    p.add_argument("--num_envs", type=int_list, default=[4, 64, 512, 2048],
                   help="comma-separated env counts")
    p.add_argument("--num_steps", type=int, default=128, help="rollout length")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed calls after warm-up (halved, rounded up, above 512 envs)")
    p.add_argument("--min_env_s", type=float, default=0.5,
                   help="time the random-env scan for at least this long")
    p.add_argument("--first_update_configs", type=str_list,
                   default=["cartpole_ppo", "cartpole_impala"],
                   help="configs/<name>.py whose time to first update is measured ('' = none)")
    p.add_argument("--profile_envs", type=int, default=4, help="env count of the op profile "
                   "(0: none)")
    p.add_argument("--num_seeds", type=int_list, default=[1, 8, 64, 256],
                   help="agents per program in the agents table ('' = none)")
    p.add_argument("--agents_envs", type=int, default=4, help="envs per agent, agents table")
    p.add_argument("--recurrent", type=str_list, default=["lstm", "gru"],
                   help="cores of the recurrent table ('' = none)")
    p.add_argument("--recurrent_envs", type=int_list, default=[64, 512],
                   help="env counts, recurrent table")
    p.add_argument("--recurrent_hidden", type=int, default=64, help="units of the core")
    p.add_argument("--json_out", default="", help="also write the results here (JSON)")
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """The flags' own rules, then each table's config checked as ``anakin.main`` checks it
    (sizes, the env id); raises ``ConfigError`` naming the flag or field."""
    from anakin.mode import MODE

    flag_checks({"num_envs": POSITIVE, "num_steps": POSITIVE, "repeats": POSITIVE,
                 "min_env_s": ABOVE_ZERO,
                 "first_update_configs": Choice(config_names()),
                 "profile_envs": NATURAL, "num_seeds": POSITIVE, "agents_envs": POSITIVE,
                 "recurrent": Choice(CORES[1:]), "recurrent_envs": POSITIVE,
                 "recurrent_hidden": POSITIVE})(args)
    sizes = {(n, 1) for n in (*args.num_envs, *args.recurrent_envs)}
    sizes |= {(args.agents_envs, a) for a in args.num_seeds}
    validate_configs([bench_config(args.env_id, n, args.num_steps, a) for n, a in sorted(sizes)],
                     MODE)


def config_names() -> tuple[str, ...]:
    """The names of the config files in ``configs/`` (``configs/<name>.py``)."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "configs")
    return tuple(sorted(f[:-3] for f in os.listdir(folder)
                        if f.endswith(".py") and not f.startswith("_")))


def bench_config(env_id: str, num_envs: int, num_steps: int, num_seeds: int = 1):
    """``configs/cartpole_ppo.py`` overridden to the benchmark sizes."""
    c = importlib.import_module("configs.cartpole_ppo").get_config()
    c.env_id = env_id
    c.num_envs = num_envs
    c.num_devices = 1
    c.num_steps = num_steps
    c.num_minibatches = 4
    c.num_epochs = 4
    c.updates_per_call = 10
    c.num_seeds = num_seeds
    c.total_env_steps = max(c.total_env_steps, 1000 * num_envs * num_steps)
    return c


def repeats_for(num_envs: int, repeats: int) -> int:
    """Fewer timed calls for the big batches, to keep the run short."""
    return repeats if num_envs <= 512 else max(1, (repeats + 1) // 2)


def breakdown_k(num_envs: int, updates_per_call: int) -> int:
    """Rollouts (updates) per call in the breakdown: as in training, but 2 for the big
    batches (their per-call overhead is negligible there, their run time is not)."""
    return updates_per_call if num_envs <= 512 else min(2, updates_per_call)


# --- (a) the env alone -------------------------------------------------------------------


def make_random_steps(env, num_envs: int, num_steps: int):
    """``(state, key) -> (state, checksum [T])``: ``num_steps`` random-action steps."""
    num_actions = env.spec.num_actions

    def one_step(key, state, t):
        k_act, k_env = jax.random.split(jax.random.fold_in(key, t))
        action = jax.random.randint(k_act, (num_envs,), 0, num_actions)
        state, ts = step_batch(env, state, action, jax.random.split(k_env, num_envs))
        # Using obs and reward keeps XLA from dropping their computation.
        return state, jnp.sum(ts.obs) + jnp.sum(ts.reward)

    def run(state, key):
        return jax.lax.scan(lambda s, t: one_step(key, s, t), state, jnp.arange(num_steps))

    return run


def random_env_sps(env_id: str, num_envs: int, num_steps: int, min_s: float) -> float:
    """Env steps/s of ``num_envs`` envs stepped with random actions: best call of enough
    calls (at least 3) to fill ``min_s`` seconds, after a warm-up call."""
    env = registry.make_jax_env(env_id)
    key = jax.random.key(1)
    state = reset_envs(env, key, jnp.arange(num_envs)).state
    fn = jax.jit(make_random_steps(env, num_envs, num_steps))
    step = lambda c: (fn(c[0], jax.random.fold_in(key, c[1]))[0], c[1] + 1)
    carry, (warm_s,) = time_calls(step, (state, 0), 1)
    _, estimate = time_calls(step, carry, 1)
    _, seconds = time_calls(step, carry, max(3, math.ceil(min_s / estimate[0])))
    return num_envs * num_steps / min(seconds)


# --- (b) training ------------------------------------------------------------------------


def train_timing(run: AnakinRun, repeats: int) -> dict:
    """First-call seconds (incl. compile) and seconds per update: best and mean of ``repeats``
    calls after the first."""
    k = run.config.updates_per_call
    step = lambda state: run.call(state, k)[0]
    state = jax.block_until_ready(run.init_state())
    state, (first_s,) = time_calls(step, state, 1)
    cpu0 = time.process_time()  # this process's CPU seconds, all threads
    _, seconds = time_calls(step, state, repeats)
    cpu_s = time.process_time() - cpu0
    return {"first_call_s": first_s, "update_s": min(seconds) / k,
            "update_mean_s": sum(seconds) / (len(seconds) * k),
            "cpu_update_s": cpu_s / (len(seconds) * k)}


# --- (c) breakdown -----------------------------------------------------------------------


def scan_k(step, k: int):
    """``many(carry, *args)``: ``k`` steps ``carry = step(carry, i, *args)`` in one scan."""

    def many(carry, *args):
        body = lambda c, i: (step(c, i, *args), None)
        return jax.lax.scan(body, carry, jnp.arange(k))[0]

    return many


def best_per_step(many, carry, args, k: int, repeats: int):
    """Best seconds per step of ``many = scan_k(..., k)`` over ``repeats`` calls, compiled
    ahead (no warm-up run); returns ``(seconds, last carry)``."""
    fn = jax.jit(many).lower(carry, *args).compile()
    carry, seconds = time_calls(lambda c: fn(c, *args), carry, repeats)
    return min(seconds) / k, carry


def rollout_timing(run: AnakinRun, k: int, repeats: int):
    """Seconds per rollout (same params, envs, roots and env ids as training, ``k`` rollouts
    per call) and the last trajectory ``[T, B]`` produced."""
    state = run.init_state()
    roots = (run.roots.action, run.roots.env)
    env_ids = jnp.arange(run.config.num_envs)

    def step(carry, u, params):
        envs, _ = carry  # the trajectory rides in the carry so XLA keeps building it
        envs, traj, _ = run.rollout(params, envs, roots, env_ids, u)
        return envs, traj

    shape = jax.eval_shape(lambda: step((state.envs, None), 0, state.learner.params))[1]
    traj0 = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape)
    seconds, (_, traj) = best_per_step(scan_k(step, k), (state.envs, traj0),
                                       (state.learner.params,), k, repeats)
    return seconds, traj


def update_timing(run: AnakinRun, traj, k: int, repeats: int) -> float:
    """Seconds per update (same optimizer, epochs, minibatches; single device, so no
    ``pmean``) on the fixed trajectory ``traj``, ``k`` updates per call."""
    update = make_update_fn_for(run.hparams, run.network.apply, run.optimizer)

    def step(learner, u, traj):
        return update(learner, traj, jax.random.fold_in(run.roots.update, u))[0]

    learner = run.init_state().learner
    seconds, _ = best_per_step(scan_k(step, k), learner, (traj,), k, repeats)
    return seconds


# --- per size and first update -----------------------------------------------------------


def bench_size(args, num_envs: int) -> dict:
    """All measurements for one ``num_envs``."""
    repeats = repeats_for(num_envs, args.repeats)
    env_sps = random_env_sps(args.env_id, num_envs, args.num_steps, args.min_env_s)
    run = AnakinRun(bench_config(args.env_id, num_envs, args.num_steps))
    train = train_timing(run, repeats)
    k = breakdown_k(num_envs, run.config.updates_per_call)
    rollout_s, traj = rollout_timing(run, k, repeats)
    update_s = update_timing(run, traj, k, repeats)
    steps = num_envs * args.num_steps
    return {
        "num_envs": num_envs, "cpu_threads": xla_cpu_threads(), "repeats": repeats,
        "breakdown_k": k, "env_sps": env_sps,
        "train_sps": steps / train["update_s"], "train_update_s": train["update_s"],
        "train_update_mean_s": train["update_mean_s"],
        "cpu_s_per_1k": cpu_s_per_1k(train["cpu_update_s"], steps),
        "first_call_s": train["first_call_s"], "rollout_s": rollout_s, "update_s": update_s,
        "train_over_parts": train_over_parts(train["update_s"], rollout_s, update_s),
    }


def call_compile_s(env_id: str, num_envs: int, num_steps: int, cache_dir: str) -> float:
    """Seconds to compile the row's training call ahead of time in this process, JAX's
    persistent compilation cache at ``cache_dir`` (as a run with ``compile_cache_dir`` set
    to it)."""
    config = bench_config(env_id, num_envs, num_steps)
    config.compile_cache_dir = cache_dir
    apply_compile_cache(config)
    run = AnakinRun(config)
    return run.compile(run.init_state())


def compile_cold_warm(args, num_envs: int) -> dict:
    """The row's call compile with an empty cache, then with the one it left, each in a
    process of its own."""
    config = bench_config(args.env_id, num_envs, args.num_steps)
    cache = tempfile.mkdtemp(prefix="anakin-throughput-jax-cache-")
    try:
        cold, warm = (as_run(config, call_compile_s, args.env_id, num_envs, args.num_steps,
                             cache) for _ in range(2))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"compile_cold_s": cold, "compile_warm_s": warm}


def train_over_parts(train_s: float, rollout_s: float, update_s: float) -> float:
    """Training seconds per update over the rollout's and the update's timed apart (>= 0;
    see (c) in the module docstring)."""
    return train_s / (rollout_s + update_s)


# --- op profile and agents -------------------------------------------------------------

OPCODE = re.compile(r"(?<![\w.\-])([a-z][a-z0-9\-]*)\(")  # after the shape: ``opcode(``
SKIPPED_OPS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def hlo_summary(compiled) -> dict:
    """Instructions of a compiled program outside fused computations (a fusion counts once,
    its inside not; ``SKIPPED_OPS`` not counted), and its cost analysis."""
    ops = fusions = dots = 0
    in_fusion = False
    for line in compiled.as_text().splitlines():
        if line.endswith("{") and not line.startswith(" "):  # a computation starts
            in_fusion = "fused" in line.split("(", 1)[0]
            continue
        if in_fusion or " = " not in line:
            continue
        found = OPCODE.search(line.split(" = ", 1)[1])
        opcode = found.group(1) if found else ""
        if found and opcode not in SKIPPED_OPS:
            ops += 1
            fusions += opcode == "fusion"
            dots += opcode == "dot"
    cost = compiled.cost_analysis() or {}
    cost = cost[0] if isinstance(cost, list) else cost
    return {"ops": ops, "fusions": fusions, "dots": dots, "flops": cost.get("flops", 0.0),
            "bytes": cost.get("bytes accessed", 0.0)}


def op_profile(args, num_envs: int) -> list[dict]:
    """HLO summary and best time per call of one rollout step and one gradient step."""
    config = bench_config(args.env_id, num_envs, args.num_steps)
    run = AnakinRun(config)
    state = run.init_state()
    roots = (run.roots.action, run.roots.env)
    env_ids = jnp.arange(num_envs)
    one_step = make_rollout_fn(run.env, run.network.apply, 1)
    rollout = make_rollout_fn(run.env, run.network.apply, config.num_steps)
    traj = jax.jit(rollout)(state.learner.params, state.envs, roots, env_ids, 0)[1]
    data = make_algorithm(run.hparams).prepare(state.learner.params, run.network.apply, traj)
    batch = data.take_envs(jnp.arange(num_envs // config.num_minibatches))
    grad_step = make_gradient_step(make_algorithm(run.hparams), run.network.apply,
                                   run.optimizer)
    parts = [
        ("rollout step", lambda p, e: one_step(p, e, roots, env_ids, 0)[0],
         (state.learner.params, state.envs)),
        (f"gradient step ({batch.advantages.size} samples)", grad_step,
         ((state.learner.params, state.learner.opt_state), batch)),
    ]
    rows = []
    for name, fn, fn_args in parts:
        compiled = jax.jit(fn).lower(*fn_args).compile()
        seconds = [timed(functools.partial(compiled, *fn_args))[1] for _ in range(200)]
        rows.append({"part": name, **hlo_summary(compiled), "call_s": min(seconds)})
    return rows


def agents_timing(args, num_seeds: int) -> dict:
    """Training steps/s of ``num_seeds`` agents of ``args.agents_envs`` envs in one program."""
    run = AnakinRun(bench_config(args.env_id, args.agents_envs, args.num_steps, num_seeds))
    train = train_timing(run, repeats_for(num_seeds * args.agents_envs, args.repeats))
    steps = num_seeds * args.agents_envs * args.num_steps
    return {"agents": num_seeds, "envs_per_agent": args.agents_envs,
            "total_sps": steps / train["update_s"], "first_call_s": train["first_call_s"]}


def recurrent_timing(args, core: str, num_envs: int) -> dict:
    """Training SPS of the ``core`` agent and of the feed-forward one (same torso, whole
    sequences as minibatches) at ``num_envs`` envs."""
    sps, first = {}, 0.0
    for name in ("none", core):
        c = bench_config(args.env_id, num_envs, args.num_steps)
        c.recurrent, c.recurrent_hidden, c.minibatch_kind = name, args.recurrent_hidden, "sequences"
        train = train_timing(AnakinRun(c), repeats_for(num_envs, args.repeats))
        sps[name] = num_envs * args.num_steps / train["update_s"]
        first = train["first_call_s"]
    return {"core": core, "num_envs": num_envs, "hidden": args.recurrent_hidden,
            "feed_forward_sps": sps["none"], "recurrent_sps": sps[core], "first_call_s": first}


def recurrent_rows(rows: list[dict]) -> list[list[str]]:
    return [[f"{r['core']} {r['hidden']}", r["num_envs"], f"{r['feed_forward_sps']:,.0f}",
             f"{r['recurrent_sps']:,.0f}", f"{r['recurrent_sps'] / r['feed_forward_sps']:.2f}",
             f"{r['first_call_s']:.1f}"] for r in rows]


def first_update_s(name: str) -> dict:
    """Build + init + first call (incl. compile) of the unmodified ``configs/<name>.py``."""
    config = importlib.import_module(f"configs.{name}").get_config()
    t0 = time.perf_counter()
    prepare(config)
    run = AnakinRun(config)
    state = run.init_state()
    _, call_s = timed(lambda: run.call(state, config.updates_per_call))
    return {"config": name, "seconds": time.perf_counter() - t0, "first_call_s": call_s,
            "updates_in_call": config.updates_per_call}


def table_rows(results: list[dict]) -> list[list[str]]:
    """One formatted row per size."""
    ms = lambda s: f"{1e3 * s:.2f}"
    return [[r["num_envs"], r["cpu_threads"], f"{r['env_sps']:,.0f}", f"{r['train_sps']:,.0f}",
             f"{r['cpu_s_per_1k']:.4f}", f"{r['train_sps'] / r['env_sps']:.3f}",
             ms(r["train_update_s"]), ms(r["rollout_s"]), ms(r["update_s"]),
             f"{r['train_over_parts']:.2f}", f"{r['first_call_s']:.1f}",
             f"{r['compile_cold_s']:.1f}", f"{r['compile_warm_s']:.1f}"] for r in results]


def profile_rows(rows: list[dict]) -> list[list[str]]:
    return [[r["part"], r["ops"], r["fusions"], r["dots"], f"{r['flops'] / 1e6:.3f}",
             f"{r['bytes'] / 1e6:.3f}", f"{1e6 * r['call_s']:.0f}"] for r in rows]


def agent_rows(rows: list[dict]) -> list[list[str]]:
    one = rows[0]["total_sps"] / rows[0]["agents"]
    return [[r["agents"], r["envs_per_agent"], f"{r['total_sps']:,.0f}",
             f"{r['total_sps'] / r['agents']:,.0f}", f"{r['total_sps'] / one:.1f}",
             f"{r['first_call_s']:.1f}"] for r in rows]


def as_run(config, fn, *args):
    """``fn(*args)`` in a process of its own whose JAX starts with the XLA CPU threads an
    Anakin run of ``config`` gets (``runtime.config.xla_flags.cpu_threads_for``; one for the 4-env
    rows, XLA's one per core for the larger ones)."""
    return in_fresh_process(cpu_threads_for(config, "anakin"), fn, *args)


def main(argv=None) -> None:
    args = parse_args(argv)
    # As ``anakin.main`` does, before JAX starts: the CPU runtime flags of the config.
    apply_xla_cpu_flags(bench_config(args.env_id, args.agents_envs, args.num_steps))
    t0 = time.perf_counter()
    names = args.first_update_configs
    first = [as_run(importlib.import_module(f"configs.{n}").get_config(), first_update_s, n)
             for n in names]
    results = []
    for n in args.num_envs:
        results.append(as_run(bench_config(args.env_id, n, args.num_steps), bench_size, args, n))
        results[-1].update(compile_cold_warm(args, n))
        print(f"num_envs={n} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    profile = (as_run(bench_config(args.env_id, args.profile_envs, args.num_steps), op_profile,
                      args, args.profile_envs) if args.profile_envs else [])
    agents = []
    for a in args.num_seeds:
        config = bench_config(args.env_id, args.agents_envs, args.num_steps, a)
        agents.append(as_run(config, agents_timing, args, a))
        print(f"agents={a} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    recurrent = []
    for core in args.recurrent:
        for n in args.recurrent_envs:
            config = bench_config(args.env_id, n, args.num_steps)
            recurrent.append(r := as_run(config, recurrent_timing, args, core, n))
            print(f"recurrent {core} num_envs={n} done: feed-forward "
                  f"{r['feed_forward_sps']:,.0f} SPS, recurrent {r['recurrent_sps']:,.0f} SPS "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{args.env_id}, num_steps={args.num_steps}, device={jax.devices()[0]}, "
          f"load average at end {load}; each row in a process of its own, its XLA CPU "
          f"threads as a run of its size gets (config cpu_threads 0, auto)")
    print(format_table(HEADERS, table_rows(results)))
    for f in first:
        print(f"time to first update, configs/{f['config']}.py: {f['seconds']:.1f} s "
              f"(first call of {f['updates_in_call']} updates: {f['first_call_s']:.1f} s)")
    if profile:
        print(f"\nop profile at {args.profile_envs} envs (one rollout step; one gradient step):")
        print(format_table(PROFILE_HEADERS, profile_rows(profile)))
    if agents:
        print(f"\nagents in one program (num_seeds), {args.agents_envs} envs each:")
        print(format_table(AGENT_HEADERS, agent_rows(agents)))
    if recurrent:
        print("\nrecurrent agents against the feed-forward agent of the same torso "
              "(minibatches of whole sequences, first call: the recurrent agent's):")
        print(format_table(RECURRENT_HEADERS, recurrent_rows(recurrent)))
    print(f"total {time.perf_counter() - t0:.0f} s")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"env_id": args.env_id, "num_steps": args.num_steps,
                       "device": str(jax.devices()[0]), "load_avg_end": os.getloadavg(),
                       "results": results, "first_update": first,
                       "op_profile": profile, "agents": agents, "recurrent": recurrent},
                      fh, indent=2)


if __name__ == "__main__":
    main()
