"""The offline evaluation driver: what ``python -m anakin.evaluate`` and ``sebulba.evaluate``
share.

Both entry points take ``--workdir=DIR --episodes=N [--greedy] [--video=PATH]`` (plus
``--agent=K`` and ``--max_episode_steps=S``), rebuild the run's config from
``DIR/config.json``, restore the latest checkpoint of ``DIR/checkpoints`` on one device and
play N full episodes, then print the statistics of the raw returns and lengths (and, where
the mode passes a score normaliser that knows the env, the normalised score). This module
holds the mode-free parts: argument checks, config and checkpoint loading, the report and
the command-line driver (an agent's params are restored by ``runtime.commands.policy.
restore_agent``, which both modes' evaluate commands and ``runtime.load_policy`` call and
which hands back a ``Restored``); the statistics are
``runtime.commands.stats``, the videos ``runtime.commands.video``, the actions
``rlcore.policy``, the frames and the env knowledge ``envs``.

Seed rule (``rlcore.seeding``; evaluation never uses a key or env seed that training uses):

- jittable envs (Anakin): the keys of ``EvaluateRoots.from_seed(seed)``, i.e. ``base =
  fold_in(key(seed), EVALUATE_STREAM)`` with ``EVALUATE_STREAM = 1_000_003``; env ``i`` is
  reset with ``per_env_keys(fold_in(base, 0), i)``, and step ``t`` draws its env key from
  ``per_env_keys(fold_in(base, 1), i, t)`` and its action key from ``per_env_keys(fold_in(
  base, 2), i, t)``. Training folds ``key(seed)`` with 0..3 (``rlcore.seeding.Roots``),
  ``HOST_ENV_STREAM`` (host-served jittable envs) and ``TRAIN_EVAL_STREAM`` (in-training
  evaluation), never with ``EVALUATE_STREAM``. For agent ``K`` of a ``num_seeds``/sweep run,
  ``seed`` is that agent's own seed.
- host envs (Sebulba): env ``i`` of the evaluation pool gets the integer seed
  ``evaluate_host_seed(seed) + i = HOST_EVALUATE_SEED_BASE + seed % HOST_EVAL_SEED_SPAN + i``,
  in ``[2**31 - 2**22, 2**31)``: above in-training evaluation's seeds
  (``[2**31 - 2**23, 2**31 - 2**22)``), so a checkpoint chosen by its in-training score is
  scored here on other episodes. Training's host seeds are below ``2**31 - 2**24 + num_envs``
  (``rlcore.seeding.host_env_seed`` is taken modulo ``2**31 - 2**24``; a fresh run uses
  ``seed + i`` with ``seed < 2**30``), so they never meet for fewer than ``2**23`` training
  envs; a host-served jittable env keyed from this integer seed never shares a root with
  training either. Actions are sampled with the keys of the jittable rule above.

With ``--greedy`` the action is the policy distribution's mode (the argmax of a
categorical, the mean of a Gaussian); otherwise it is sampled from the policy.
Only the first episode of each of the N envs counts.

Frames (``--video``, mp4 or gif by the extension): the frame each action of env 0's first
episode was taken on; envs that render RGB frames themselves give theirs, the others'
observations are drawn (``envs.registry.obs_frame_fn``). Every frame carries a strip with
its step and env 0's return after that step's action (``envs.render.label_frames``, called
by the architecture's evaluate command).

Bad arguments raise ``EvalError``; the driver (``runtime.process.exits``) prints it as one
``error: ...`` line and exits with code 2 (1 for a runtime failure, with its traceback).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import numbers
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import ml_collections
import numpy as np

from rlcore.errors import ConfigError
from rlcore.seeding import MAX_EVAL_ENVS
from runtime.commands.stats import EpisodeResults, result_rows, results_table
from runtime.commands.video import VIDEO_EXTENSIONS, write_video
from runtime.process import exits, failure
from runtime.process import flags as flag_parser
from runtime.process.paths import output_file_problem
from runtime.run import files as run_files

# A score normaliser: ``(env_id, returns [N]) -> scores [N]``, or None for an env it does not
# know (the modes pass Atari's human-normalised score, ``envs.atari_scores``).
Normalizer = Callable[[str, np.ndarray], np.ndarray | None]


class EvalError(Exception):
    """A bad evaluation argument: ``"--flag: what is wrong"`` (exit code 2)."""


@dataclasses.dataclass(frozen=True)
class Restored:
    """One agent of a run, restored on one device (local device 0): what
    ``runtime.commands.policy.restore_agent`` hands the evaluate commands and
    ``runtime.load_policy`` (docs/design.md, "Evaluation").

    Attributes:
      network: the agent's network (``runtime.config.agent.network``).
      apply: the network's apply whose distribution is the one the run's rollouts
        sampled from at update ``step`` (``rlcore.policy.acting_apply`` of the algorithm's
        ``act``: epsilon-greedy for a Q-learner); its mode is the greedy action.
      params: that agent's params, without an agent axis.
      spec: the EnvSpec the network was built for (``obs_shape``, ``action_shape``).
      step: the update of the checkpoint restored.
      seed: the agent's own seed (of a ``num_seeds`` or sweep run: that agent's).
      agent: ``"agent 1 of 4 (seed=1)"``: which agent, for a header line.
    """

    network: Any
    apply: Any
    params: Any
    spec: Any
    step: int
    seed: int
    agent: str


# How an evaluate command reports its errors (any other is a traceback and exit 1).
EVALUATE_ERRORS = (exits.OneLine((EvalError, ConfigError), "error", exits.EXIT_BAD_INPUT),)


# ----------------------------------------------------------------------------- arguments


@dataclasses.dataclass(frozen=True)
class EvalArgs:
    """The command-line arguments of an evaluation.

    Attributes:
      workdir: the run directory.
      episodes: episodes to play (one per env).
      greedy: argmax actions instead of samples.
      video: mp4 or gif path for env 0's first episode ("" for none).
      agent: which agent of a multi-agent (``num_seeds`` or sweep) Anakin run.
      max_episode_steps: time-limit override of the env (0: the env's own).
    """

    workdir: str
    episodes: int
    greedy: bool = False
    video: str = ""
    agent: int = 0
    max_episode_steps: int = 0


def check_args(args: EvalArgs) -> None:
    """Raises ``EvalError("--flag: ...")`` for a bad argument, before anything compiles:
    the values first, then the run directory (config.json and a checkpoint)."""
    if not 1 <= args.episodes <= MAX_EVAL_ENVS:
        raise EvalError(f"--episodes: must be in [1, {MAX_EVAL_ENVS}], got {args.episodes}")
    check_agent_index(args.agent)
    if args.max_episode_steps < 0:
        raise EvalError(f"--max_episode_steps: must be >= 0 (0: the env's own limit), got "
                        f"{args.max_episode_steps}")
    if args.video:
        problem = output_file_problem(args.video, VIDEO_EXTENSIONS)
        if problem is not None:
            raise EvalError(f"--video: {problem}")
        if importlib.util.find_spec("imageio") is None:
            raise EvalError("--video: needs the 'video' extra, which is not installed: "
                            "pip install -e '.[video]'")
    check_workdir(args.workdir)


def check_workdir(workdir: str) -> None:
    """Raises ``EvalError("--workdir: ...")`` unless ``workdir`` is a run directory: one
    with a ``config.json`` and a finished checkpoint (listed without opening orbax's
    manager, which would create the checkpoint directory)."""
    if not workdir:
        raise EvalError("--workdir: required (the run directory)")
    if not os.path.isdir(workdir):
        raise EvalError(f"--workdir: no such run directory: {workdir}")
    if not os.path.isfile(run_files.config_path(workdir)):
        raise EvalError(f"--workdir: {workdir} has no config.json (not a run directory)")
    from runtime.run.checkpoint import Checkpointer  # imports orbax: only once the values pass

    if not Checkpointer.finished_steps(workdir):
        raise EvalError(f"--workdir: no checkpoint in {run_files.checkpoints_dir(workdir)}")


def agents_text(n: int) -> str:
    """``"6 agents (0..5)"``: how many agents a run has and the valid ``--agent`` values."""
    return "1 agent (0)" if n == 1 else f"{n} agents (0..{n - 1})"


def check_agent_index(agent: int) -> None:
    """Raises ``EvalError("--agent: ...")`` unless ``agent`` is an int >= 0 (which agents a
    run has, ``check_agent`` checks once its config is read)."""
    if isinstance(agent, bool) or not isinstance(agent, numbers.Integral):
        raise EvalError(f"--agent: must be an int, got {agent!r}")
    if agent < 0:
        raise EvalError(f"--agent: must be >= 0, got {agent}")


def check_agent(agent: int, num_agents: int) -> None:
    """Raises ``EvalError("--agent: ...")`` unless ``agent`` is one of the run's
    ``num_agents``; ``run`` checks it from ``config.json``, before the mode's modules load
    and a checkpoint is restored."""
    if agent >= num_agents:
        raise EvalError(f"--agent: the run has {agents_text(num_agents)}, got {agent}")


# ----------------------------------------------------------------------------- run directory


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples configs use (``actor_device_ids``, sweep values)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def _merge(defaults: dict, saved: Mapping) -> dict:
    """``defaults`` with ``saved``'s values (recursing into sub-dicts); saved keys win."""
    out = dict(defaults)
    for k, v in saved.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(
            out.get(k), Mapping) else v
    return out


def load_config(workdir: str,
                defaults: ml_collections.ConfigDict | None = None) -> ml_collections.ConfigDict:
    """The run's config rebuilt from ``workdir/config.json``.

    Args:
      workdir: run directory.
      defaults: a config whose fields fill in those that ``config.json`` lacks (a run
        written before a field existed); saved values win. The entry points pass
        ``configs/base.py``'s (this module imports no config).

    Returns:
      A ConfigDict (JSON lists become tuples).

    Raises:
      EvalError: ``config.json`` is not a JSON object (damaged or not a run's), in one line.
    """
    path = run_files.config_path(workdir)
    try:
        with open(path) as f:
            saved = _tuples(json.load(f))
    except ValueError as e:
        raise EvalError(f"--workdir: {path} is not valid JSON ({e})") from None
    if not isinstance(saved, dict):
        raise EvalError(f"--workdir: {path} holds a {type(saved).__name__}, not a run's "
                        "config (a JSON object)")
    from runtime.config.saved import check_version, upgrade_saved  # an older run's fields

    try:
        check_version(saved, path)
    except ConfigError as e:
        raise EvalError(f"--workdir: {e}") from None
    base = defaults.to_dict() if defaults is not None else {}
    return ml_collections.ConfigDict(_merge(base, upgrade_saved(saved)))


def one_device_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A copy of ``config`` for a plain restore in one process on local device 0."""
    from runtime.config.fields import ONE_DEVICE  # the device-layout fields and their values

    config = ml_collections.ConfigDict(config.to_dict())
    for field, value in ONE_DEVICE.items():
        config[field] = value
    return config


LIVE_RETRIES = 3  # reads of a newer step when a live run deleted the one being read


def restore_latest(workdir: str, like, mode: str, at: tuple[str, ...] | None = None,
                   code: tuple[str, ...] = ()):
    """The latest checkpoint of ``workdir`` restored into ``like``'s structure and
    shardings; returns ``(state, step)``. Only finished checkpoints are read, and nothing is
    written: a run may be training in ``workdir`` meanwhile.

    Args:
      workdir: run directory.
      like: a fresh train state of the run (``init_state()``), or with ``at`` the part of
        one at key path ``at`` (e.g. the params, ``("learner", "params")``): only that part
        is read (``Checkpointer.restore_part``).
      mode: ``"anakin"`` or ``"sebulba"``, for the error message.
      code: the user's code the run names (``runtime.run.checkpoint.own_code``), which the
        error blames where there is some.

    Raises:
      EvalError: the checkpoint did not restore into ``like`` (damaged, or not a train
        state of this mode and config, e.g. a run of the other architecture), in one line
        naming its path.
    """
    from runtime.run.checkpoint import (
        Checkpointer,
        DamagedCheckpoint,
        IncompatibleCheckpoint,
        unfit_cause,
    )

    ckpt = _vanishing_steps_retried(lambda: Checkpointer(workdir))
    try:
        step = ckpt.latest_step()
        if step is None:
            raise EvalError(f"--workdir: no checkpoint in {ckpt.directory}")
        for _ in range(LIVE_RETRIES):
            try:
                return ckpt.restore_checked(like, step, at), step
            except IncompatibleCheckpoint as e:
                cause = unfit_cause(code) or ("trained by the other architecture, or by a "
                                              "version this one cannot read?")
                raise EvalError(f"--workdir: checkpoint {e.path} is not a {mode} train state "
                                f"of this config ({e.reason}; {cause})") from None
            except DamagedCheckpoint as e:
                # A run training in ``workdir`` may have deleted this step (max_to_keep)
                # while it was read: then the newest finished one is read instead.
                _vanishing_steps_retried(ckpt.reload)
                newest = ckpt.latest_step()
                if newest is None or (newest == step and step in ckpt.steps()):
                    raise EvalError(
                        f"--workdir: checkpoint {e.path} did not restore as a {mode} train "
                        f"state of this config (damaged, or trained by the other "
                        f"architecture?): {e.reason}") from None
                step = newest
        raise EvalError(f"--workdir: the checkpoints in {ckpt.directory} changed under "
                        f"{LIVE_RETRIES} reads in a row (a run saving very often?); try again")
    finally:
        ckpt.close()


def _vanishing_steps_retried(read):
    """``read()`` (open or reload a checkpoint manager, which lists every step's files),
    tried again when a step vanished while it was listed: a run training in the workdir
    deletes its oldest checkpoint as it saves one (max_to_keep). Raises the last
    FileNotFoundError after ``LIVE_RETRIES`` tries."""
    for attempt in range(LIVE_RETRIES):
        try:
            return read()
        except FileNotFoundError:
            if attempt == LIVE_RETRIES - 1:
                raise


# ----------------------------------------------------------------------------- driver


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What a mode's evaluation hands the driver.

    Attributes:
      results: the episodes' returns and lengths.
      frames: env 0's first episode, uint8 ``[H, W, 3]`` each (empty without ``--video``).
      header: lines describing the run, checkpoint, agent and seeds.
    """

    results: EpisodeResults
    frames: list
    header: list


def define_flags() -> None:
    """The evaluation flags (absl), shared by both entry points. absl's ``--help`` lists only
    the main module's key flags, and these are this module's: ``evaluate_command`` makes them the
    program's after calling this."""
    from absl import flags

    flags.DEFINE_string("workdir", None,
                        "Run directory to evaluate (config.json and checkpoints/); required.")
    flags.DEFINE_integer("episodes", 10, "Episodes to play (the first of one env each).")
    flags.DEFINE_boolean("greedy", False, "Argmax actions instead of sampling the policy.")
    flags.DEFINE_string("video", "", "Write env 0's first episode here (.mp4 or .gif); a "
                        "relative path is inside --workdir.")
    flags.DEFINE_integer("agent", 0, "Agent of a num_seeds or sweep run, 0..N-1 (a Sebulba run "
                         "has one: 0).")
    flags.DEFINE_integer("max_episode_steps", 0, "Time-limit override (0: the env's own).")


def parse_flags(argv):
    """absl flags parser for ``app.run`` (``runtime.process.flags.parse_flags``): a bad flag or an
    unexpected argument is one ``error:`` line and exit 2; library logging stays at WARNING
    unless ``--verbosity`` is given."""
    return flag_parser.parse_flags(argv, _flag_problem, _no_arguments)


def _no_arguments(rest) -> None:
    if len(rest) > 1:
        raise flag_parser.UsageError(f"unexpected arguments {rest[1:]}")


def _flag_problem(e: Exception, argv) -> str | None:
    """The one ``error:`` line of a bad command line; None for any other failure."""
    from absl import flags

    del argv
    if isinstance(e, flag_parser.UsageError):
        return f"error: {e}"
    if isinstance(e, flags.Error):
        return f"error: {' '.join(str(e).split())}"
    return None


def args_from_flags() -> EvalArgs:
    from absl import flags

    f = flags.FLAGS
    workdir = f.workdir or ""
    return EvalArgs(workdir=workdir, episodes=f.episodes, greedy=f.greedy,
                    video=video_path(workdir, f.video), agent=f.agent,
                    max_episode_steps=f.max_episode_steps)


def video_path(workdir: str, video: str) -> str:
    """Where ``--video=video`` is written: a relative path inside the run directory (beside
    its ``curve.png``, and moved with it by ``--fresh``), an absolute one as it is."""
    if not video or os.path.isabs(video) or not workdir:
        return video
    return os.path.join(workdir, video)


def report(config, args: EvalArgs, evaluation: Evaluation,
           normalize: Normalizer | None = None) -> str:
    """The printed summary: header lines, then the statistics table (with the normalised
    score where ``normalize`` knows the env)."""
    mode = "greedy (the mode)" if args.greedy else "stochastic (sampled)"
    returns = evaluation.results.returns
    normalized = normalize(config.env_id, returns) if normalize is not None else None
    lines = [*evaluation.header,
             f"{len(returns)} episodes, {mode} actions",
             results_table(result_rows(evaluation.results, normalized))]
    return "\n".join(lines)


# The agents of a run's config (``(config) -> int``): the mode's, for ``check_agent``.
NumAgents = Callable[[ml_collections.ConfigDict], int]


def run(evaluate: Callable[[ml_collections.ConfigDict, EvalArgs], Evaluation],
        defaults: Callable[[], ml_collections.ConfigDict] | None = None,
        normalize: Normalizer | None = None, num_agents: NumAgents | None = None) -> None:
    """The whole command: checks the flags, loads the config (``defaults()`` filling the
    fields an older ``config.json`` lacks) and checks ``--agent`` against its
    ``num_agents(config)``, runs ``evaluate``, prints the report, writes the video; exits 0,
    1 (runtime failure) or 2 (bad argument) through ``runtime.process.exits``."""
    from runtime.config.xla_flags import apply_xla_cpu_flags

    args = args_from_flags()

    def body():
        check_args(args)
        config = load_config(args.workdir, defaults() if defaults else None)
        if num_agents is not None:
            check_agent(args.agent, num_agents(config))
        apply_xla_cpu_flags(config, refuse_cache=False)  # before JAX starts its backends
        evaluation = evaluate(config, args)
        print(report(config, args, evaluation, normalize))
        if args.video:
            frames = evaluation.frames
            write_video(args.video, frames)
            print(f"video: {args.video} ({len(frames)} frames of "
                  f"{frames[0].shape[1]}x{frames[0].shape[0]}, step and return on each)")

    # No details file in the workdir (a run may be training there): the temporary directory.
    exits.run_command(body, EVALUATE_ERRORS, details=failure.Details(None))


def main(evaluate: Callable[[ml_collections.ConfigDict, EvalArgs], Evaluation],
         defaults: Callable[[], ml_collections.ConfigDict] | None = None,
         normalize: Normalizer | None = None, num_agents: NumAgents | None = None) -> None:
    """``python -m <mode>.evaluate``: parses the flags (``define_flags``, called by the entry
    point), then ``run(evaluate, defaults, normalize, num_agents)`` (the entry point passes
    ``configs.base.get_config``, the env's score normaliser and its agent count)."""
    from absl import app

    def _main(argv):
        del argv
        run(evaluate, defaults, normalize, num_agents)

    app.run(_main, flags_parser=parse_flags)


def evaluate_command(evaluate: Callable[[ml_collections.ConfigDict, EvalArgs], Evaluation],
                     defaults: Callable[[], ml_collections.ConfigDict] | None = None,
                     normalize: Normalizer | None = None,
                     num_agents: NumAgents | None = None) -> None:
    """``python -m <mode>.evaluate`` whole: defines the evaluation flags (``define_flags``),
    makes them key flags of the program (absl's ``--help`` lists those of ``sys.argv[0]``,
    the main module, only), then ``main(evaluate, defaults, normalize, num_agents)``."""
    from absl import flags

    define_flags()
    for flag in flags.FLAGS.get_key_flags_for_module(__name__):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    main(evaluate, defaults, normalize, num_agents)
