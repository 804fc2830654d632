"""Evaluation videos: uint8 ``[H, W, 3]`` frames to an mp4 (H.264, imageio-ffmpeg) or a
looping gif (Pillow); the evaluate commands label each frame with its step and return
(``envs.render.label_frames``).

A gif holds every frame only if no two consecutive frames are identical: Pillow's gif writer
merges such frames into one (adding up their durations), so an episode whose picture does
not change (a pole held still) lost frames. The step on every frame keeps them apart."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Sequence

import numpy as np

VIDEO_EXTENSIONS = (".mp4", ".gif")
VIDEO_FPS = 30


def even_frame(frame: np.ndarray) -> np.ndarray:
    """Pads an odd height or width with one black row/column (video codecs need even)."""
    h, w = frame.shape[:2]
    return np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)))


@contextlib.contextmanager
def quiet_fork():
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
    with quiet_fork():
        with iio2.get_writer(path, format="FFMPEG", mode="I", fps=fps,
                             macro_block_size=2) as writer:
            for frame in frames:
                writer.append_data(frame)
