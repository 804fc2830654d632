"""Evaluating a trained run: what ``python -m anakin.evaluate`` and ``sebulba.evaluate`` share.

Both entry points take ``--workdir=DIR --episodes=N [--greedy] [--video=PATH]`` (plus
``--agent=K`` and ``--max_episode_steps=S``), rebuild the run's config from
``DIR/config.json``, restore the latest checkpoint of ``DIR/checkpoints`` on one device and
play N full episodes, then print the statistics of the raw returns and lengths (and the
human-normalised score for the 57 Atari games). This module holds the mode-free parts: the
seed rule, argument checks, config and checkpoint loading, action selection, statistics,
frames and video writing, and the command-line driver. It imports no env library.

Seed rule (evaluation never uses a key or env seed that training uses):

- jittable envs (Anakin): ``base = fold_in(key(seed), EVAL_STREAM)`` with
  ``EVAL_STREAM = rlcore.seeding.EVALUATE_STREAM = 1_000_003``; env ``i`` is reset with
  ``per_env_keys(fold_in(base, 0), i)``,
  and step ``t`` draws its env key from ``per_env_keys(fold_in(base, 1), i, t)`` and its
  action key from ``per_env_keys(fold_in(base, 2), i, t)``. Training folds ``key(seed)``
  with 0..3 (``rlcore.seeding.Roots``), 4 (host-served jittable envs) and a small
  in-training evaluation stream (``rlcore.seeding``), never with ``EVAL_STREAM``. For agent
  ``K`` of a ``num_seeds``/sweep run, ``seed`` is that agent's own seed.
- host envs (Sebulba): env ``i`` of the evaluation pool gets the integer seed
  ``host_eval_seed(seed) + i = HOST_EVALUATE_SEED_BASE + seed % HOST_EVAL_SEED_SPAN + i``,
  in ``[2**31 - 2**22, 2**31)``: above in-training evaluation's seeds
  (``[2**31 - 2**23, 2**31 - 2**22)``), so a checkpoint chosen by its in-training score is
  scored here on other episodes. Training's host seeds are below ``2**31 - 2**24 + num_envs``
  (``rlcore.seeding.host_env_seed`` is taken modulo ``2**31 - 2**24``; a fresh run uses
  ``seed + i`` with ``seed < 2**30``), so they never meet for fewer than ``2**23`` training
  envs; a host-served jittable env keyed from this integer seed never shares a root with
  training either. Actions are sampled with the keys of the jittable rule above.

With ``--greedy`` the action is the argmax of the logits; otherwise it is sampled from the
policy. Only the first episode of each of the N envs counts.

Frames (``--video``, mp4 or gif by the extension): the frame each action of env 0's first
episode was taken on. Envs that render RGB (EnvPool) give their own frames; otherwise
``obs_frame_fn`` draws the observation (CartPole: a cart-and-pole picture; image and grid
observations: scaled up nearest-neighbour to at least ``MIN_FRAME_SIDE`` pixels; other
vectors: bars).

Bad arguments raise ``EvalError``; the driver prints it as one ``error: ...`` line and exits
with code 2 (1 for a runtime failure, with its traceback).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import struct

from rlcore.errors import ConfigError
from rlcore.seeding import EVALUATE_STREAM as EVAL_STREAM
from rlcore.seeding import (
    HOST_EVAL_SEED_BASE,
    HOST_EVAL_SEED_SPAN,
    HOST_EVALUATE_SEED_BASE,
    per_env_keys,
)
from rlcore.seeding import MAX_EVAL_ENVS as MAX_EPISODES
from rlcore.seeding import evaluate_host_seed as host_eval_seed
from runtime import run_files

# The seeding rule of evaluation lives in rlcore.seeding with the others (names kept here).
__all__ = ["EVAL_STREAM", "HOST_EVAL_SEED_BASE", "HOST_EVAL_SEED_SPAN", "HOST_EVALUATE_SEED_BASE",
           "MAX_EPISODES", "host_eval_seed"]
VIDEO_EXTENSIONS = (".mp4", ".gif")
VIDEO_FPS = 30
MIN_FRAME_SIDE = 160  # observation frames are scaled up to at least this many pixels
CARTPOLE_FRAME = (240, 360)  # (height, width) of the drawn CartPole frames
# The time-limit argument of each env library (``--max_episode_steps``).
TIME_LIMIT_FIELD = {"gymnax": "max_steps_in_episode", "own": "max_steps",
                    "envpool": "max_episode_steps"}


class EvalError(Exception):
    """A bad evaluation argument: ``"--flag: what is wrong"`` (exit code 2)."""


# ----------------------------------------------------------------------------- seeds


@struct.dataclass
class EvalRoots:
    """PRNG roots of an evaluation: env resets, env steps, actions (see the module rule)."""

    reset: jax.Array
    env: jax.Array
    action: jax.Array

    @classmethod
    def from_seed(cls, seed: int) -> "EvalRoots":
        """``fold_in(fold_in(key(seed), EVAL_STREAM), j)`` for j = 0, 1, 2."""
        base = jax.random.fold_in(jax.random.key(seed), EVAL_STREAM)
        return cls(*(jax.random.fold_in(base, j) for j in range(3)))


def select_actions(logits: jax.Array, keys: jax.Array, greedy: bool) -> jax.Array:
    """Actions of a batch: argmax (``greedy``) or one categorical sample per row.

    Args:
      logits: ``[N, A]``.
      keys: ``[N]`` PRNG keys (unused when greedy).
      greedy: static.

    Returns:
      int32 ``[N]``.
    """
    if greedy:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    return jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)


def policy_actions(apply_fn: Callable, params, obs: jax.Array, action_root: jax.Array,
                   t: jax.Array, greedy: bool) -> jax.Array:
    """Actions of step ``t`` for envs ``0 .. N-1``, keys ``per_env_keys(action_root, i, t)``.

    Args:
      apply_fn: ``(params, obs [N, ...]) -> (logits [N, A], value [N])``.
      params: network parameters.
      obs: ``[N, *obs_shape]``.
      action_root: ``EvalRoots.action``.
      t: ``[]`` int step index.
      greedy: static; argmax instead of sampling.

    Returns:
      int32 ``[N]``.
    """
    logits, _ = apply_fn(params, obs)
    ids = jnp.arange(obs.shape[0], dtype=jnp.int32)
    return select_actions(logits, per_env_keys(action_root, ids, t), greedy)


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


def checkpoint_dir(workdir: str) -> str:
    return run_files.checkpoints_dir(workdir)


def checkpoint_steps(workdir: str) -> list[int]:
    """The finished checkpoint steps in ``workdir/checkpoints`` (orbax step folders)."""
    directory = checkpoint_dir(workdir)
    if not os.path.isdir(directory):
        return []
    return sorted(int(d) for d in os.listdir(directory)
                  if d.isdigit() and os.path.isdir(os.path.join(directory, d)))


def check_args(args: EvalArgs) -> None:
    """Raises ``EvalError("--flag: ...")`` for a bad argument, before anything compiles:
    the values first, then the run directory (config.json and a checkpoint)."""
    if not 1 <= args.episodes <= MAX_EPISODES:
        raise EvalError(f"--episodes: must be in [1, {MAX_EPISODES}], got {args.episodes}")
    if args.agent < 0:
        raise EvalError(f"--agent: must be >= 0, got {args.agent}")
    if args.max_episode_steps < 0:
        raise EvalError(f"--max_episode_steps: must be >= 0 (0: the env's own limit), got "
                        f"{args.max_episode_steps}")
    if args.video:
        ext = os.path.splitext(args.video)[1].lower()
        if ext not in VIDEO_EXTENSIONS:
            raise EvalError(f"--video: extension must be one of {', '.join(VIDEO_EXTENSIONS)}, "
                            f"got {args.video!r}")
        parent = os.path.dirname(os.path.abspath(args.video))
        if not os.path.isdir(parent):
            raise EvalError(f"--video: no such directory: {parent}")
    workdir = args.workdir
    if not workdir:
        raise EvalError("--workdir: required (the run directory)")
    if not os.path.isdir(workdir):
        raise EvalError(f"--workdir: no such run directory: {workdir}")
    if not os.path.isfile(run_files.config_path(workdir)):
        raise EvalError(f"--workdir: {workdir} has no config.json (not a run directory)")
    if not checkpoint_steps(workdir):
        raise EvalError(f"--workdir: no checkpoint in {checkpoint_dir(workdir)}")


def time_limit_overrides(library: str, max_episode_steps: int) -> dict[str, int]:
    """The env constructor's time-limit argument for ``library`` (``{}`` when 0)."""
    if not max_episode_steps:
        return {}
    return {TIME_LIMIT_FIELD[library]: int(max_episode_steps)}


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
        written before a field existed); saved values win.

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
    base = defaults.to_dict() if defaults is not None else {}
    return ml_collections.ConfigDict(_merge(base, saved))


def one_device_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A copy of ``config`` for a plain restore in one process on local device 0."""
    from runtime.fields import ONE_DEVICE  # the device-layout fields and their values

    config = ml_collections.ConfigDict(config.to_dict())
    for field, value in ONE_DEVICE.items():
        config[field] = value
    return config


def restore_latest(workdir: str, like, mode: str):
    """The latest checkpoint of ``workdir`` restored into ``like``'s structure and
    shardings; returns ``(state, step)``.

    Args:
      workdir: run directory.
      like: a fresh train state of the run (``init_state()``).
      mode: ``"anakin"`` or ``"sebulba"``, for the error message.

    Raises:
      EvalError: the checkpoint did not restore into ``like`` (damaged, or not a train
        state of this mode and config, e.g. a run of the other architecture), in one line
        naming its path.
    """
    from runtime.checkpoint import Checkpointer, DamagedCheckpoint

    ckpt = Checkpointer(workdir)
    try:
        step = ckpt.latest_step()
        if step is None:
            raise EvalError(f"--workdir: no checkpoint in {checkpoint_dir(workdir)}")
        try:
            return ckpt.restore_checked(like, step), step
        except DamagedCheckpoint as e:
            raise EvalError(f"--workdir: checkpoint {e.path} did not restore as a {mode} "
                            f"train state of this config (damaged, or trained by the other "
                            f"architecture?): {e.reason}") from None
    finally:
        ckpt.close()


# ----------------------------------------------------------------------------- statistics


@dataclasses.dataclass(frozen=True)
class EpisodeResults:
    """The first episode of each evaluation env.

    Attributes:
      returns: ``[N]`` float64 raw (unclipped) returns.
      lengths: ``[N]`` int64 lengths in agent steps.
    """

    returns: np.ndarray
    lengths: np.ndarray


STAT_NAMES = ("mean", "ci95", "median", "std", "min", "max")


def t_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """``(mean, half-width)`` of the Student-t interval of the mean of ``values [N]``:
    ``t_{(1+confidence)/2, N-1} * s / sqrt(N)`` with the sample std ``s`` (ddof 1). The
    half-width is nan for N < 2 and 0 when all values are equal."""
    x = np.asarray(values, np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("t_interval: no values")
    m = float(x.mean())
    if x.size < 2:
        return m, math.nan
    from scipy.stats import t

    sem = float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, float(t.ppf((1.0 + confidence) / 2.0, x.size - 1)) * sem


def summarize(values) -> dict[str, float]:
    """``{mean, ci95, median, std, min, max}`` of ``values [N]`` (N >= 1): ``ci95`` is the
    half-width of the 95% Student-t interval of the mean, ``std`` the sample standard
    deviation (ddof 1); both nan for one value."""
    x = np.asarray(values, np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("summarize: no values")
    mean, half = t_interval(x)
    std = float(x.std(ddof=1)) if x.size > 1 else math.nan
    return {"mean": mean, "ci95": half, "median": float(np.median(x)), "std": std,
            "min": float(x.min()), "max": float(x.max())}


def _cell(value: float) -> str:
    return f"{'-':>12}" if math.isnan(value) else f"{value:>12.3f}"


def human_normalized_scores(env_id: str, returns) -> np.ndarray | None:
    """Human-normalised scores ``[N]`` of Atari returns; None for other envs (or where
    ``runtime.atari_scores`` is missing)."""
    try:
        from runtime import atari_scores
    except ImportError:
        return None
    if atari_scores.game_name(env_id) is None:
        return None
    return np.asarray(atari_scores.human_normalized(env_id, np.asarray(returns, np.float64)))


def results_table(rows: Mapping[str, Sequence[float]]) -> str:
    """A small table: one line per ``rows`` entry (label -> values), columns STAT_NAMES
    (``-`` where a statistic needs two values)."""
    width = max(len(label) for label in rows)
    lines = [" " * width + "".join(f"{name:>12}" for name in STAT_NAMES)]
    for label, values in rows.items():
        stats = summarize(values)
        lines.append(f"{label:<{width}}" + "".join(_cell(stats[n]) for n in STAT_NAMES))
    return "\n".join(lines)


def parse_table(text: str) -> dict[str, dict[str, float]]:
    """Reads a ``results_table`` back out of printed text: ``{label: {stat: value}}``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split() == list(STAT_NAMES))
    rows = {}
    for line in lines[start + 1:]:
        label, *cells = line.split() or [""]
        try:
            values = [math.nan if c == "-" else float(c) for c in cells]
        except ValueError:
            break
        if len(values) != len(STAT_NAMES):
            break
        rows[label] = dict(zip(STAT_NAMES, values))
    return rows


def result_rows(env_id: str, results: EpisodeResults) -> dict[str, np.ndarray]:
    """The table rows: ``return``, ``length`` and, for Atari, ``human-normalised``."""
    rows = {"return": results.returns, "length": results.lengths}
    normalized = human_normalized_scores(env_id, results.returns)
    if normalized is not None:
        rows["human-normalised"] = normalized
    return rows


# ----------------------------------------------------------------------------- frames


def to_rgb(image: np.ndarray) -> np.ndarray:
    """``[H, W]`` or ``[H, W, 1|3|4]`` to uint8 ``[H, W, 3]`` (floats are taken in [0, 1])."""
    x = np.asarray(image)
    if x.dtype != np.uint8:
        x = (np.clip(x, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    if x.ndim == 2:
        x = x[..., None]
    if x.shape[-1] == 1:
        x = np.repeat(x, 3, axis=-1)
    return np.ascontiguousarray(x[..., :3])


def scale_nearest(image: np.ndarray, min_side: int = MIN_FRAME_SIDE) -> np.ndarray:
    """Nearest-neighbour upscaling by the smallest integer factor ``k`` that makes the
    shorter side at least ``min_side``: ``[H, W, 3] -> [k H, k W, 3]`` (k >= 1)."""
    k = max(1, math.ceil(min_side / min(image.shape[:2])))
    return np.repeat(np.repeat(image, k, axis=0), k, axis=1)


def _fill_line(frame, p0, p1, half_width, colour) -> None:
    """Draws a thick segment from ``p0`` to ``p1`` (``(row, col)`` floats) into ``frame``."""
    h, w = frame.shape[:2]
    n = int(max(abs(p1[0] - p0[0]), abs(p1[1] - p0[1]))) + 1
    for s in np.linspace(0.0, 1.0, 2 * n):
        r, c = p0[0] + s * (p1[0] - p0[0]), p0[1] + s * (p1[1] - p0[1])
        r0, r1 = max(int(r - half_width), 0), min(int(r + half_width) + 1, h)
        c0, c1 = max(int(c - half_width), 0), min(int(c + half_width) + 1, w)
        frame[r0:r1, c0:c1] = colour


def cartpole_frame(obs, size: tuple[int, int] = CARTPOLE_FRAME,
                   x_limit: float = 2.4) -> np.ndarray:
    """A picture of CartPole from its observation ``[4]`` = (x, x_dot, theta, theta_dot).

    The track spans ``[-x_limit, x_limit]`` (where the episode ends) over the width; the
    pole (length 1, as gym/gymnax draw a half-length of 0.5 doubled) leans by ``theta``
    (positive: to the right).

    Returns:
      uint8 ``[H, W, 3]`` with ``(H, W) = size``.
    """
    h, w = size
    frame = np.full((h, w, 3), 255, np.uint8)
    scale = w / (2 * x_limit * 1.1)
    track_row = int(h * 0.75)
    frame[track_row:track_row + 2] = (90, 90, 90)
    x, theta = float(obs[0]), float(obs[2])
    centre = w / 2 + x * scale
    cart_w, cart_h = int(0.5 * scale), int(0.3 * scale)
    c0, c1 = int(centre - cart_w / 2), int(centre + cart_w / 2)
    frame[track_row - cart_h:track_row, max(c0, 0):max(min(c1, w), 0)] = (40, 40, 40)
    pivot = (track_row - cart_h, centre)
    tip = (pivot[0] - scale * math.cos(theta), pivot[1] + scale * math.sin(theta))
    _fill_line(frame, pivot, tip, max(1.0, 0.04 * scale), (204, 153, 102))
    return frame


def bars_frame(obs, height: int = MIN_FRAME_SIDE, bar: int = 24) -> np.ndarray:
    """Bars for a vector observation ``[n]``: bar ``j`` rises (blue) or falls (red) from
    the middle line by ``tanh(obs[j])`` of half the height.

    Returns:
      uint8 ``[height, max(height, n * bar), 3]`` (width rounded up to even).
    """
    x = np.tanh(np.asarray(obs, np.float64).reshape(-1))
    w = max(height, x.size * bar)
    w += w % 2
    frame = np.full((height, w, 3), 255, np.uint8)
    mid = height // 2
    frame[mid] = (90, 90, 90)
    step = w / x.size
    for j, v in enumerate(x):
        c0, c1 = int(j * step + 2), int((j + 1) * step - 2)
        extent = int(round(abs(v) * (mid - 4)))
        rows = slice(mid - extent, mid) if v >= 0 else slice(mid + 1, mid + 1 + extent)
        frame[rows, c0:c1] = (60, 110, 200) if v >= 0 else (200, 70, 60)
    return frame


# A colour per object plane of grid observations (MinAtar: one plane per object kind).
PLANE_COLOURS = np.array([
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
], np.float64)


def planes_frame(obs) -> np.ndarray:
    """An ``[H, W, C]`` stack of object planes (values in [0, 1]) as uint8 ``[H, W, 3]``:
    plane ``c`` in its own colour on black, the later plane on top where they overlap."""
    x = np.clip(np.asarray(obs, np.float64), 0.0, 1.0)
    out = np.zeros(x.shape[:2] + (3,))
    for c in range(x.shape[-1]):
        colour = PLANE_COLOURS[c % len(PLANE_COLOURS)]
        a = x[..., c:c + 1]
        out = out * (1 - a) + colour * a
    return out.astype(np.uint8)


def gray_frame(image) -> np.ndarray:
    """A 2-D array as gray uint8 ``[H, W, 3]``: uint8 as is, others min-max scaled."""
    x = np.asarray(image)
    if x.dtype != np.uint8:
        x = x.astype(np.float64)
        lo, hi = float(x.min()), float(x.max())
        x = (x - lo) / (hi - lo) if hi > lo else np.clip(x, 0.0, 1.0)
    return to_rgb(x)


def obs_frame_fn(obs_shape: Sequence[int], obs_dtype: str, name: str = "",
                 grid: tuple[int, int] | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """How one observation becomes an RGB frame (for envs that do not render).

    - ``[C, H, W]`` uint8 (EnvPool frame stacks): the newest frame, gray;
    - ``[H, W, C]`` (MinAtar planes): ``planes_frame``; ``[H, W]``: ``gray_frame``;
    - ``[n]`` with ``grid=(rows, cols)`` and ``n == rows * cols`` (Catch): the board, gray;
    - ``[4]`` of a ``CartPole*`` env: ``cartpole_frame``;
    - any other vector: ``bars_frame``.

    Images and grids are scaled up with ``scale_nearest`` to at least ``MIN_FRAME_SIDE``.

    Returns:
      ``obs [*obs_shape] -> uint8 [H, W, 3]`` (the same size for every obs).
    """
    shape = tuple(obs_shape)
    if len(shape) == 3 and obs_dtype == "uint8":
        return lambda obs: scale_nearest(gray_frame(np.asarray(obs)[-1]))
    if len(shape) == 3:
        return lambda obs: scale_nearest(planes_frame(obs))
    if len(shape) == 2:
        return lambda obs: scale_nearest(gray_frame(obs))
    n = int(np.prod(shape))
    if grid is not None and grid[0] * grid[1] == n:
        return lambda obs: scale_nearest(to_rgb(np.asarray(obs, np.float64).reshape(grid)))
    if name.startswith("CartPole") and n == 4:
        return lambda obs: cartpole_frame(np.asarray(obs).reshape(-1))
    return bars_frame


def even_frame(frame: np.ndarray) -> np.ndarray:
    """Pads an odd height or width with one black row/column (video codecs need even)."""
    h, w = frame.shape[:2]
    return np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)))


@contextlib.contextmanager
def _quiet_fork():
    """imageio-ffmpeg starts ffmpeg with fork + exec; JAX warns about every fork, but the
    child runs no Python before its exec, so that warning is silenced here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called",
                                category=RuntimeWarning)
        yield


def write_video(path: str, frames: Sequence[np.ndarray], fps: int = VIDEO_FPS) -> None:
    """Writes uint8 ``[H, W, 3]`` frames as an mp4 (H.264 via imageio-ffmpeg) or a looping
    gif (Pillow), chosen by ``path``'s extension; odd sizes are padded to even."""
    import imageio.v2 as iio2
    import imageio.v3 as iio3

    if not frames:
        raise ValueError("write_video: no frames")
    frames = [even_frame(np.asarray(f, np.uint8)) for f in frames]
    ext = os.path.splitext(path)[1].lower()
    if ext == ".gif":  # Pillow merges identical consecutive frames (keeping the timing)
        iio3.imwrite(path, np.stack(frames), extension=".gif",
                     duration=1000.0 / fps, loop=0)
        return
    if ext != ".mp4":
        raise ValueError(f"write_video: unsupported extension {ext!r}")
    with _quiet_fork():
        with iio2.get_writer(path, format="FFMPEG", mode="I", fps=fps,
                             macro_block_size=2) as writer:
            for frame in frames:
                writer.append_data(frame)


def read_video(path: str) -> np.ndarray:
    """Decodes an mp4 or gif (e.g. one ``write_video`` wrote): uint8 ``[N, H, W, 3]``."""
    import imageio.v2 as iio2
    import imageio.v3 as iio3

    if os.path.splitext(path)[1].lower() == ".gif":
        return np.asarray(iio3.imread(path, index=None))[..., :3]
    with _quiet_fork():
        with iio2.get_reader(path, format="FFMPEG") as reader:
            return np.stack([frame for frame in reader.iter_data()])


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
    """The evaluation flags (absl), shared by both entry points."""
    from absl import flags

    flags.DEFINE_string("workdir", None, "Run directory (config.json and checkpoints/).")
    flags.DEFINE_integer("episodes", 10, "Episodes to play (the first of one env each).")
    flags.DEFINE_boolean("greedy", False, "Argmax actions instead of sampling the policy.")
    flags.DEFINE_string("video", "", "Write env 0's first episode here (.mp4 or .gif).")
    flags.DEFINE_integer("agent", 0, "Agent of a num_seeds/sweep Anakin run to evaluate.")
    flags.DEFINE_integer("max_episode_steps", 0, "Time-limit override (0: the env's own).")


def parse_flags(argv):
    """absl flags parser for ``app.run``: a bad flag is one ``error:`` line and exit 2;
    library logging stays at WARNING unless ``--verbosity`` is given."""
    from absl import flags, logging

    try:
        rest = flags.FLAGS(argv)
    except flags.Error as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
    if len(rest) > 1:
        print(f"error: unexpected arguments {rest[1:]}", file=sys.stderr)
        sys.exit(2)
    if not flags.FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)
    return rest


def args_from_flags() -> EvalArgs:
    from absl import flags

    f = flags.FLAGS
    return EvalArgs(workdir=f.workdir or "", episodes=f.episodes, greedy=f.greedy,
                    video=f.video, agent=f.agent, max_episode_steps=f.max_episode_steps)


def report(config, args: EvalArgs, evaluation: Evaluation) -> str:
    """The printed summary: header lines, then the statistics table."""
    mode = "greedy (argmax)" if args.greedy else "stochastic (sampled)"
    lines = [*evaluation.header,
             f"{len(evaluation.results.returns)} episodes, {mode} actions",
             results_table(result_rows(config.env_id, evaluation.results))]
    return "\n".join(lines)


def run(evaluate: Callable[[ml_collections.ConfigDict, EvalArgs], Evaluation],
        defaults: Callable[[], ml_collections.ConfigDict] | None = None) -> None:
    """The whole command: checks the flags, loads the config, runs ``evaluate``, prints the
    report, writes the video; exits 0, 1 (runtime failure) or 2 (bad argument)."""
    from runtime.entry import apply_xla_cpu_flags

    args = args_from_flags()
    try:
        check_args(args)
        config = load_config(args.workdir, defaults() if defaults else None)
        apply_xla_cpu_flags(config)  # before JAX starts its backends
        evaluation = evaluate(config, args)
    except (EvalError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception:  # noqa: BLE001 - a runtime failure: traceback, exit 1
        traceback.print_exc()
        sys.exit(1)
    print(report(config, args, evaluation))
    if args.video:
        write_video(args.video, evaluation.frames)
        print(f"video: {args.video} ({len(evaluation.frames)} frames of "
              f"{evaluation.frames[0].shape[1]}x{evaluation.frames[0].shape[0]})")
    sys.exit(0)


def main(evaluate: Callable[[ml_collections.ConfigDict, EvalArgs], Evaluation]) -> None:
    """``python -m <mode>.evaluate``: flags, then ``run(evaluate)`` with ``configs/base.py``
    filling the fields an older ``config.json`` lacks."""
    from absl import app

    def _main(argv):
        del argv
        from configs import base

        run(evaluate, base.get_config)

    define_flags()
    app.run(_main, flags_parser=parse_flags)
