"""Anakin PPO against the single-file JAX PPO of PureJaxRL, side by side on CartPole-v1.

Both train gymnax CartPole-v1 with the same hyperparameters (PureJaxRL's ``ppo.py``
defaults: 2x64 tanh actor and critic, lr 2.5e-4 annealed, 4 epochs x 4 minibatches of
single samples, clip 0.2, value clipping, GAE 0.95, entropy 0.01) at each size
``ENVSxSTEPS:TOTAL`` of ``--sizes``; each training runs in a Python process of its own, ours
and the peer's alternating, ``--reps`` times. Ours is the training command's own loop
(``anakin.train.train`` into a temporary workdir: the compiled calls, the metrics fetched and
recorded per call, the log lines), with ``configs/cartpole_ppo.py``'s settings but the
learning rate, timed from the end of its first call to the end of its last (compile, first
call and the end-of-run checkpoint and plot excluded); the peer's is its
``make_train(config)`` jitted whole, ``DEBUG`` off, its one call timed after the compile.

Columns: the seconds each spends compiling, steady env steps/s (env steps over that span)
and process CPU seconds (all threads) per 1000 env steps over the same span; the last
table gives ours/peer per size, the median over the repetitions. Each process starts JAX
with the XLA CPU threads a run of its size gets (ours: ``cpu_threads`` auto,
docs/performance.md; the peer: XLA's default, one per core).

The peer is not part of this repository: clone https://github.com/luchris429/purejaxrl and
pass ``--peer_dir=<clone>/purejaxrl`` (the folder of its ``ppo.py``); it needs ``distrax``
(and its ``tensorflow-probability``). Its ``wrappers.py`` imports navix and brax for other
envs; a missing navix is replaced by an empty module, since CartPole does not use it. It
was written for gymnax's 5-tuple step; gymnax 1.0's 6-tuple (terminated, truncated) is
folded back into ``done`` for it.

Run: ``python -m benchmarks.peer_ppo --peer_dir=PATH [--reps=3]
[--sizes=4x128:500000,64x128:2621440,2048x16:2621440]``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import types

from benchmarks.common import format_table, in_fresh_process

PEER_CONFIG = {  # PureJaxRL ppo.py's __main__ config, DEBUG off
    "LR": 2.5e-4, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True, "DEBUG": False,
}


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peer_dir", required=True, help="the folder of PureJaxRL's ppo.py")
    p.add_argument("--sizes", default="4x128:500000,64x128:2621440,2048x16:2621440",
                   help="comma-separated ENVSxSTEPS:TOTAL_ENV_STEPS")
    p.add_argument("--reps", type=int, default=3, help="runs of each, alternating")
    p.add_argument("--json_out", default="")
    return p.parse_args(argv)


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    """``"4x128:500000,..."`` -> ``[(envs, steps, total env steps), ...]``."""
    sizes = []
    for item in text.split(","):
        shape, total = item.split(":")
        envs, steps = shape.split("x")
        sizes.append((int(envs), int(steps), int(float(total))))
    return sizes


def ours(num_envs: int, num_steps: int, total: int) -> dict:
    """Our Anakin training command's loop at this size (run in a fresh process)."""
    from anakin import train as anakin_train
    from runtime.xla_flags import apply_compile_cache

    config = importlib.import_module("configs.cartpole_ppo").get_config()
    config.update(num_envs=num_envs, num_steps=num_steps, total_env_steps=total,
                  learning_rate=PEER_CONFIG["LR"], compile_cache_dir="off",
                  checkpoint_every_minutes=0)
    apply_compile_cache(config)
    marks = []  # (wall, cpu, updates done) after each call's metrics are recorded
    record = anakin_train._record_call

    def record_and_mark(run, rundir, out, start, k, *rest):
        record(run, rundir, out, start, k, *rest)
        marks.append((time.perf_counter(), time.process_time(), start + k))

    anakin_train._record_call = record_and_mark
    try:
        with tempfile.TemporaryDirectory() as workdir:
            anakin_train.prepare(config)
            anakin_train.train(config, workdir)
            timing = json.load(open(f"{workdir}/timing.json"))
    finally:
        anakin_train._record_call = record
    (w0, c0, u0), (w1, c1, u1) = marks[0], marks[-1]
    steps = (u1 - u0) * num_envs * num_steps
    return {"compile_s": timing["compile_s"], "steps": steps, "train_s": w1 - w0,
            "cpu_s": c1 - c0}


def peer(peer_dir: str, num_envs: int, num_steps: int, total: int) -> dict:
    """PureJaxRL's ``make_train`` at this size (run in a fresh process)."""
    import jax

    sys.path.insert(0, peer_dir)  # for its own imports (wrappers.py)
    try:
        importlib.import_module("navix")
    except ImportError:  # imported by its wrappers.py for other envs; CartPole does not use it
        sys.modules["navix"] = types.ModuleType("navix")
    _classic_gymnax_step()
    spec = importlib.util.spec_from_file_location("peer_ppo_script", f"{peer_dir}/ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    make_train = module.make_train
    config = dict(PEER_CONFIG, NUM_ENVS=num_envs, NUM_STEPS=num_steps, TOTAL_TIMESTEPS=total)
    t0 = time.perf_counter()
    compiled = jax.jit(make_train(config)).lower(jax.random.PRNGKey(30)).compile()
    compile_s = time.perf_counter() - t0
    cpu0, t1 = time.process_time(), time.perf_counter()
    jax.block_until_ready(compiled(jax.random.PRNGKey(30)))
    steps = (total // num_steps // num_envs) * num_steps * num_envs
    return {"compile_s": compile_s, "steps": steps, "train_s": time.perf_counter() - t1,
            "cpu_s": time.process_time() - cpu0}


def _classic_gymnax_step() -> None:
    """Makes ``gymnax.make``'s envs return the 5-tuple ``(obs, state, reward, done, info)``
    of the gymnax the peer was written for (gymnax 1.0 splits ``done`` into terminated and
    truncated: ``done`` is their or, with the same auto-reset)."""
    import gymnax

    make = gymnax.make
    if getattr(make, "classic", False):
        return

    class Classic:
        def __init__(self, env):
            self._env = env

        def __getattr__(self, name):
            return getattr(self._env, name)

        def step(self, key, state, action, params=None):
            obs, state, reward, terminated, truncated, info = self._env.step(
                key, state, action, params)
            return obs, state, reward, terminated | truncated, info

    def classic_make(*args, **kwargs):
        env, params = make(*args, **kwargs)
        return Classic(env), params

    classic_make.classic = True
    gymnax.make = classic_make


def threads_for(num_envs: int, num_steps: int) -> int | None:
    """Our run's XLA CPU threads at this size (``cpu_threads`` auto)."""
    from runtime.xla_flags import cpu_threads_for

    config = importlib.import_module("configs.cartpole_ppo").get_config()
    config.update(num_envs=num_envs, num_steps=num_steps)
    return cpu_threads_for(config, "anakin")


def measure(args) -> list[dict]:
    """Every size, ``reps`` times ours then the peer's, each in a fresh process."""
    rows = []
    for envs, steps, total in parse_sizes(args.sizes):
        for rep in range(args.reps):
            for who in ("ours", "peer"):
                if who == "ours":
                    r = in_fresh_process(threads_for(envs, steps), ours, envs, steps, total)
                else:
                    r = in_fresh_process(None, peer, args.peer_dir, envs, steps, total)
                r.update(who=who, size=f"{envs}x{steps}", rep=rep,
                         sps=r["steps"] / r["train_s"], cpu_1k=1000 * r["cpu_s"] / r["steps"])
                rows.append(r)
                print(f"{r['size']} rep {rep} {who}: compile {r['compile_s']:.1f} s, "
                      f"{r['sps']:,.0f} steps/s, {r['cpu_1k']:.3f} CPU s / 1k", flush=True)
    return rows


def summary(rows: list[dict]) -> list[list[str]]:
    """Per size: medians of ours and the peer's, and ours/peer."""
    out = []
    for size in dict.fromkeys(r["size"] for r in rows):
        med = {who: {k: statistics.median(r[k] for r in rows
                                          if r["size"] == size and r["who"] == who)
                     for k in ("compile_s", "sps", "cpu_1k")} for who in ("ours", "peer")}
        o, p = med["ours"], med["peer"]
        out.append([size, f"{p['sps']:,.0f}", f"{o['sps']:,.0f}", f"{o['sps'] / p['sps']:.2f}x",
                    f"{o['cpu_1k'] / p['cpu_1k']:.2f}x", f"{p['compile_s']:.1f}",
                    f"{o['compile_s']:.1f}"])
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    rows = measure(args)
    print(format_table(["envs x steps", "peer SPS", "ours SPS", "ours / peer",
                        "CPU s ours / peer", "peer compile s", "ours compile s"],
                       summary(rows)))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
