"""Frames of observations, for the videos of envs that do not render RGB themselves.

``obs_frame_fn(obs_shape, obs_dtype, name, grid)`` says how one observation becomes a uint8
``[H, W, 3]`` picture: CartPole: a cart-and-pole drawing; Pendulum: the pendulum; image and
grid observations: scaled up nearest-neighbour to at least ``MIN_FRAME_SIDE`` pixels; other
vectors (EnvPool's MuJoCo envs, and Brax's where its renderer cannot run: ``envs.brax``):
labelled bars. ``envs.registry.obs_frame_fn`` answers it for an env id, so the modes
never look at env names. Numpy, and Pillow for text (``caption``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from rlcore.numbers import readable

MIN_FRAME_SIDE = 160  # observation frames are scaled up to at least this many pixels
CARTPOLE_FRAME = (240, 360)  # (height, width) of the drawn CartPole frames
PENDULUM_FRAME = 240  # side of the drawn Pendulum frames
CAPTION_HEIGHT = 16  # pixels of a text strip (``caption``)


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


def pendulum_frame(obs, side: int = PENDULUM_FRAME) -> np.ndarray:
    """A picture of Pendulum from its observation ``[3]`` = (cos theta, sin theta,
    theta_dot): theta 0 is upright, positive counter-clockwise (as gym draws it).

    Returns:
      uint8 ``[side, side, 3]``.
    """
    frame = np.full((side, side, 3), 255, np.uint8)
    theta = math.atan2(float(obs[1]), float(obs[0]))
    pivot = (side / 2, side / 2)
    length = 0.38 * side
    tip = (pivot[0] - length * math.cos(theta), pivot[1] - length * math.sin(theta))
    _fill_line(frame, pivot, tip, 0.025 * side, (204, 77, 77))
    _fill_line(frame, pivot, pivot, 0.02 * side, (40, 40, 40))
    return frame


@functools.cache
def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def caption(frame: np.ndarray, text: str, below: bool = False,
            height: int = CAPTION_HEIGHT) -> np.ndarray:
    """``frame`` with a dark strip of ``height`` pixels above it (``below``: under it)
    holding ``text`` in white, the font shrunk until the text fits the width.

    Returns:
      uint8 ``[H + height, W, 3]``.
    """
    from PIL import Image, ImageDraw

    w = frame.shape[1]
    strip = Image.new("RGB", (w, height), (30, 30, 30))
    draw = ImageDraw.Draw(strip)
    size = height - 3
    while size > 6 and draw.textlength(text, font=_font(size)) > w - 6:
        size -= 1
    draw.text((3, height / 2), text, fill=(255, 255, 255), font=_font(size), anchor="lm")
    parts = [np.asarray(strip, np.uint8), np.asarray(frame, np.uint8)]
    return np.concatenate(parts[::-1] if below else parts, axis=0)


def bar_indices(n: int, width: int, height: int = CAPTION_HEIGHT) -> np.ndarray:
    """A strip ``[height, width, 3]`` with ``j`` centred under bar ``j`` of ``n``."""
    from PIL import Image, ImageDraw

    strip = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(strip)
    step = width / n
    for j in range(n):
        draw.text(((j + 0.5) * step, height / 2), str(j), fill=(60, 60, 60),
                  font=_font(min(height - 4, max(int(step * 0.6), 6))), anchor="mm")
    return np.asarray(strip, np.uint8)


def labelled_bars_frame(obs) -> np.ndarray:
    """``bars_frame`` with the entry index under every bar and what the bars are above."""
    bars = bars_frame(obs)
    n = int(np.asarray(obs).size)
    framed = np.concatenate([bars, bar_indices(n, bars.shape[1])], axis=0)
    return caption(framed, "observation j: tanh(obs[j]), blue > 0, red < 0")


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
    - ``[4]`` of a ``CartPole*`` env: ``cartpole_frame``; ``[3]`` of a ``Pendulum*`` env:
      ``pendulum_frame``;
    - any other vector: ``labelled_bars_frame``.

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
    if name.startswith("Pendulum") and n == 3:
        return lambda obs: pendulum_frame(np.asarray(obs).reshape(-1))
    return labelled_bars_frame


def label_frames(frames: Sequence[np.ndarray], returns: Sequence[float] = ()) -> list:
    """``frames`` with a strip above each: ``step k/L  return R``, R the return after step
    ``k``'s action (``returns[k - 1]``; left out where not known); one frame more than
    ``returns`` (the observation the episode ended on, after its last action) is captioned
    ``end  return R``, R the episode's return.

    Returns:
      uint8 ``[H + CAPTION_HEIGHT, W, 3]`` frames, as many as ``frames``.
    """
    final = bool(returns) and len(frames) == len(returns) + 1
    n = len(frames) - final

    def text(k: int) -> str:
        if k == n:
            return f"end   return {readable(returns[-1])}"
        return f"step {k + 1}/{n}" + (f"   return {readable(returns[k])}"
                                      if k < len(returns) else "")

    return [caption(f, text(k)) for k, f in enumerate(frames)]
