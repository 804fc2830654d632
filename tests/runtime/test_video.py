"""runtime.commands.video: mp4 and gif round trips; labelled frames keep every frame of an episode
whose picture does not change (Pillow's gif writer merges identical frames)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.render import label_frames
from runtime.commands.video import write_video
from tests.helpers import read_video


@pytest.mark.parametrize("ext", [".mp4", ".gif"])
def test_write_video_round_trip(ext, tmp_path):
    """12 distinct frames of an odd size come back as 12 frames, padded to even."""
    frames = [np.full((21, 30, 3), 20 * i, np.uint8) for i in range(12)]
    path = str(tmp_path / f"v{ext}")
    write_video(path, frames)
    back = read_video(path)
    assert back.shape == (12, 22, 30, 3) and back.dtype == np.uint8
    np.testing.assert_allclose(back[5, :21].mean(), 100, atol=3)


def test_a_still_episode_keeps_every_frame_in_a_gif(tmp_path):
    still = [np.full((40, 160, 3), 128, np.uint8)] * 12
    path = str(tmp_path / "still.gif")
    write_video(path, still)
    assert len(read_video(path)) == 1  # Pillow merged them: why frames are labelled
    labelled = label_frames(still, [float(k) for k in range(1, 13)])
    write_video(path, labelled)
    back = read_video(path)
    assert back.shape[0] == 12 and back.shape[1:3] == labelled[0].shape[:2]
