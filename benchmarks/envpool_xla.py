"""Acting throughput of EnvPool stepped from Python (Sebulba's actor loop) against EnvPool
stepped inside one jitted ``lax.scan`` through its XLA FFI interface (an Anakin-style loop).

``python -m benchmarks.envpool_xla [--env_ids=Breakout-v5,HalfCheetah-v4]
[--num_envs=8,64] [--steps=128] [--repeats=3] [--modes=host,compiled,adapter]``

For each env and size, a synchronous EnvPool batch (``batch_size == num_envs``, the
Sebulba adapter's options: ``envs.envpool.ATARI_DEFAULTS`` on Atari) is stepped ``steps``
times per call by the Sebulba policy (``sebulba.actor.make_policy_fn`` over the project's
network: ``nature_cnn`` on Atari, ``mlp`` (2x64) otherwise; sampled actions, per-env keys),
in three ways:

- ``host``: Sebulba's actor loop without its bookkeeping: the jitted policy on the
  observation, the action back to numpy, ``env.send(action, env_id)``, ``env.recv()``;
- ``compiled``: one ``jax.jit`` of a ``lax.scan`` over the ``steps`` steps, each the same
  jitted policy then EnvPool's XLA ``send`` and ``recv`` (``env.xla()``), so no step
  returns to Python;
- ``adapter``: the ``host`` loop through ``envs.envpool.EnvPoolEnv``, the adapter Sebulba
  actually steps (same-step auto-reset, id reordering, episode statistics).

Every mode steps the same envs (``host`` and ``compiled`` one pool, ``adapter`` its own);
after one warm-up call each (the ``compiled`` one compiles), the modes are timed in turn,
``host, compiled, adapter`` and again, ``repeats`` times; the table gives each call's env
steps/s, their median and the median over the ``host`` median. Each env runs in a fresh
process: EnvPool's MuJoCo envs take and return float64, which XLA's interface only passes
with ``jax_enable_x64`` (with it off the float64 rows are copied into float32 buffers of
half the size: garbage and a corrupted heap), so their process turns x64 on for every mode.

``--check_steps=N`` (default 20) first checks, for each env at the smallest size, that the
compiled loop gives the host loop's observations and rewards, step by step and env by env
(``same_as_host``); ``tests/benchmarks/test_envpool_xla.py`` runs that check.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.common import env_ids_known, flag_checks, format_table, in_fresh_process
from envs.registry import SEBULBA
from runtime.config.fields import NATURAL, POSITIVE, Choice
from runtime.process.arguments import OneLineParser, doc_summary, int_list, str_list

MODES = ("host", "compiled", "adapter")
HEADERS = ("env", "envs", "steps/call", "mode", "steps/s per call", "median steps/s",
           "vs host", "first call s")


def check_args(args: argparse.Namespace) -> None:
    """The flags' rules (the env ids by the registry's), before any work; raises
    ``ConfigError`` naming the flag (docs/design.md, "Exit codes")."""
    flag_checks({"num_envs": POSITIVE, "steps": POSITIVE, "repeats": POSITIVE,
                 "modes": Choice(MODES), "num_threads": NATURAL, "check_steps": NATURAL,
                 "seed": NATURAL}, env_ids_known("env_ids", SEBULBA))(args)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags, checked (``check_args``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.envpool_xla", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--env_ids", type=str_list, default=["Breakout-v5", "HalfCheetah-v4"],
                   help="comma-separated EnvPool ids (Atari -v5, MuJoCo -v4, CartPole-v1)")
    p.add_argument("--num_envs", type=int_list, default=[8, 64],
                   help="comma-separated batch sizes (num_envs == batch_size)")
    p.add_argument("--steps", type=int, default=128, help="env steps of the batch per call")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per mode")
    p.add_argument("--modes", type=str_list, default=list(MODES),
                   help="comma-separated: host, compiled, adapter")
    p.add_argument("--num_threads", type=int, default=0,
                   help="EnvPool worker threads (0: EnvPool's default)")
    p.add_argument("--check_steps", type=int, default=20,
                   help="steps of the compiled-equals-host check (0: skip)")
    p.add_argument("--seed", type=int, default=0, help="env seed and policy seed")
    return p.parse_args(argv)


def pool_options(env_id: str) -> dict[str, Any]:
    """The EnvPool options of ``env_id`` as Sebulba makes it (Atari defaults)."""
    from envs.envpool import ATARI_DEFAULTS, is_atari

    return dict(ATARI_DEFAULTS) if is_atari(env_id) else {}


def make_pool(env_id: str, num_envs: int, seed: int, num_threads: int = 0) -> Any:
    """A synchronous gymnasium-style EnvPool batch of ``env_id``, Sebulba's options."""
    import envpool

    return envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs,
                        seed=seed, num_threads=num_threads, **pool_options(env_id))


def has_float64(spec: Any) -> bool:
    """Whether an EnvPool spec's actions or state arrays are float64 (MuJoCo's are)."""
    arrays = [*spec.action_array_spec.values(), *spec.state_array_spec.values()]
    return any(np.dtype(a.dtype) == np.float64 for a in arrays)


def needs_x64(env_id: str) -> bool:
    """Whether EnvPool's ``env_id`` takes or returns float64 arrays (``has_float64``)."""
    import envpool

    return has_float64(envpool.make_spec(env_id, **pool_options(env_id)))


def xla_available() -> str:
    """'' where EnvPool's XLA interface imports here, else why it does not."""
    try:
        from envpool.python import xla_template  # noqa: F401
    except (ImportError, AttributeError) as e:
        return f"envpool's XLA interface does not import: {e!r}"
    return ""


def env_spec(env_id: str, seed: int) -> Any:
    """``rlcore.types.EnvSpec`` of ``env_id`` as Sebulba's adapter reads it."""
    from envs.envpool import EnvPoolEnv

    env = EnvPoolEnv(env_id, 1, seed=seed)
    try:
        return env.spec
    finally:
        env.close()


def make_act(env_id: str, pool: Any, seed: int) -> tuple[Any, Callable]:
    """``(params, act)``: the Sebulba policy of ``env_id`` and a jitted ``act(params, obs,
    env_ids, update, step) -> action`` in the pool's action dtype (boxes clipped to the
    bounds, as the adapter does); actions depend on each env's id, not its row."""
    from envs.envpool import is_atari
    from rlcore.networks import init_params, make_network
    from sebulba.actor import make_policy_fn

    spec = env_spec(env_id, seed)
    network = make_network("nature_cnn" if is_atari(env_id) else "mlp", spec)
    params = init_params(network, jax.random.key(seed), spec)
    policy = make_policy_fn(network.apply, jax.random.key(seed + 1))
    action_dtype = pool.spec.action_array_spec["action"].dtype

    def act(params, obs, env_ids, update, step):
        obs = obs.astype(spec.obs_dtype)
        action, _, _ = policy(params, obs, None, None, env_ids, update, step)
        if spec.action_shape:
            action = jnp.clip(action, jnp.asarray(spec.action_low), jnp.asarray(spec.action_high))
        return action.astype(action_dtype)

    return params, jax.jit(act)


def host_call(pool: Any, act: Callable, params: Any, carry: tuple, update: int, steps: int,
              keep: bool = False) -> tuple[tuple, Any]:
    """``steps`` steps of ``pool`` from Python: policy, ``send``, ``recv``. ``carry`` is
    ``(obs, env_ids)`` of the last ``recv``; returns the next carry and the reward sum, or
    with ``keep`` every step's ``(obs, reward, env_id)`` stacked ``[steps, N, ...]``."""
    obs, env_ids = carry
    total, kept = 0.0, []
    for t in range(steps):
        action = np.asarray(act(params, jax.device_put(obs), env_ids, np.int32(update),
                                np.int32(t)))
        pool.send(action, env_ids)
        obs, reward, _, _, info = pool.recv()
        env_ids = info["env_id"]
        total += float(np.sum(reward))
        if keep:
            kept.append((np.array(obs), np.array(reward), np.array(env_ids)))
    out = tuple(np.stack(x) for x in zip(*kept)) if keep else total
    return (obs, env_ids), out


def make_compiled_call(pool: Any, act: Callable, steps: int, keep: bool = False):
    """``(handle, call)``: the pool's XLA handle and a jitted ``call(params, (handle, obs,
    env_ids), update) -> (carry, out)`` running ``steps`` steps in one ``lax.scan`` with
    EnvPool's XLA ``send``/``recv``; ``out`` as ``host_call``'s (a jnp reward sum)."""
    if not jax.config.jax_enable_x64 and has_float64(pool.spec):
        raise RuntimeError("EnvPool's XLA interface passes this env's float64 arrays only "
                           "with jax_enable_x64 on (JAX_ENABLE_X64=1)")
    handle, recv, send, _ = pool.xla()

    def call(params, carry, update):
        def one(carry, t):
            handle, obs, env_ids = carry
            handle = send(handle, act(params, obs, env_ids, update, t), env_ids)
            handle, (obs, reward, _, _, info) = recv(handle)
            out = (obs, reward, info["env_id"]) if keep else jnp.sum(reward)
            return (handle, obs, info["env_id"]), out

        carry, out = jax.lax.scan(one, carry, jnp.arange(steps, dtype=jnp.int32))
        return carry, out if keep else jnp.sum(out)

    return handle, jax.jit(call)


def by_env_id(rows: np.ndarray, env_ids: np.ndarray) -> np.ndarray:
    """``rows [T, N, ...]`` returned for ``env_ids [T, N]``, each step in env-id order."""
    order = np.argsort(env_ids, axis=1, kind="stable")
    index = order.reshape(order.shape + (1,) * (rows.ndim - 2))
    return np.take_along_axis(rows, index, axis=1)


def same_as_host(env_id: str, num_envs: int, steps: int, seed: int = 0) -> dict[str, Any]:
    """Two pools of the same seed, one stepped by ``host_call``, one by the compiled loop,
    ``steps`` steps each with the same policy; returns whether observations and rewards
    are equal (env by env, step by step), the largest differences, whether every step's
    rows came back in env-id order in both, and the host loop's reward sum."""
    pools = [make_pool(env_id, num_envs, seed) for _ in range(2)]
    try:
        params, act = make_act(env_id, pools[0], seed)
        starts = []
        for pool in pools:
            obs, info = pool.reset()
            starts.append((obs, info["env_id"]))
        _, (h_obs, h_rew, h_ids) = host_call(pools[0], act, params, starts[0], 0, steps, True)
        handle, call = make_compiled_call(pools[1], act, steps, keep=True)
        _, (c_obs, c_rew, c_ids) = call(params, (handle, *starts[1]), np.int32(0))
        c_obs, c_rew, c_ids = (np.asarray(x) for x in (c_obs, c_rew, c_ids))
    finally:
        for pool in pools:
            pool.close()
    h_obs, c_obs = by_env_id(h_obs, h_ids), by_env_id(c_obs, c_ids)
    h_rew, c_rew = by_env_id(h_rew, h_ids), by_env_id(c_rew, c_ids)
    obs_diff = float(np.max(np.abs(h_obs.astype(np.float64) - c_obs.astype(np.float64))))
    rew_diff = float(np.max(np.abs(h_rew.astype(np.float64) - c_rew.astype(np.float64))))
    ordered = bool((h_ids == np.arange(num_envs)).all() and (c_ids == np.arange(num_envs)).all())
    return {"equal": bool(np.array_equal(h_obs, c_obs) and np.array_equal(h_rew, c_rew)),
            "obs_max_diff": obs_diff, "reward_max_diff": rew_diff, "rows_in_id_order": ordered,
            "reward_sum": float(h_rew.sum())}


def timed_calls(modes: tuple[str, ...], calls: dict[str, Callable[[], None]],
                repeats: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """One warm-up call per mode (its seconds returned), then ``repeats`` rounds of one
    timed call per mode, in ``modes`` order; returns ``(warm-up s, [s of each call])``."""
    first, seconds = {}, {m: [] for m in modes}
    for mode in modes:
        t0 = time.perf_counter()
        calls[mode]()
        first[mode] = time.perf_counter() - t0
    for _ in range(repeats):
        for mode in modes:
            t0 = time.perf_counter()
            calls[mode]()
            seconds[mode].append(time.perf_counter() - t0)
    return first, seconds


def mode_calls(env_id: str, num_envs: int, steps: int, seed: int, num_threads: int,
               closing: list) -> dict[str, Callable[[], None]]:
    """The zero-argument calls of each mode on ``num_envs`` envs of ``env_id``, each
    ``steps`` steps on from where its last call stopped; pools to close go to ``closing``."""
    from envs.envpool import EnvPoolEnv

    pool = make_pool(env_id, num_envs, seed, num_threads)
    adapter = EnvPoolEnv(env_id, num_envs, seed=seed, num_threads=num_threads)
    closing += [pool, adapter]
    params, act = make_act(env_id, pool, seed)
    obs, info = pool.reset()
    state: dict[str, Any] = {"host": (obs, info["env_id"]), "update": 0}
    handle, compiled = make_compiled_call(pool, act, steps)
    state["compiled"] = (handle, *state["host"])
    state["adapter"] = adapter.reset().obs
    ids = np.arange(num_envs, dtype=np.int32)

    def host() -> None:
        state["host"], _ = host_call(pool, act, params, state["host"], state["update"], steps)
        state["compiled"] = (state["compiled"][0], *state["host"])  # the pool goes on

    def comp() -> None:
        carry, total = compiled(params, state["compiled"], np.int32(state["update"]))
        jax.block_until_ready(total)
        state["compiled"], state["host"] = carry, tuple(np.asarray(x) for x in carry[1:])

    def adapt() -> None:
        for t in range(steps):
            action = np.asarray(act(params, jax.device_put(state["adapter"]), ids,
                                    np.int32(state["update"]), np.int32(t)))
            state["adapter"] = adapter.step(action).obs

    return {"host": host, "compiled": comp, "adapter": adapt}


def measure(env_id: str, sizes: tuple[int, ...], steps: int, repeats: int,
            modes: tuple[str, ...], seed: int, num_threads: int,
            check_steps: int) -> dict[str, Any]:
    """Every size of ``env_id`` in this process (x64 on where the env needs it); returns
    ``{"x64", "check", "results": [(size, first-call s, seconds per call)]}``."""
    x64 = needs_x64(env_id)
    jax.config.update("jax_enable_x64", x64)
    check = same_as_host(env_id, min(sizes), check_steps, seed) if check_steps else None
    results = []
    for num_envs in sizes:
        closing: list = []
        try:
            calls = mode_calls(env_id, num_envs, steps, seed, num_threads, closing)
            first, seconds = timed_calls(modes, calls, repeats)
        finally:
            for env in closing:
                env.close()
        results.append((num_envs, first, seconds))
    return {"x64": x64, "check": check, "results": results}


def table_rows(env_id: str, steps: int, modes: tuple[str, ...], results: list) -> list[list]:
    """Rows of ``HEADERS`` from ``measure``'s results of ``env_id``."""
    rows = []
    for num_envs, first, seconds in results:
        sps = {m: [num_envs * steps / s for s in seconds[m]] for m in modes}
        base = statistics.median(sps["host"]) if "host" in sps else None
        for m in modes:
            med = statistics.median(sps[m])
            ratio = f"{med / base:.2f}x" if base else "-"
            rows.append([env_id, num_envs, steps, m, " ".join(f"{v:,.0f}" for v in sps[m]),
                         f"{med:,.0f}", ratio, f"{first[m]:.2f}"])
    return rows


def versions() -> str:
    """Python, jax, jaxlib and envpool versions, one line."""
    import envpool
    import jaxlib

    return (f"python {platform.python_version()}, jax {jax.__version__}, jaxlib "
            f"{jaxlib.__version__}, envpool {envpool.__version__}, {os.cpu_count()} cores")


def load() -> str:
    """The host's 1/5/15-minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    reason = xla_available()
    if reason:
        raise SystemExit(reason)
    modes, sizes = tuple(args.modes), tuple(args.num_envs)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    print(f"{now}; {versions()}; load before {load()}")
    rows = []
    for env_id in args.env_ids:
        out = in_fresh_process(None, measure, env_id, sizes, args.steps, args.repeats, modes,
                               args.seed, args.num_threads, args.check_steps)
        print(f"{env_id}: x64 {'on' if out['x64'] else 'off'}; compiled == host over "
              f"{args.check_steps} steps at {min(sizes)} envs: {out['check']}; load {load()}")
        rows += table_rows(env_id, args.steps, modes, out["results"])
    print(format_table(HEADERS, rows))
    print(f"load after {load()}")


if __name__ == "__main__":
    main()
