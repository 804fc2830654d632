"""Sebulba throughput on Atari: raw EnvPool, learner-only and end-to-end, per device split.

``python -m benchmarks.sebulba_throughput [--network=impala_resnet] [--num_envs=16] ...``

In one run, for the splits {one shared device, 1 actor + 1 learner, 1 actor + 3 learners}
(fake CPU devices on a CPU-only machine; real ones on a GPU/TPU host):

- raw env: EnvPool steps/s with random actions, same envs per thread and threads;
- learner-only: env steps/s the learner consumes when fed a synthetic batch of the
  rollout's shape (the same jitted shard_map step the trainer uses);
- plain step: samples/s of one plain jitted gradient step of the same net on one
  minibatch, the yardstick for the learner's scan (a rolled scan over a conv-net step is
  10x slower on CPU);
- end-to-end: Sebulba PPO SPS after the first (compiling) update;
- CPU s / 1k steps, learner-only and end-to-end: this process's CPU seconds (every thread:
  actors, envs, learner, XLA's pools) per 1000 env steps over the same timed updates;
- efficiency = end-to-end / min(raw env, learner-only), and the per-stage seconds per
  update (env step, inference, params wait, rollout-queue wait, learner step).

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

from sebulba import timers

SPLITS = {"shared": ((0,), (0,)), "1a+1l": ((0,), (1,)), "1a+3l": ((0,), (1, 2, 3))}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env_id", default="Breakout-v5")
    p.add_argument("--network", default="impala_resnet")
    p.add_argument("--num_envs", type=int, default=24, help="envs over all actor threads")
    p.add_argument("--num_actor_threads", type=int, default=2)
    p.add_argument("--num_steps", type=int, default=32)
    p.add_argument("--num_epochs", type=int, default=1)
    p.add_argument("--num_minibatches", type=int, default=2)
    p.add_argument("--updates", type=int, default=4, help="measured updates per split")
    p.add_argument("--splits", default=",".join(SPLITS))
    p.add_argument("--recurrent", default="", help="lstm | gru: add a row per split with "
                   "that core ('' = none)")
    p.add_argument("--recurrent_hidden", type=int, default=256)
    return p.parse_args(argv)


def make_config(args, split: str, recurrent: str = "none"):
    from configs import atari_ppo

    c = atari_ppo.get_config()
    c.env_id = args.env_id
    c.network = args.network
    c.num_envs = args.num_envs
    c.num_actor_threads = args.num_actor_threads
    c.num_steps = args.num_steps
    c.num_epochs = args.num_epochs
    c.num_minibatches = args.num_minibatches
    c.total_env_steps = c.num_envs * c.num_steps * (args.updates + 1)
    c.actor_device_ids, c.learner_device_ids = SPLITS[split]
    c.log_every = 1
    if args.recurrent:  # both rows of a split take whole sequences
        c.recurrent, c.recurrent_hidden = recurrent, args.recurrent_hidden
        c.minibatch_kind = "sequences"
    return c


def raw_env_sps(config, seconds: float = 3.0) -> float:
    """EnvPool steps/s with random actions, one thread per actor thread, same pool sizes."""
    import numpy as np

    from sebulba.host_envs import make_host_env

    n = config.num_envs // config.num_actor_threads
    counts = [0] * config.num_actor_threads
    stop = threading.Event()
    ready = threading.Barrier(len(counts) + 1, timeout=120)

    def worker(i):
        env = make_host_env(config.env_id, n, seed=i * n, num_threads=config.env_threads)
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
    start, c0 = time.perf_counter(), sum(counts)
    time.sleep(seconds)
    sps = (sum(counts) - c0) / (time.perf_counter() - start)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return sps


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
    state, out = run.learner_step(state, copy(), episodes, jnp.int32(0))
    jax.block_until_ready(out)
    start, cpu0 = time.perf_counter(), time.process_time()
    for u in range(repeats):
        state, out = run.learner_step(state, traj, episodes, jnp.int32(u + 1))
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
    from sebulba.host_envs import make_host_env

    env = make_host_env(config.env_id, 1, seed=0)
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


def main(argv=None):
    args = parse_args(argv)
    from benchmarks.common import format_table

    table, stage_rows = [], []
    plain = None
    cores = ("none", args.recurrent) if args.recurrent else ("none",)
    for split in args.splits.split(","):
        env_sps = raw_env_sps(make_config(args, split))
        for core in cores:
            config = make_config(args, split, core)
            name = split if core == "none" else f"{split}+{core}"
            learn_sps, learn_cpu = learner_only_sps(config, args.updates)
            if plain is None:
                plain = plain_step_samples_per_s(config)
            e2e, e2e_cpu, stages = end_to_end(config)
            eff = e2e / min(env_sps, learn_sps)
            table.append([name, f"{env_sps:,.0f}", f"{learn_sps:,.0f}", f"{learn_cpu:.3f}",
                          f"{e2e:,.0f}", f"{e2e_cpu:.3f}", f"{eff:.2f}"])
            stage_rows.append([name] + [f"{stages.get(k, 0.0):.3f}" for k in STAGES])
    print(f"{args.env_id}, {args.network}, {args.num_envs} envs x {args.num_steps} steps, "
          f"{args.num_actor_threads} actor threads, {args.num_epochs} epochs x "
          f"{args.num_minibatches} minibatches")
    print(format_table(["split", "raw env SPS", "learner-only SPS",
                        "learner-only CPU s / 1k steps", "end-to-end SPS",
                        "end-to-end CPU s / 1k steps", "efficiency"], table))
    print(f"plain jitted PPO step, one minibatch: {plain:,.0f} samples/s "
          f"(learner-only x epochs = {float(table[0][2].replace(',', '')) * args.num_epochs:,.0f}"
          " samples/s on the first split)")
    print("seconds per update, per stage (actor stages averaged over threads):")
    print(format_table(["split"] + list(STAGES), stage_rows))


STAGES = timers.REPORT_ORDER


if __name__ == "__main__":
    os.environ.setdefault(
        "XLA_FLAGS", "--xla_force_host_platform_device_count=4")  # fake devices on CPU
    main()
