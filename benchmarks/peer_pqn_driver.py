"""Reference-side driver for a PQN side-by-side: trains purejaxql's own ``pqn_minatar.py``
(Gallici et al. 2024) from a checkout of it and writes per-update returns and timings as JSON.

This file is run as a plain script by the *reference* environment's Python (one with the
peer's pinned JAX, flax, optax, gymnax, hydra-core and wandb), never imported by our package:
it uses the standard library and the reference environment's packages only.

What it does, in the peer's own terms:

- config: composes ``purejaxql/config/config.yaml`` with ``+alg=<--alg>`` through Hydra's
  compose API, turns it into a dict and merges the ``alg`` group into the top level, as the
  peer's ``main`` and ``single_run`` do; then sets ``ENV_NAME``, ``NUM_SEEDS``, ``SEED``,
  ``TOTAL_TIMESTEPS`` and ``TOTAL_TIMESTEPS_DECAY`` (both to ``--total``),
  ``TEST_DURING_TRAINING=False`` and ``WANDB_MODE="disabled"``; ``--set KEY=VALUE`` (any number)
  is applied last and may change any of these.
- the script is imported from ``--purejaxql`` with importlib; wandb is put offline
  (``WANDB_MODE=disabled`` in the environment, ``wandb.log`` a no-op) so nothing reaches the
  network even if ``WANDB_MODE`` is set otherwise.
- training: ``jax.jit(jax.vmap(make_train(config)))`` over
  ``jax.random.split(PRNGKey(SEED), NUM_SEEDS)``, as ``single_run`` does. It is lowered and
  compiled first (timed on its own), then called ``--calls`` times (each call timed, a whole
  training run from the same keys).
- returns: the peer's per-update metrics hold ``returned_episode_returns`` as the mean over
  the update's ``NUM_STEPS x NUM_ENVS`` env steps of the LogWrapper's last-completed-episode
  return (0 for envs that have not finished one yet); that unmasked mean is what its wandb
  logging records, and is written as ``logged_returned_episode_returns``. The mean over the
  episodes that completed within the update (``returned_episode`` true) is not in its
  metrics, so unless ``--pristine`` the script's ``LogWrapper`` is swapped for a subclass
  that adds one info key (the return where done, 0 elsewhere); its per-update mean divided by
  that of ``returned_episode`` is ``completed_episode_return_mean`` (null where no episode
  ended). The subclass changes nothing else the peer computes.

Usage::

    python benchmarks/peer_pqn_driver.py --purejaxql=DIR --env=Breakout-MinAtar --seeds=3 \\
        --total=N --out=FILE.json [--alg=pqn_minatar] [--seed=0] [--calls=1] [--pristine] \\
        [--set KEY=VALUE ...]

``DIR`` is the peer's repository root (the folder holding ``purejaxql/``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import sys
import time
from typing import Any

_DONE_RETURN_KEY = "driver_returned_episode_returns_where_done"


def _parse_value(text: str) -> Any:
    """A --set value as YAML would read it, with ``1e7``-style numbers read as numbers."""
    import yaml

    value = yaml.safe_load(text)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    return value


def _load_config(repo: str, alg: str) -> dict[str, Any]:
    """The dict the peer's ``single_run`` trains with: config.yaml + alg group, merged."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = os.path.join(os.path.abspath(repo), "purejaxql", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="config", overrides=[f"+alg={alg}"])
    config = OmegaConf.to_container(cfg)
    return {**config, **config["alg"]}


def _import_peer(repo: str, script: str):
    """The peer's training module, loaded from its file, wandb kept offline."""
    os.environ["WANDB_MODE"] = "disabled"
    os.environ.setdefault("WANDB_SILENT", "true")
    root = os.path.abspath(repo)
    if root not in sys.path:
        sys.path.insert(0, root)  # for its own ``purejaxql.utils`` imports
    path = os.path.join(root, "purejaxql", f"{script}.py")
    spec = importlib.util.spec_from_file_location(f"purejaxql.{script}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.wandb.log = lambda *args, **kwargs: None
    return module, path


def _add_done_return_info(module) -> None:
    """Swap the module's LogWrapper for one that also reports the return where done."""
    base = module.LogWrapper

    class LogWrapperWithDoneReturn(base):
        def step(self, key, state, action, params=None):
            obs, state, reward, done, info = super().step(key, state, action, params)
            info[_DONE_RETURN_KEY] = info["returned_episode_returns"] * done
            return obs, state, reward, done, info

    module.LogWrapper = LogWrapperWithDoneReturn


def _plain(x: Any) -> Any:
    """JSON-ready: numpy/jax scalars and arrays to Python, NaN and inf to None."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):
        return _plain(np.asarray(x).tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _parser() -> argparse.ArgumentParser:
    """The driver's flags."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--purejaxql", required=True, help="the peer's repository root")
    parser.add_argument("--env", default="Breakout-MinAtar")
    parser.add_argument("--seeds", type=int, default=1, help="NUM_SEEDS (vmapped)")
    parser.add_argument("--seed", type=int, default=0, help="SEED")
    parser.add_argument("--total", type=float, required=True, help="TOTAL_TIMESTEPS(_DECAY)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--alg", default="pqn_minatar", help="config/alg/<name>.yaml")
    parser.add_argument("--script", default="pqn_minatar", help="purejaxql/<name>.py")
    parser.add_argument("--calls", type=int, default=1, help="timed calls after compiling")
    parser.add_argument(
        "--pristine",
        action="store_true",
        help="leave the peer's LogWrapper as is (no completed_episode_return_mean)",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override"
    )
    return parser


def _config(args, parser: argparse.ArgumentParser) -> tuple[dict, dict]:
    """``(config, overrides)``: the peer's yaml with the run's size, seeds and ``--set``."""
    total = int(args.total) if float(args.total).is_integer() else args.total
    config = _load_config(args.purejaxql, args.alg)
    config.update(
        ENV_NAME=args.env,
        NUM_SEEDS=args.seeds,
        SEED=args.seed,
        TOTAL_TIMESTEPS=total,
        TOTAL_TIMESTEPS_DECAY=total,
        TEST_DURING_TRAINING=False,
        WANDB_MODE="disabled",
    )
    overrides = {}
    for item in args.set:
        key, sep, text = item.partition("=")
        if not sep or not key:
            parser.error(f"--set wants KEY=VALUE, got {item!r}")
        overrides[key] = _parse_value(text)
    config.update(overrides)
    return config, overrides


def _timed_train(module, config: dict, calls: int):
    """``(outputs, rngs, timings)``: the peer's ``make_train`` jitted over the seeds, its
    trace+lower and compile seconds, then ``calls`` timed calls."""
    import jax

    t_start = time.perf_counter()
    train = module.make_train(config)  # adds NUM_UPDATES, NUM_UPDATES_DECAY, TEST_NUM_STEPS
    rngs = jax.random.split(jax.random.PRNGKey(config["SEED"]), config["NUM_SEEDS"])
    lowered = jax.jit(jax.vmap(train)).lower(rngs)
    t_lowered = time.perf_counter()
    compiled = lowered.compile()
    t_compiled = time.perf_counter()
    call_seconds, outs = [], None
    for _ in range(max(1, calls)):
        t0 = time.perf_counter()
        outs = jax.block_until_ready(compiled(rngs))
        call_seconds.append(time.perf_counter() - t0)
    return outs, rngs, {"trace_lower_seconds": t_lowered - t_start,
                        "compile_seconds": t_compiled - t_lowered, "calls": call_seconds}


def _per_seed(metrics: dict, rngs, num_seeds: int, steps_per_update: int) -> list[dict]:
    """Each seed's per-update series from the peer's metrics (each ``[NUM_SEEDS, U]``)."""
    import numpy as np

    per_seed = []
    for i in range(num_seeds):
        row = {k: np.asarray(v[i]) for k, v in metrics.items()}
        done_frac = row["returned_episode"].astype(np.float64)
        seed = {
            "index": i,
            "rng_key": np.asarray(rngs[i]).tolist(),
            "env_step": row["env_step"],
            "update_steps": row["update_steps"],
            "grad_steps": row["grad_steps"],
            "logged_returned_episode_returns": row["returned_episode_returns"],
            "completed_episodes": np.rint(done_frac * steps_per_update).astype(np.int64),
            "td_loss": row["td_loss"],
            "qvals": row["qvals"],
        }
        if _DONE_RETURN_KEY in row:
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(
                    done_frac > 0, row[_DONE_RETURN_KEY] / np.maximum(done_frac, 1e-30), np.nan
                )
            seed["completed_episode_return_mean"] = mean
        per_seed.append(seed)
    return per_seed


def _print_summary(result: dict, per_seed: list[dict], out: str) -> None:
    """One line for the run, one per seed."""
    import numpy as np

    config, num_updates, calls = result["config"], result["num_updates"], result["wall_seconds"]
    print(
        f"{config['ENV_NAME']} seeds={config['NUM_SEEDS']} updates={num_updates} "
        f"env_steps={result['env_steps_total']} jax={result['jax_version']} "
        f"({result['jax_backend']}): trace+lower {result['trace_lower_seconds']:.1f}s, compile "
        f"{result['compile_seconds']:.1f}s, call {calls:.2f}s = "
        f"{result['env_steps_per_second']:.0f} env steps/s"
    )
    for seed in per_seed:
        done = seed.get("completed_episode_return_mean")
        last = "n/a" if done is None else f"{np.nanmean(done[-max(1, num_updates // 10) :]):.3f}"
        print(
            f"  seed {seed['index']}: logged return (last update) "
            f"{float(seed['logged_returned_episode_returns'][-1]):.3f}, completed-episode "
            f"return (last 10% of updates) {last}, episodes {int(seed['completed_episodes'].sum())}"
        )
    print(f"wrote {out}")


def run(argv: list[str] | None = None) -> int:
    """Trains the peer's seeds as the flags say and writes the JSON record of ``--out``."""
    parser = _parser()
    args = parser.parse_args(argv)
    config, overrides = _config(args, parser)
    module, script_path = _import_peer(args.purejaxql, args.script)
    if not args.pristine:
        _add_done_return_info(module)

    import jax

    outs, rngs, timings = _timed_train(module, config, args.calls)
    num_updates = int(config["NUM_UPDATES"])
    steps_per_update = int(config["NUM_STEPS"]) * int(config["NUM_ENVS"])
    env_steps = num_updates * steps_per_update * int(config["NUM_SEEDS"])
    per_seed = _per_seed(jax.device_get(outs["metrics"]), rngs, int(config["NUM_SEEDS"]),
                         steps_per_update)
    calls = timings["calls"]
    result = _plain({
        "peer": "purejaxql", "script": script_path,
        "argv": sys.argv[1:] if argv is None else argv, "overrides": overrides,
        "pristine": args.pristine, "jax_version": jax.__version__,
        "jax_backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
        "python": platform.python_version(), "cpu_count": os.cpu_count(),
        "xla_flags": os.environ.get("XLA_FLAGS"), "num_updates": num_updates,
        "env_steps_per_update": steps_per_update, "env_steps_total": env_steps,
        "trace_lower_seconds": timings["trace_lower_seconds"],
        "compile_seconds": timings["compile_seconds"], "wall_seconds": calls[0],
        "wall_seconds_all_calls": calls, "env_steps_per_second": env_steps / calls[0],
        "config": config, "seeds": per_seed,
    })
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, allow_nan=False)
    _print_summary(result, per_seed, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(run())
