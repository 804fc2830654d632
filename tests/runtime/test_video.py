"""runtime.video: mp4 and gif round trips."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.video import write_video
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
