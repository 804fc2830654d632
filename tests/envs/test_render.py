"""envs.render: observation frames (sizes, the CartPole and Pendulum drawings, labelled bars,
plane colours, text strips)."""

from __future__ import annotations

import numpy as np
import pytest

from envs import render


def test_scale_nearest_reaches_min_side():
    image = np.arange(10 * 5 * 3, dtype=np.uint8).reshape(10, 5, 3)
    big = render.scale_nearest(image)
    assert big.shape == (320, 160, 3)  # factor 32: the short side (5) to >= 160
    np.testing.assert_array_equal(big[::32, ::32], image)
    assert render.scale_nearest(np.zeros((200, 300, 3), np.uint8)).shape == (200, 300, 3)


def test_cartpole_frame_follows_the_state():
    upright = render.cartpole_frame(np.asarray([0.0, 0.0, 0.0, 0.0]))
    right = render.cartpole_frame(np.asarray([1.0, 0.0, 0.0, 0.0]))
    leaning = render.cartpole_frame(np.asarray([0.0, 0.0, 0.5, 0.0]))
    assert upright.shape == render.CARTPOLE_FRAME + (3,) and upright.dtype == np.uint8

    def dark_columns(frame):  # the cart (dark gray), left and right edge
        cols = np.flatnonzero(np.all(frame == (40, 40, 40), axis=-1).any(axis=0))
        return cols.min(), cols.max()

    assert dark_columns(right)[0] > dark_columns(upright)[0]
    top = lambda f: np.flatnonzero(np.all(f == (204, 153, 102), axis=-1).any(axis=1)).min()
    assert top(leaning) > top(upright)  # a leaning pole's tip is lower


@pytest.mark.parametrize("shape, dtype, kwargs, expected", [
    ((4,), "float32", dict(name="CartPole-v1"), (240, 360, 3)),
    ((10, 10, 4), "float32", {}, (160, 160, 3)),       # MinAtar planes
    ((4, 84, 84), "uint8", {}, (168, 168, 3)),         # EnvPool frame stack
    ((50,), "float32", dict(grid=(10, 5)), (320, 160, 3)),  # Catch board
    ((3,), "float32", dict(name="Pendulum-v1"), (240, 240, 3)),
    ((6,), "float32", dict(name="Acrobot-v1"), (192, 160, 3)),  # bars, indices, caption
    ((9,), "float32", {}, (192, 216, 3)),               # bars, 24 px each
])
def test_obs_frame_fn_sizes(shape, dtype, kwargs, expected):
    rng = np.random.default_rng(0)
    obs = (rng.integers(0, 256, shape).astype(np.uint8) if dtype == "uint8"
           else rng.random(shape).astype(np.float32))
    frame = render.obs_frame_fn(shape, dtype, **kwargs)(obs)
    assert frame.shape == expected and frame.dtype == np.uint8
    assert frame.min() < frame.max()  # not a blank image


def test_planes_frame_colours():
    obs = np.zeros((2, 2, 3), np.float32)
    obs[0, 0, 0] = obs[1, 1, 2] = 1.0
    frame = render.planes_frame(obs)
    np.testing.assert_array_equal(frame[0, 0], render.PLANE_COLOURS[0])
    np.testing.assert_array_equal(frame[1, 1], render.PLANE_COLOURS[2])
    np.testing.assert_array_equal(frame[0, 1], (0, 0, 0))


def test_pendulum_frame_follows_the_angle():
    rod = lambda f: np.argwhere(np.all(f == (204, 77, 77), axis=-1))
    up = rod(render.pendulum_frame(np.asarray([1.0, 0.0, 0.0])))  # theta 0: upright
    down = rod(render.pendulum_frame(np.asarray([-1.0, 0.0, 0.0])))
    left = rod(render.pendulum_frame(np.asarray([0.0, 1.0, 0.0])))  # +pi/2: to the left
    mid = render.PENDULUM_FRAME / 2
    assert up[:, 0].min() < mid - 60 and up[:, 0].max() <= mid + 12
    assert down[:, 0].max() > mid + 60 and down[:, 0].min() >= mid - 12
    assert left[:, 1].min() < mid - 60 and left[:, 1].max() <= mid + 12


def test_caption_and_labelled_bars_carry_text():
    frame = np.full((40, 160, 3), 255, np.uint8)
    top = render.caption(frame, "step 3/10   return 2.0")
    assert top.shape == (40 + render.CAPTION_HEIGHT, 160, 3)
    strip = top[:render.CAPTION_HEIGHT]
    assert (strip > 200).any() and (strip < 50).any()  # white text on the dark strip
    assert render.caption(frame, "x" * 200).shape == top.shape  # long text: smaller font
    bars = render.labelled_bars_frame(np.zeros(4))
    indices = bars[-render.CAPTION_HEIGHT:]
    assert (indices < 128).any()  # the index digits


def test_the_last_frame_is_captioned_as_the_end():
    """One frame more than returns: the observation the episode ended on, ``end``
    (docs/design.md, "Evaluation")."""
    frames = [np.zeros((8, 8, 3), np.uint8)] * 3
    labelled = render.label_frames(frames, [1.0, 0.934])
    assert len(labelled) == 3
    assert not np.array_equal(labelled[1], labelled[2])  # "step 2/2" and "end" differ
    assert np.array_equal(labelled[2], render.caption(frames[2], "end   return 0.934"))
    assert np.array_equal(labelled[0], render.caption(frames[0], "step 1/2   return 1.00"))


def test_an_own_env_gives_its_own_frames(monkeypatch):
    """An env of the user's own with ``obs_frame`` draws the video in both architectures,
    through the adapters (docs/extending.md, "Your own env")."""
    import os

    from envs import registry

    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "..", "..",
                                             "examples"))
    env_id = "gridworld.env:GridWorld"
    env = registry.make_jax_env(env_id)
    obs = np.zeros(env.spec.obs_shape, np.float32)
    obs[0, 0, 0] = obs[2, 3, 1] = 1.0
    frame = registry.obs_frame_fn(env_id, registry.ANAKIN, env)(obs)
    assert frame.shape == (80, 80, 3) and frame.dtype == np.uint8
    assert tuple(frame[0, 0]) == (0, 0, 255) and tuple(frame[2 * 16, 3 * 16]) == (0, 255, 0)
    from rlcore.seeding import host_env_root

    host = registry.make_host_env(env_id, 1, seed=0, key_root=host_env_root(0))
    try:
        hosted = registry.obs_frame_fn(env_id, registry.SEBULBA, host)(obs)
    finally:
        host.close()
    np.testing.assert_array_equal(hosted, frame)
