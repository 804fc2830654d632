"""Anakin PPO against a peer's single-file JAX PPO, side by side: PureJaxRL's ``ppo.py`` on
CartPole-v1 (``--peer=purejaxrl``) or the Craftax baselines' ``ppo_rnn.py`` on
Craftax-Classic (``--peer=craftax``).

Both sides train the same env with the same hyperparameters at each size
``ENVSxSTEPS:TOTAL`` of ``--sizes``; each training runs in a Python process of its own, ours
and the peer's alternating, ``--reps`` times. Ours is the training command's own loop
(``anakin.train.train`` into a temporary workdir: the compiled calls, the metrics fetched and
recorded per call, the log lines) with the peer's config (``Peer.our_config``, changed by
``Peer.our_overrides``), timed from the end of its first call to the end of its last
(compile, first call and the end-of-run checkpoint and plot excluded); the peer's is its
``make_train(config)`` jitted whole, logging off, its one call timed after the compile.

- ``purejaxrl``: PureJaxRL's ``ppo.py`` defaults (2x64 tanh actor and critic, lr 2.5e-4
  annealed, 4 epochs x 4 minibatches of single samples, clip 0.2, value clipping, GAE 0.95,
  entropy 0.01) against ``configs/cartpole_ppo.py`` at that learning rate. Clone
  https://github.com/luchris429/purejaxrl and pass ``--peer_dir=<clone>/purejaxrl``. Its
  ``wrappers.py`` imports navix and brax for other envs; a missing navix is replaced by an
  empty module. It was written for gymnax's 5-tuple step; gymnax 1.0's 6-tuple
  (terminated, truncated) is folded back into ``done`` for it.
- ``craftax``: the Craftax baselines' PPO-RNN as its command line defaults it (lr 2e-4
  annealed, 64-step rollouts, 4 epochs x 8 minibatches of sequences, GAE 0.8, clip 0.2,
  entropy 0.01, grad norm 1.0, optimistic resets with ratio 16, layers and GRU 512 wide)
  against ``configs/craftax_classic_ppo_rnn.py`` as shipped (the same hyperparameters but
  the peer's value clipping, off in ours; a 2x64 torso and a GRU of 256; the same-step
  auto-reset, lazy). Networks differ in width, so ``--peer_set LAYER_SIZE=256`` gives the
  peer a GRU of ours. Clone
  https://github.com/MichaelTMatthews/Craftax_Baselines and pass ``--peer_dir=<clone>``.

Both peers need ``distrax``; where it does not import (its ``tensorflow-probability`` needs
a JAX older than ours), a stand-in with distrax's ``Categorical`` (``sample``, ``log_prob``,
``entropy``: the same math) takes its place.

Columns: the seconds each spends compiling, steady env steps/s (env steps over that span)
and process CPU seconds (all threads) per 1000 env steps over the same span; the last
table gives ours/peer per size, the median over the repetitions, and the range of the
repetitions' own ratios (on a 2-core host single runs with two XLA threads spread by up to
30%, so one ratio is not a result). Each process starts JAX
with the XLA CPU threads a run of its size gets (ours: ``cpu_threads`` auto,
docs/performance.md; the peer: XLA's default, one per core).

Run: ``python -m benchmarks.peer_ppo --peer_dir=PATH [--peer=purejaxrl|craftax] [--reps=3]
[--sizes=4x128:500000,...] [--peer_set KEY=VALUE ...]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import types
from typing import Any, Callable

from benchmarks.common import format_table, in_fresh_process
from rlcore.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Peer:
    """One peer script and our side of the comparison.

    Attributes:
      script: the peer's file in ``--peer_dir`` that defines ``make_train(config)``.
      config: the peer's config dict (its own defaults, logging off).
      our_config: the ``configs`` module of our side.
      our_overrides: fields set on our config so that it trains as the peer does.
      sizes: the default ``--sizes``.
      prepare: what the peer's imports need before its script loads (stand-ins, adapters).
    """

    script: str
    config: dict[str, Any]
    our_config: str
    our_overrides: dict[str, Any]
    sizes: str
    prepare: Callable[[], None]


def _missing_navix() -> None:
    """PureJaxRL's wrappers.py imports navix for other envs: an empty module where missing."""
    try:
        importlib.import_module("navix")
    except ImportError:
        sys.modules["navix"] = types.ModuleType("navix")


def _prepare_purejaxrl() -> None:
    _missing_navix()
    _distrax_or_stand_in()
    _classic_gymnax_step()


def _prepare_craftax() -> None:
    _distrax_or_stand_in()


PEERS = {
    "purejaxrl": Peer(
        script="ppo.py",
        config={"LR": 2.5e-4, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99,
                "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
                "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1",
                "ANNEAL_LR": True, "DEBUG": False},
        our_config="configs.cartpole_ppo", our_overrides={"learning_rate": 2.5e-4},
        sizes="4x128:500000,64x128:2621440,2048x16:2621440", prepare=_prepare_purejaxrl),
    "craftax": Peer(
        script="ppo_rnn.py",
        config={"ENV_NAME": "Craftax-Classic-Symbolic-v1", "LR": 2e-4, "UPDATE_EPOCHS": 4,
                "NUM_MINIBATCHES": 8, "GAMMA": 0.99, "GAE_LAMBDA": 0.8, "CLIP_EPS": 0.2,
                "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 1.0, "ACTIVATION": "tanh",
                "ANNEAL_LR": True, "DEBUG": False, "USE_WANDB": False, "LAYER_SIZE": 512,
                "USE_OPTIMISTIC_RESETS": True, "OPTIMISTIC_RESET_RATIO": 16},
        our_config="configs.craftax_classic_ppo_rnn", our_overrides={},
        sizes="64x64:163840", prepare=_prepare_craftax),
}


def check_args(args: argparse.Namespace) -> None:
    """``--peer_dir`` a directory, ``--reps`` positive, ``--sizes`` of the form with positive
    sizes; raises ``ConfigError`` naming the flag (docs/design.md, "Exit codes")."""
    from benchmarks.common import dir_problem, flag_checks, path_check
    from runtime.config.fields import POSITIVE

    flag_checks({"reps": POSITIVE}, path_check("peer_dir", dir_problem))(args)
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else []
    except ValueError:
        raise ConfigError(f"sizes: {args.sizes!r} is not ENVSxSTEPS:TOTAL_ENV_STEPS,...") from None
    flag_checks({"sizes": POSITIVE})(argparse.Namespace(sizes=[n for s in sizes for n in s]))


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags, checked (``check_args``) before any work."""
    from runtime.process.arguments import OneLineParser, doc_summary

    p = OneLineParser(prog="python -m benchmarks.peer_ppo", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--peer_dir", required=True, help="the folder of the peer's script")
    p.add_argument("--peer", choices=sorted(PEERS), default="purejaxrl")
    p.add_argument("--sizes", default="",
                   help="comma-separated ENVSxSTEPS:TOTAL_ENV_STEPS (default: the peer's)")
    p.add_argument("--peer_set", action="append", default=[], metavar="KEY=VALUE",
                   help="a key of the peer's config, a Python literal (repeatable)")
    p.add_argument("--reps", type=int, default=3, help="runs of each, alternating")
    p.add_argument("--json_out", default="", help="also write the rows here (JSON)")
    return p.parse_args(argv)


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    """``"4x128:500000,..."`` -> ``[(envs, steps, total env steps), ...]``."""
    sizes = []
    for item in text.split(","):
        shape, total = item.split(":")
        envs, steps = shape.split("x")
        sizes.append((int(envs), int(steps), int(float(total))))
    return sizes


def our_config(peer_name: str, num_envs: int, num_steps: int, total: int):
    """Our side's config at this size (cache and checkpoints off)."""
    spec = PEERS[peer_name]
    config = importlib.import_module(spec.our_config).get_config()
    config.update(num_envs=num_envs, num_steps=num_steps, total_env_steps=total,
                  compile_cache_dir="off", checkpoint_every_minutes=0, **spec.our_overrides)
    return config


def ours(num_envs: int, num_steps: int, total: int, peer_name: str = "purejaxrl") -> dict:
    """Our Anakin training command's loop at this size (run in a fresh process)."""
    from anakin import train as anakin_train
    from runtime.config.xla_flags import apply_compile_cache

    config = our_config(peer_name, num_envs, num_steps, total)
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


def peer(peer_dir: str, num_envs: int, num_steps: int, total: int,
         peer_name: str = "purejaxrl", peer_set: dict | None = None) -> dict:
    """The peer's ``make_train`` at this size (run in a fresh process)."""
    import jax

    spec = PEERS[peer_name]
    sys.path.insert(0, peer_dir)  # for its own imports (wrappers.py, ...)
    spec.prepare()
    module = _load_script(f"{peer_dir}/{spec.script}")
    config = dict(spec.config, **(peer_set or {}), NUM_ENVS=num_envs, NUM_STEPS=num_steps,
                  TOTAL_TIMESTEPS=total)
    t0 = time.perf_counter()
    compiled = jax.jit(module.make_train(config)).lower(jax.random.PRNGKey(30)).compile()
    compile_s = time.perf_counter() - t0
    cpu0, t1 = time.process_time(), time.perf_counter()
    jax.block_until_ready(compiled(jax.random.PRNGKey(30)))
    steps = (total // num_steps // num_envs) * num_steps * num_envs
    return {"compile_s": compile_s, "steps": steps, "train_s": time.perf_counter() - t1,
            "cpu_s": time.process_time() - cpu0}


def _load_script(path: str) -> types.ModuleType:
    """The peer's script at ``path``, imported as module ``peer_script``."""
    found = importlib.util.spec_from_file_location("peer_script", path)
    if found is None or found.loader is None:
        raise FileNotFoundError(f"--peer_dir: no peer script at {path}")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def _distrax_or_stand_in() -> None:
    """``import distrax`` for the peer, or a stand-in module with its ``Categorical`` where
    distrax does not import (``CategoricalStandIn``)."""
    try:
        importlib.import_module("distrax")
    except Exception:  # ImportError, or its tensorflow-probability failing on this JAX
        for name in [m for m in sys.modules if m.split(".")[0] in ("distrax",
                                                                  "tensorflow_probability")]:
            del sys.modules[name]
        sys.modules["distrax"] = types.ModuleType("distrax")
        sys.modules["distrax"].Categorical = CategoricalStandIn  # type: ignore[attr-defined]


class CategoricalStandIn:
    """distrax's ``Categorical(logits)``: what the peers call of it, the same math."""

    def __init__(self, logits):
        import jax

        self.logits = logits
        self._log_p = jax.nn.log_softmax(logits, axis=-1)

    def sample(self, seed):
        import jax

        return jax.random.categorical(seed, self.logits, axis=-1)

    def log_prob(self, value):
        import jax.numpy as jnp

        return jnp.take_along_axis(self._log_p, value[..., None].astype(jnp.int32),
                                   axis=-1)[..., 0]

    def entropy(self):
        import jax.numpy as jnp

        return -jnp.sum(jnp.exp(self._log_p) * self._log_p, axis=-1)


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


def threads_for(peer_name: str, num_envs: int, num_steps: int) -> int | None:
    """Our run's XLA CPU threads at this size (``cpu_threads`` auto)."""
    from runtime.config.xla_flags import cpu_threads_for

    return cpu_threads_for(our_config(peer_name, num_envs, num_steps, num_envs * num_steps),
                           "anakin")


def parse_peer_set(items: list[str]) -> dict[str, Any]:
    """``["LAYER_SIZE=256", ...]`` -> ``{"LAYER_SIZE": 256}`` (values as Python literals)."""
    import ast

    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def measure(args) -> list[dict]:
    """Every size, ``reps`` times ours then the peer's, each in a fresh process."""
    rows, peer_set = [], parse_peer_set(args.peer_set)
    for envs, steps, total in parse_sizes(args.sizes or PEERS[args.peer].sizes):
        for rep in range(args.reps):
            for who in ("ours", "peer"):
                if who == "ours":
                    r = in_fresh_process(threads_for(args.peer, envs, steps), ours, envs,
                                         steps, total, args.peer)
                else:
                    r = in_fresh_process(None, peer, args.peer_dir, envs, steps, total,
                                         args.peer, peer_set)
                r.update(who=who, size=f"{envs}x{steps}", rep=rep,
                         sps=r["steps"] / r["train_s"], cpu_1k=1000 * r["cpu_s"] / r["steps"])
                rows.append(r)
                print(f"{r['size']} rep {rep} {who}: compile {r['compile_s']:.1f} s, "
                      f"{r['sps']:,.0f} steps/s, {r['cpu_1k']:.3f} CPU s / 1k", flush=True)
    return rows


def summary(rows: list[dict]) -> list[list[str]]:
    """Per size: medians of ours and the peer's, ours/peer, and the range of ours/peer over
    the repetitions (each rep's two runs ran one after the other)."""
    out = []
    for size in dict.fromkeys(r["size"] for r in rows):
        runs = {who: [r for r in rows if r["size"] == size and r["who"] == who]
                for who in ("ours", "peer")}
        med = {who: {k: statistics.median(r[k] for r in runs[who])
                     for k in ("compile_s", "sps", "cpu_1k")} for who in runs}
        o, p = med["ours"], med["peer"]
        per_rep = [a["sps"] / b["sps"] for a, b in zip(runs["ours"], runs["peer"])]
        out.append([size, f"{p['sps']:,.0f}", f"{o['sps']:,.0f}", f"{o['sps'] / p['sps']:.2f}x",
                    f"{o['cpu_1k'] / p['cpu_1k']:.2f}x", f"{p['compile_s']:.1f}",
                    f"{o['compile_s']:.1f}", f"{min(per_rep):.2f}-{max(per_rep):.2f}x"])
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    rows = measure(args)
    print(format_table(["envs x steps", "peer SPS", "ours SPS", "ours / peer",
                        "CPU s ours / peer", "peer compile s", "ours compile s",
                        "ours / peer per rep"],
                       summary(rows)))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
