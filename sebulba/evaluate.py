"""Sebulba evaluation: ``python -m sebulba.evaluate --workdir=DIR --episodes=N [--greedy]
[--video=PATH] [--max_episode_steps=S]``.

Restores the latest checkpoint of the run in DIR on one device (local device 0) and plays N
full episodes with the run's host env (``sebulba.host_envs.make_host_env``: an EnvPool env,
or a jittable env served on a host CPU device), one synchronous pool of N envs, the jitted
policy on device 0, stepping until each env finished its first episode (only that one
counts; ``sebulba.episodes.play_first_episodes``). The pool is seeded
``rlcore.seeding.evaluate_host_seed(seed) + i``, outside every seed training gives its
envs; actions use the keys of ``rlcore.seeding.EvaluateRoots``. Returns are the env's
unclipped scores (a run may train on clipped rewards), and envs the score normaliser knows
also get their normalised score.

Frames for ``--video``: envs that render RGB frames themselves (EnvPool,
``envs.registry.render_overrides``) give their own; the others' observations are drawn
(``envs.registry.obs_frame_fn``).

Exit codes (``runtime.process.exits``): 0 done, 1 runtime failure, 2 bad argument (one
``error:`` line).
"""

from __future__ import annotations

import functools
from typing import Callable

import jax

from rlcore.networks import initial_core
from rlcore.seeding import EvaluateRoots, evaluate_host_seed
from runtime.commands import evaluation as ev
from runtime.config.env_args import evaluation_kwargs_of
from sebulba.episodes import make_host_policy, play_first_episodes
from sebulba.host_envs import make_host_env


def rgb_capture(env) -> Callable:
    """``obs -> env 0's RGB frame`` of a pool made with ``registry.render_overrides``
    (``envs.envpool.EnvPoolEnv.render``: ``[k, H, W, 3]`` uint8)."""
    return lambda obs: env.render(env_ids=[0])[0]


def restore(config, workdir: str, agent: int) -> ev.Restored:
    """The agent of the Sebulba run in ``workdir`` (``config``: its config.json's; a run
    trains one, so ``agent`` is 0), its config checked for one device, restored from the
    latest finished checkpoint on local device 0 (``runtime.commands.policy.restore_agent``:
    the params alone).

    Raises:
      EvalError: ``agent`` is not 0, or the checkpoint holds no params of this config's
        Sebulba train state, in one line.
    """
    from runtime.commands.policy import restore_agent
    from runtime.config.validation import DeviceCounts, validate
    from sebulba.mode import MODE

    ev.check_agent(agent, num_agents(config))
    checked = ev.one_device_config(config)
    validate(checked, MODE, DeviceCounts(devices=1, local_devices=1, processes=1))
    return restore_agent(config, workdir, agent, MODE.spec(config), "sebulba")


def evaluate(config, args: ev.EvalArgs) -> ev.Evaluation:
    """Restores the run of ``args.workdir`` on one device and plays ``args.episodes``."""
    from envs import registry
    from envs.render import label_frames

    restored = restore(config, args.workdir, args.agent)
    network, step = restored.network, restored.step
    library, name = registry.resolve(config.env_id, registry.SEBULBA)
    overrides = registry.time_limit_overrides(library, args.max_episode_steps)
    render = registry.render_overrides(config.env_id, registry.SEBULBA) if args.video else {}
    overrides = {**evaluation_kwargs_of(config), **overrides, **render}
    base_seed = evaluate_host_seed(config.seed)
    env = make_host_env(config.env_id, args.episodes, seed=base_seed,
                        num_threads=config.env_threads, **overrides)
    try:
        device = jax.local_devices()[0]
        policy = make_host_policy(restored.apply, device, args.greedy,
                                  EvaluateRoots.from_seed(config.seed).action,
                                  functools.partial(initial_core, network))
        capture = None
        if args.video:
            to_frame = registry.obs_frame_fn(config.env_id, registry.SEBULBA, env)
            capture = rgb_capture(env) if render else (lambda obs: to_frame(obs[0]))
        episodes = play_first_episodes(env, functools.partial(policy, restored.params),
                                       capture=capture, capture_final=not render)
    finally:
        env.close()
    header = [f"sebulba.evaluate: {config.env_id} ({library}:{name}), checkpoint at update "
              f"{step} of {args.workdir}",
              f"episodes drawn from seed {config.seed}, on env seeds and keys training "
              "never uses (see docs/evaluation.md)"]
    frames = label_frames(episodes.frames, episodes.frame_returns)
    return ev.Evaluation(results=episodes.results(), frames=frames, header=header)


def config_defaults():
    """The config an older run's ``config.json`` is read over
    (``runtime.commands.policy.saved_defaults``)."""
    from runtime.commands.policy import saved_defaults

    return saved_defaults()


def num_agents(config) -> int:
    """A Sebulba run trains one agent."""
    del config
    return 1


def main() -> None:
    """The command (``runtime.commands.evaluation.evaluate_command``): ``config_defaults``
    fills the fields an older ``config.json`` lacks; Atari scores are also given
    human-normalised."""
    from envs.atari_scores import human_normalized_scores

    ev.evaluate_command(evaluate, config_defaults, human_normalized_scores, num_agents)


if __name__ == "__main__":
    main()
