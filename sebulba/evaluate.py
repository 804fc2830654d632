"""Sebulba evaluation: ``python -m sebulba.evaluate --workdir=DIR --episodes=N [--greedy]
[--video=PATH] [--max_episode_steps=S]``.

Restores the latest checkpoint of the run in DIR on one device (local device 0) and plays N
full episodes with the run's host env (``envs.registry.make_host_env``: EnvPool, or a
jittable env served on a host CPU device), one synchronous pool of N envs, the jitted policy
on device 0, stepping until each env finished its first episode (only that one counts).
EnvPool envs are seeded ``runtime.evaluation.host_eval_seed(seed) + i``, outside every
seed training gives its envs; actions use the keys of ``runtime.evaluation.EvalRoots``.
Returns are EnvPool's unclipped game scores (Atari trains on clipped rewards), and Atari
runs also get the human-normalised score.

Frames for ``--video``: EnvPool renders RGB (``render_mode="rgb_array"``: Atari's 210x160
screen, CartPole's 400x600 drawing); host-served jittable envs draw their observations
(``runtime.evaluation.obs_frame_fn``).

Exit codes: 0 done, 1 runtime failure, 2 bad argument (one ``error:`` line).
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import numpy as np

from runtime import evaluation as ev


def make_policy(apply_fn: Callable, params, action_root, device, greedy: bool):
    """``(obs [N, ...] numpy, t) -> actions [N]`` numpy, jitted on ``device``; keys
    ``per_env_keys(action_root, i, t)``."""
    fn = jax.jit(functools.partial(ev.policy_actions, apply_fn), static_argnames="greedy")
    params, action_root = jax.device_put((params, action_root), device)

    def policy(obs: np.ndarray, t: int) -> np.ndarray:
        obs, t = jax.device_put((obs, np.int32(t)), device)
        return np.asarray(fn(params, obs, action_root, t, greedy=greedy))

    return policy


def play_episodes(env, policy: Callable, capture: Callable | None = None
                  ) -> tuple[ev.EpisodeResults, list]:
    """The first episode of each env of a HostEnv pool.

    Args:
      env: a HostEnv of N envs (same-step auto-reset, episode statistics in ``env.stats``).
      policy: ``(obs [N, ...], t) -> actions [N]``.
      capture: ``obs [N, ...] -> frame`` of env 0, called on the obs of each of its first
        episode's actions (None: no frames).

    Returns:
      ``(EpisodeResults [N], frames)``.
    """
    obs = env.reset().obs
    n = env.num_envs
    finished = np.zeros(n, bool)
    returns, lengths = np.zeros(n, np.float64), np.zeros(n, np.int64)
    frames = [] if capture is None else [capture(obs)]
    t = 0
    while not finished.all():
        ts = env.step(policy(obs, t))
        obs, t = ts.obs, t + 1
        ended = (ts.terminated | ts.truncated) & ~finished
        returns[ended] = env.stats.completed_return[ended]
        lengths[ended] = env.stats.completed_length[ended]
        finished |= ended
        if capture is not None and not finished[0]:
            frames.append(capture(obs))
    return ev.EpisodeResults(returns=returns, lengths=lengths), frames


def rgb_capture(env) -> Callable:
    """``obs -> env 0's RGB frame`` of an EnvPool pool made with ``render_mode="rgb_array"``.

    ``envs.envpool.EnvPoolEnv.render`` (EnvPool >= 1.2: ``[k, H, W, 3]`` uint8).
    """
    return lambda obs: env.render(env_ids=[0])[0]


def evaluate(config, args: ev.EvalArgs) -> ev.Evaluation:
    """Restores the run of ``args.workdir`` on one device and plays ``args.episodes``."""
    from envs import registry
    from runtime.config import DeviceCounts, validate
    from sebulba.train import MODE, SebulbaRun

    if args.agent != 0:
        raise ev.EvalError(f"--agent: a Sebulba run has one agent (0), got {args.agent}")
    config = ev.one_device_config(config)
    validate(config, MODE, DeviceCounts(devices=1, local_devices=1, processes=1))
    run = SebulbaRun(config)
    state, step = ev.restore_latest(args.workdir, run.init_state(), "sebulba")
    library, name = registry.resolve(config.env_id, registry.SEBULBA)
    overrides = ev.time_limit_overrides(library, args.max_episode_steps)
    renders = bool(args.video) and library == registry.ENVPOOL
    if renders:
        overrides["render_mode"] = "rgb_array"
    base_seed = ev.host_eval_seed(config.seed)
    env = registry.make_host_env(config.env_id, args.episodes, seed=base_seed,
                                 num_threads=config.env_threads, **overrides)
    try:
        device = jax.local_devices()[0]
        policy = make_policy(run.network.apply, state.params,
                             ev.EvalRoots.from_seed(config.seed).action, device, args.greedy)
        capture = None
        if args.video:
            to_frame = ev.obs_frame_fn(env.spec.obs_shape, env.spec.obs_dtype, name)
            capture = rgb_capture(env) if renders else (lambda obs: to_frame(obs[0]))
        results, frames = play_episodes(env, policy, capture)
    finally:
        env.close()
    header = [f"sebulba.evaluate: {config.env_id} ({library}:{name}), checkpoint at update "
              f"{step} of {args.workdir}",
              f"eval seeds: env i seeded {base_seed} + i (training's are below "
              f"{ev.HOST_EVAL_SEED_BASE}, in-training evaluation's below "
              f"{ev.HOST_EVALUATE_SEED_BASE}), action keys of fold_in(key({config.seed}), "
              f"{ev.EVAL_STREAM})"]
    return ev.Evaluation(results=results, frames=frames, header=header)


if __name__ == "__main__":
    ev.main(evaluate)
