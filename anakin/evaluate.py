"""Anakin evaluation: ``python -m anakin.evaluate --workdir=DIR --episodes=N [--greedy]
[--video=PATH] [--agent=K] [--max_episode_steps=S]``.

Restores the latest checkpoint of the run in DIR on one device and plays N full episodes
with the run's jittable env (``anakin.episodes.play_episodes``: a batch of N envs, stepped
in jitted chunks until each env finished its first episode; only that one counts). Seeds
follow ``rlcore.seeding.EvaluateRoots`` (keys of ``fold_in(key(seed), EVALUATE_STREAM)``, a
stream training never uses). With ``num_seeds > 1`` or a sweep, ``--agent=K`` picks the
agent (default 0) and its own seed. Frames for ``--video`` are drawn from env 0's
observations (``envs.registry.obs_frame_fn``), except a Brax env's, which Brax's renderer
draws from env 0's states where the host gives it an OpenGL context (``envs.brax``).

Exit codes (``runtime.process.exits``): 0 done, 1 runtime failure, 2 bad argument (one
``error:`` line).
"""

from __future__ import annotations

import functools
import sys

from runtime.commands import evaluation as ev
from runtime.config.sweep import agent_env_kwargs

# The modules that start JAX's work (``jax``, the episode player, the trainer's) load in the
# functions below: a bad argument is refused before they do (``runtime.commands.evaluation.run``).


def restore(config, workdir: str, agent: int) -> ev.Restored:
    """Agent ``agent`` of the Anakin run in ``workdir`` (``config``: its config.json's),
    its config checked for one device, restored from the latest finished checkpoint on
    local device 0 (``runtime.commands.policy.restore_agent``: the params alone).

    Raises:
      EvalError: the checkpoint holds no params of this config's Anakin train state, or
        ``agent`` is not one of the run's agents, in one line.
    """
    from anakin.mode import MODE
    from runtime.commands.policy import restore_agent
    from runtime.config.validation import DeviceCounts, validate

    checked = ev.one_device_config(config)
    validate(checked, MODE, DeviceCounts(devices=1, local_devices=1, processes=1))
    return restore_agent(config, workdir, agent, MODE.spec(config), "anakin")


def evaluate(config, args: ev.EvalArgs) -> ev.Evaluation:
    """Restores the run of ``args.workdir`` on one device and plays ``args.episodes``."""
    from anakin.episodes import play_episodes
    from envs import registry, render
    from rlcore.networks import initial_core
    from rlcore.seeding import EvaluateRoots

    if args.video and registry.resolve(config.env_id, registry.ANAKIN).library == registry.BRAX:
        from envs.brax import prefer_egl

        prefer_egl()  # before Brax loads MuJoCo (validation does): its renderer draws
    restored = restore(config, args.workdir, args.agent)
    network, seed = restored.network, restored.seed
    library, name = registry.resolve(config.env_id, registry.ANAKIN)
    overrides = registry.time_limit_overrides(library, args.max_episode_steps)
    env = registry.make_jax_env(config.env_id,
                                **{**agent_env_kwargs(config, args.agent), **overrides})
    renders = args.video and _renders(env)
    results, seen0, return0 = play_episodes(
        env, restored.apply, restored.params, EvaluateRoots.from_seed(seed), args.episodes,
        args.greedy, functools.partial(initial_core, network),
        env.frame_state if renders else None)
    frames = []
    if renders:
        frames = env.render_frames(seen0)
    elif args.video:
        to_frame = registry.obs_frame_fn(config.env_id, registry.ANAKIN, env)
        frames = [to_frame(o) for o in seen0]
    header = [f"anakin.evaluate: {config.env_id} ({library}:{name}), checkpoint at update "
              f"{restored.step} of {args.workdir}, {restored.agent}",
              f"episodes drawn from seed {seed}, on keys training never uses (see "
              "docs/evaluation.md)"]
    return ev.Evaluation(results=results, frames=render.label_frames(frames, list(return0)),
                         header=header)


def _renders(env) -> bool:
    """Whether ``env`` draws its own frames here (Brax's renderer, where this host has an
    OpenGL context for it); otherwise its observations are drawn, and it is said why."""
    if not hasattr(env, "render_frames"):
        return False
    problem = env.render_problem()
    if problem is not None:
        print(f"video: the env's renderer does not work here ({problem}); drawing its "
              "observations instead", file=sys.stderr)
    return problem is None


def config_defaults():
    """The config an older run's ``config.json`` is read over
    (``runtime.commands.policy.saved_defaults``)."""
    from runtime.commands.policy import saved_defaults

    return saved_defaults()


def num_agents(config) -> int:
    """The agents of a run's config (``runtime.config.sweep.num_agents``: seeds x variants)."""
    from runtime.config.sweep import num_agents as agents

    return agents(config)


def main() -> None:
    """The command (``runtime.commands.evaluation.evaluate_command``): ``config_defaults``
    fills the fields an older ``config.json`` lacks; Atari scores are also given
    human-normalised; ``--agent`` is checked against ``num_agents``."""
    from envs.atari_scores import human_normalized_scores

    ev.evaluate_command(evaluate, config_defaults, human_normalized_scores, num_agents)


if __name__ == "__main__":
    main()
