"""Sebulba throughput on Atari, stage by stage: a model of the actor loop, per device split.

``python -m benchmarks.sebulba_throughput [--network=impala_resnet] [--num_envs=16] ...``

In one run, for the splits {one shared device, 1 actor + 1 learner, 1 actor + 3 learners}
(fake CPU devices on a CPU-only machine; real ones on a GPU/TPU host), env steps/s of:

- (a) raw env: EnvPool with random actions, the actors' threads and envs per thread;
- (b) actor loop: the actor threads with a trivial policy (``trivial_policy``: no network),
  fed by a learner that takes no time: the loop's own cost around the env step;
- (c) actor: the same with the agent's network;
- (d) learner-only: the learner step fed a synthetic batch of the rollout's shape (the same
  jitted shard_map step the trainer uses);
- (e) end-to-end: Sebulba PPO after the first (compiling) update;
- efficiency = (e) / min((b), (d)), and the CPU floor: the SPS at which the CPU seconds
  of (c) and (d) fill every core this process may use (on a host whose cores run envs,
  inference and learner alike, (e) cannot pass it);
- CPU s / 1k steps of each stage: this process's CPU seconds (every thread: actors, envs,
  learner, XLA's pools) per 1000 env steps over the same timed updates;
- plain step: samples/s of one plain jitted gradient step of the same net on one
  minibatch, the yardstick for the learner's scan;
- the end-to-end run's seconds per update in each stage (env step, inference, params wait,
  rollout-queue wait, learner step).

With ``--recurrent=lstm`` (or ``gru``) every split gets a second row, ``SPLIT+lstm``: the same
agent with that core (``--recurrent_hidden`` units) after its torso, against the
feed-forward row above it; both then take minibatches of whole sequences (the recurrent
agent's only kind), so the rows differ only by the core.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from rlcore.errors import ConfigError
from runtime.config.fields import POSITIVE, Choice
from runtime.process.arguments import OneLineParser, doc_summary, str_list
from sebulba import machine, timers

SPLITS = {"shared": ((0,), (0,)), "1a+1l": ((0,), (1,)), "1a+3l": ((0,), (1, 2, 3))}


def parse_args(argv=None) -> argparse.Namespace:
    """The flags, checked (``check_args``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.sebulba_throughput",
                      description=doc_summary(__doc__), check=check_args)
    p.add_argument("--env_id", default="Breakout-v5", help="a Sebulba env id")
    p.add_argument("--network", default="impala_resnet", help="the agent's torso")
    p.add_argument("--num_envs", type=int, default=24, help="envs over all actor threads")
    p.add_argument("--num_actor_threads", type=int, default=2,
                   help="per actor device; 0 = from the machine (sebulba.machine)")
    p.add_argument("--env_threads", type=int, default=0,
                   help="EnvPool worker threads per pool (0: EnvPool's default)")
    p.add_argument("--num_steps", type=int, default=32, help="rollout length")
    p.add_argument("--num_epochs", type=int, default=1, help="epochs per update")
    p.add_argument("--num_minibatches", type=int, default=2, help="minibatches per epoch")
    p.add_argument("--updates", type=int, default=4, help="measured updates per split")
    p.add_argument("--splits", type=str_list, default=list(SPLITS),
                   help=f"comma-separated, of {', '.join(SPLITS)}")
    p.add_argument("--recurrent", default="", help="lstm | gru: add a row per split with "
                   "that core ('' = none)")
    p.add_argument("--recurrent_hidden", type=int, default=256, help="units of the core")
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """The flags' own rules, then each split's config checked as ``sebulba.main`` checks it
    (sizes, the env id, the network, the split's devices); raises ``ConfigError``."""
    from benchmarks.common import flag_checks, validate_configs
    from sebulba.mode import MODE

    flag_checks({"updates": POSITIVE, "splits": Choice(tuple(SPLITS))})(args)
    if not args.splits:
        raise ConfigError("splits: names no split")
    cores = ("none", args.recurrent) if args.recurrent else ("none",)
    validate_configs([make_config(args, split, core) for split in args.splits
                      for core in cores], MODE)


def make_config(args, split: str, recurrent: str = "none"):
    from configs import atari_ppo

    c = atari_ppo.get_config()
    c.env_id = args.env_id
    c.network = args.network
    c.num_envs = args.num_envs
    c.num_actor_threads, c.env_threads = args.num_actor_threads, args.env_threads
    c.num_steps = args.num_steps
    c.num_epochs = args.num_epochs
    c.num_minibatches = args.num_minibatches
    c.total_env_steps = c.num_envs * c.num_steps * (args.updates + 1)
    c.actor_device_ids, c.learner_device_ids = SPLITS[split]
    c.log_every = 1
    if args.recurrent:  # both rows of a split take whole sequences
        c.recurrent, c.recurrent_hidden = recurrent, args.recurrent_hidden
        c.minibatch_kind = "sequences"
    c.num_actor_threads = machine.actor_threads(c, processes=1)
    return c


def raw_env_sps(config, seconds: float = 3.0) -> tuple[float, float]:
    """EnvPool steps/s with random actions, one thread per actor thread, same pool sizes,
    and the process CPU seconds per 1000 of those steps."""
    import numpy as np

    from benchmarks.common import cpu_s_per_1k
    from runtime.config.env_args import env_kwargs_of
    from sebulba.host_envs import make_host_env

    n = config.num_envs // config.num_actor_threads
    counts = [0] * config.num_actor_threads
    stop = threading.Event()
    ready = threading.Barrier(len(counts) + 1, timeout=120)

    def worker(i):
        env = make_host_env(config.env_id, n, seed=i * n, num_threads=config.env_threads,
                            **env_kwargs_of(config))
        env.reset()
        ready.wait()
        rng = np.random.default_rng(i)
        while not stop.is_set():
            env.step(rng.integers(0, env.spec.num_actions, n).astype(np.int32))
            counts[i] += n
        env.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(counts))]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.5)
    start, c0, cpu0 = time.perf_counter(), sum(counts), time.process_time()
    time.sleep(seconds)
    steps, cpu_s = sum(counts) - c0, time.process_time() - cpu0
    sps = steps / (time.perf_counter() - start)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return sps, cpu_s_per_1k(cpu_s, steps)


def trivial_policy(spec):
    """A policy of the actors' signature that costs nearly nothing: actions from the envs'
    ids and the step (every action, no network), zero distribution params; what the actor
    loop does around its network (device transfers, buffers, the env step) is left."""
    import jax
    import jax.numpy as jnp

    def policy(params, obs, core, first, env_ids, update, step_index):
        action = (env_ids * 31 + step_index * 7 + update) % spec.num_actions
        return action, jnp.zeros((env_ids.shape[0], spec.num_actions), jnp.float32), core

    return jax.jit(policy)


def actor_only_sps(config, trivial: bool, updates: int) -> tuple[float, float, dict]:
    """The actors alone, fed by a learner that takes no time (each update's params version
    published as soon as its rollouts are in): env steps/s over ``updates`` rollouts after
    the first (it compiles), process CPU s per 1000 of them, and the actors' mean seconds
    per rollout in each stage. ``trivial``: ``trivial_policy`` instead of the network."""
    from benchmarks.common import cpu_s_per_1k
    from sebulba import pipeline
    from sebulba.mode import MODE
    from sebulba.train import SebulbaRun

    run = SebulbaRun(config)
    if trivial:
        run.policy = trivial_policy(run.spec)
    params = run.init_state().params
    server = pipeline.ParamsServer(run.layout.actor_devices,
                                   pipeline.versions_kept(MODE.policy_lag(config)))
    stop = pipeline.StopControl()
    server.publish(0, params)
    actors, queues = run.start_actors(0, updates + 1, server, stop)
    stages: dict = {}
    try:
        for u in range(updates + 1):
            items = [pipeline.get(q, stop, 600.0)[0] for q in queues]
            if u == 0:
                start, cpu0 = time.perf_counter(), time.process_time()
            else:
                for item in items:
                    for k, v in item.timers.items():
                        stages[k] = stages.get(k, 0.0) + v / (len(items) * updates)
            server.publish(u + 1, params)
        seconds, cpu_s = time.perf_counter() - start, time.process_time() - cpu0
    finally:
        stop.stop()
        for actor in actors:
            actor.thread.join(timeout=30)
    steps = config.num_envs * config.num_steps * updates
    return steps / seconds, cpu_s_per_1k(cpu_s, steps), stages


def learner_only_sps(config, repeats: int) -> tuple[float, float]:
    """Env steps/s the learner step consumes on a synthetic batch of the rollout's shape,
    and the process CPU seconds per 1000 of those env steps."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from benchmarks.common import cpu_s_per_1k
    from sebulba import learner as sl
    from sebulba.train import SebulbaRun

    run = SebulbaRun(config)
    state = run.init_state()
    t, b = config.num_steps, config.num_envs
    rng = np.random.default_rng(0)
    host = dict(
        obs=rng.integers(0, 255, (t, b) + tuple(run.spec.obs_shape), dtype=np.uint8),
        action=rng.integers(0, run.spec.num_actions, (t, b)).astype(np.int32),
        reward=rng.standard_normal((t, b)).astype(np.float32),
        terminated=np.zeros((t, b), bool), truncated=np.zeros((t, b), bool),
        behaviour_dist_params=np.zeros((t, b, run.spec.num_actions), np.float32),
        behaviour_value=None,
        bootstrap_obs=rng.integers(0, 255, (b,) + tuple(run.spec.obs_shape), dtype=np.uint8),
    )
    from jax.sharding import NamedSharding

    from rlcore.networks import initial_core
    from rlcore.types import Trajectory

    core = initial_core(run.network, b)
    if core is not None:  # a recurrent agent: zero start states, no episode starts
        host.update(core_state=jax.tree.map(np.asarray, core), first=np.zeros((t, b), bool))
    mesh = run.layout.learner_mesh
    traj = jax.tree.map(lambda x, spec: jax.device_put(x, NamedSharding(mesh, spec)),
                        Trajectory(**host), sl.traj_spec(core))
    episodes = jax.device_put(np.zeros((mesh.devices.size, 3), np.float32),
                              NamedSharding(mesh, sl.P(sl.AXIS)))
    copy = lambda: jax.tree.map(jnp.copy, traj)  # the step donates nothing but its state
    length = jnp.int32(run.derived.num_updates)
    state, out = run.learner_step(state, copy(), episodes, jnp.int32(0), length)
    jax.block_until_ready(out)
    start, cpu0 = time.perf_counter(), time.process_time()
    for u in range(repeats):
        state, out = run.learner_step(state, traj, episodes, jnp.int32(u + 1), length)
    jax.block_until_ready(out)
    seconds, cpu_s = time.perf_counter() - start, time.process_time() - cpu0
    return t * b * repeats / seconds, cpu_s_per_1k(cpu_s, t * b * repeats)


def plain_step_samples_per_s(config, repeats: int = 5) -> float:
    """Samples/s of one plain jitted PPO gradient step on one minibatch (no scan)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from rlcore import losses
    from rlcore.networks import make_network
    from runtime.config.env_args import env_kwargs_of
    from sebulba.host_envs import make_host_env

    env = make_host_env(config.env_id, 1, seed=0, **env_kwargs_of(config))
    spec = env.spec
    env.close()
    net = make_network(config.network, spec)
    t, b = config.num_steps, config.num_envs // config.num_minibatches
    rng = np.random.default_rng(0)
    batch = losses.PPOBatch(
        obs=jnp.asarray(rng.integers(0, 255, (t, b) + tuple(spec.obs_shape), dtype=np.uint8)),
        action=jnp.zeros((t, b), jnp.int32),
        behaviour_dist_params=jnp.zeros((t, b, spec.num_actions)),
        old_value=jnp.zeros((t, b)), advantages=jnp.ones((t, b)), targets=jnp.ones((t, b)))
    params = net.init(jax.random.key(0), batch.obs[0, :1])
    opt = optax.adam(2.5e-4)
    opt_state = opt.init(params)

    @jax.jit
    def step(params, opt_state):
        grads, _ = jax.grad(lambda p: losses.ppo_loss(
            p, net.apply, batch, clip_eps=0.1, vf_coef=0.5, ent_coef=0.01), has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    params, opt_state = jax.block_until_ready(step(params, opt_state))
    start = time.perf_counter()
    for _ in range(repeats):
        params, opt_state = step(params, opt_state)
    jax.block_until_ready(params)
    return t * b * repeats / (time.perf_counter() - start)


def end_to_end(config):
    """Sebulba PPO after the first update: SPS, process CPU seconds per 1000 env steps, and
    mean per-stage seconds per update. The CPU clock starts as the learner takes the second
    update's batch (the first compiled) and stops when training returns."""
    from benchmarks.common import cpu_s_per_1k
    from sebulba.train import prepare, train

    prepare(config)
    cpu_at = {}
    rows = train(config, None,
                 on_batch=lambda u, batch: cpu_at.setdefault(u, time.process_time()))
    cpu_s = time.process_time() - cpu_at[1]
    first, last = rows[0], rows[-1]
    steps = last["env_steps"] - first["env_steps"]
    sps = steps / (last["wall_time"] - first["wall_time"])
    stages = {k[len("time/"):-2]: sum(r[k] for r in rows[1:]) / len(rows[1:])
              for k in rows[-1] if k.startswith("time/")}
    return sps, cpu_s_per_1k(cpu_s, steps), stages


HEADERS = ["split", "(a) raw env SPS", "(b) actor loop SPS", "(c) actor SPS",
           "(d) learner-only SPS", "(e) end-to-end SPS", "efficiency", "CPU floor SPS"]
CPU_HEADERS = ["split", "(a) raw env", "(b) actor loop", "(c) actor", "(d) learner-only",
               "(e) end-to-end", "(c) + (d)"]


def measure(config, updates: int, env: tuple[float, float]) -> tuple[list, list, dict]:
    """One config's stages (b)-(e) after the raw env's ``env`` (SPS, CPU s / 1k steps):
    ``(SPS row, CPU s / 1k steps row, the end-to-end run's seconds per stage)``, the rows
    without the split's name. Efficiency is (e) / min((b), (d)); the CPU floor is the
    SPS at which the actors' and the learner's CPU seconds, (c) + (d), fill every core."""
    loop_sps, loop_cpu, _ = actor_only_sps(config, True, updates)
    actor_sps, actor_cpu, _ = actor_only_sps(config, False, updates)
    learn_sps, learn_cpu = learner_only_sps(config, updates)
    e2e, e2e_cpu, stages = end_to_end(config)
    floor = 1000.0 * machine.usable_cores() / (actor_cpu + learn_cpu)
    sps = [env[0], loop_sps, actor_sps, learn_sps, e2e]
    cpu = [env[1], loop_cpu, actor_cpu, learn_cpu, e2e_cpu, actor_cpu + learn_cpu]
    return ([f"{x:,.0f}" for x in sps] + [f"{e2e / min(loop_sps, learn_sps):.2f}",
                                          f"{floor:,.0f}"],
            [f"{x:.3f}" for x in cpu], stages)


def main(argv=None):
    args = parse_args(argv)
    from benchmarks.common import format_table

    table, cpu_rows, stage_rows = [], [], []
    plain = None
    cores = ("none", args.recurrent) if args.recurrent else ("none",)
    for split in args.splits:
        env = raw_env_sps(make_config(args, split))
        for core in cores:
            config = make_config(args, split, core)
            name = split if core == "none" else f"{split}+{core}"
            if plain is None:
                plain = plain_step_samples_per_s(config)
            row, cpu, stages = measure(config, args.updates, env)
            table.append([name] + row)
            cpu_rows.append([name] + cpu)
            stage_rows.append([name] + [f"{stages.get(k, 0.0):.3f}" for k in STAGES])
    threads = make_config(args, args.splits[0]).num_actor_threads
    print(f"{args.env_id}, {args.network}, {args.num_envs} envs x {args.num_steps} steps, "
          f"{threads} actor threads, env_threads {args.env_threads}, {args.num_epochs} epochs x "
          f"{args.num_minibatches} minibatches, {machine.usable_cores()} cores")
    print(format_table(HEADERS, table))
    print("process CPU seconds per 1000 env steps (every thread):")
    print(format_table(CPU_HEADERS, cpu_rows))
    print(f"plain jitted PPO step, one minibatch: {plain:,.0f} samples/s")
    print("seconds per update, per stage, end to end (actor stages averaged over threads):")
    print(format_table(["split"] + list(STAGES), stage_rows))


STAGES = timers.REPORT_ORDER


if __name__ == "__main__":
    os.environ.setdefault(
        "XLA_FLAGS", "--xla_force_host_platform_device_count=4")  # fake devices on CPU
    main()
