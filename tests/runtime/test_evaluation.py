"""runtime.evaluation: the eval seed rule, argument checks, statistics, frames and videos."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlcore.seeding import MAX_EVAL_ENVS, Roots, eval_host_seed, host_env_seed, per_env_keys
from runtime import evaluation as ev

# ----------------------------------------------------------------------------- seeds


def _key_set(keys) -> set[tuple[int, ...]]:
    data = np.asarray(jax.random.key_data(keys)).reshape(-1, 2)
    return {tuple(int(v) for v in row) for row in data}


@pytest.mark.parametrize("seed", [0, 7])
def test_eval_keys_are_not_training_keys(seed):
    """The eval roots and the per-env keys of resets, steps and actions share no key with
    training's roots (of this seed and the next ones: ``num_seeds`` agents) or with the
    per-env keys training derives from them."""
    ids = jnp.arange(16, dtype=jnp.int32)
    training = set()
    for s in range(seed, seed + 4):  # agents seed .. seed+3 of a num_seeds run
        base = jax.random.key(s)
        folds = jax.vmap(lambda j, b=base: jax.random.fold_in(b, j))(jnp.arange(8))
        training |= _key_set(folds)  # the roots (0..3), host-env stream and spare folds
        roots = Roots.from_seed(s)
        for root in (roots.init, roots.action, roots.env, roots.update):
            training |= _key_set(per_env_keys(root, ids))  # resets
            for u in range(3):
                for t in range(3):
                    training |= _key_set(per_env_keys(root, ids, u, t))
    eval_roots = ev.EvalRoots.from_seed(seed)
    evaluation = _key_set(jnp.stack([eval_roots.reset, eval_roots.env, eval_roots.action]))
    evaluation |= _key_set(per_env_keys(eval_roots.reset, ids))
    for t in range(3):
        for root in (eval_roots.env, eval_roots.action):
            evaluation |= _key_set(per_env_keys(root, ids, t))
    assert len(evaluation) == 3 + 16 * 7
    assert not evaluation & training


def test_eval_resets_differ_from_training_resets():
    """CartPole's first observations: evaluation's envs do not start where training's do."""
    from envs import registry

    env = registry.make_jax_env("CartPole-v1")
    ids = jnp.arange(8, dtype=jnp.int32)
    _, train_ts = jax.vmap(env.reset)(per_env_keys(Roots.from_seed(0).env, ids))
    _, eval_ts = jax.vmap(env.reset)(per_env_keys(ev.EvalRoots.from_seed(0).reset, ids))
    train_obs, eval_obs = np.asarray(train_ts.obs), np.asarray(eval_ts.obs)
    assert not np.any(np.all(train_obs[:, None] == eval_obs[None], axis=-1))


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**30 - 1])
def test_host_eval_seeds_are_outside_training_seeds(seed):
    """Training's host seeds (fresh: seed + i; resumed: host_env_seed(seed, u) + i) stay
    below the eval base for up to 2**23 envs; eval seeds stay int32 for MAX_EPISODES."""
    num_envs = 2**23
    for u in [0, 1, 7, 999, 10**6, 2**31 - 1]:
        assert host_env_seed(seed, u) + num_envs - 1 < ev.HOST_EVAL_SEED_BASE
    base = ev.host_eval_seed(seed)
    assert ev.HOST_EVAL_SEED_BASE <= base
    assert base + ev.MAX_EPISODES - 1 < 2**31
    assert ev.host_eval_seed(seed) != ev.host_eval_seed(seed + 1)
    # ... and above every seed of in-training evaluation pools (any seed, any pool size).
    assert eval_host_seed(2**31 - 1) + MAX_EVAL_ENVS - 1 < ev.HOST_EVALUATE_SEED_BASE <= base
    assert max(eval_host_seed(s) for s in range(ev.HOST_EVAL_SEED_SPAN - 3,
                                                 ev.HOST_EVAL_SEED_SPAN + 3)) \
        + MAX_EVAL_ENVS - 1 < ev.HOST_EVALUATE_SEED_BASE


def test_select_actions_greedy_and_sampled():
    logits = jnp.asarray([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]])
    keys = jax.random.split(jax.random.key(0), 2)
    np.testing.assert_array_equal(ev.select_actions(logits, keys, greedy=True), [1, 0])
    many = jnp.tile(jnp.asarray([[0.0, 0.0]]), (2000, 1))
    sampled = ev.select_actions(many, jax.random.split(jax.random.key(1), 2000), greedy=False)
    assert sampled.dtype == jnp.int32 and 0.4 < float(jnp.mean(sampled)) < 0.6


# ----------------------------------------------------------------------------- arguments


def _rundir(tmp_path, checkpoint=True):
    (tmp_path / "config.json").write_text(json.dumps({"seed": 0, "env_id": "CartPole-v1"}))
    if checkpoint:
        (tmp_path / "checkpoints" / "3").mkdir(parents=True)
    return str(tmp_path)


@pytest.mark.parametrize("change, flag", [
    (dict(episodes=0), "--episodes"),
    (dict(episodes=ev.MAX_EPISODES + 1), "--episodes"),
    (dict(agent=-1), "--agent"),
    (dict(max_episode_steps=-5), "--max_episode_steps"),
    (dict(video="out.avi"), "--video"),
    (dict(video="/no/such/dir/out.mp4"), "--video"),
    (dict(workdir=""), "--workdir"),
    (dict(workdir="/no/such/run"), "--workdir"),
])
def test_check_args_rejects(change, flag, tmp_path):
    args = ev.EvalArgs(**{**dict(workdir=_rundir(tmp_path), episodes=3), **change})
    with pytest.raises(ev.EvalError, match=f"^{flag}: "):
        ev.check_args(args)


def test_check_args_needs_config_and_checkpoint(tmp_path):
    with pytest.raises(ev.EvalError, match="no config.json"):
        ev.check_args(ev.EvalArgs(workdir=str(tmp_path), episodes=1))
    with pytest.raises(ev.EvalError, match="no checkpoint"):
        ev.check_args(ev.EvalArgs(workdir=_rundir(tmp_path, checkpoint=False), episodes=1))
    ev.check_args(ev.EvalArgs(workdir=_rundir(tmp_path), episodes=1, video="x.GIF"))


def test_load_config_restores_tuples_and_fills_defaults(tmp_path):
    from configs import base
    from runtime.metrics import write_config

    config = base.get_config()
    config.learner_device_ids = (1, 2)
    config.sweep.learning_rate = (1e-3, 3e-4)
    write_config(str(tmp_path), config)
    saved = json.loads((tmp_path / "config.json").read_text())
    del saved["clip_rho"]  # a run written before the field existed
    (tmp_path / "config.json").write_text(json.dumps(saved))
    loaded = ev.load_config(str(tmp_path), base.get_config())
    assert loaded.learner_device_ids == (1, 2)
    assert loaded.sweep.learning_rate == (1e-3, 3e-4)
    assert loaded.clip_rho == base.get_config().clip_rho
    assert loaded.to_dict() == config.to_dict()
    one = ev.one_device_config(loaded)
    assert (one.num_devices, one.actor_device_ids, one.learner_device_ids) == (1, (0,), (0,))


def test_time_limit_overrides():
    assert ev.time_limit_overrides("envpool", 0) == {}
    assert ev.time_limit_overrides("envpool", 64) == {"max_episode_steps": 64}
    assert ev.time_limit_overrides("gymnax", 9) == {"max_steps_in_episode": 9}


# ----------------------------------------------------------------------------- statistics


def test_summarize_against_hand_values():
    stats = ev.summarize([1.0, 2.0, 3.0, 10.0])
    # sample std: sqrt(((-3)^2 + (-2)^2 + (-1)^2 + 6^2) / 3) = sqrt(50 / 3); t_{0.975, 3}
    # = 3.182446305284263 (tables), so ci95 = 3.1824... * sqrt(50 / 3) / 2.
    std = np.sqrt(50.0 / 3.0)
    assert stats == pytest.approx(dict(mean=4.0, ci95=3.182446305284263 * std / 2.0,
                                       median=2.5, std=std, min=1.0, max=10.0))
    one = ev.summarize([7])
    assert one["mean"] == 7.0 and np.isnan(one["std"]) and np.isnan(one["ci95"])
    assert ev.summarize([5.0, 5.0])["ci95"] == 0.0
    with pytest.raises(ValueError):
        ev.summarize([])


def test_t_interval_matches_scipy():
    from scipy import stats

    x = [3.0, 9.5, 4.25, 7.0, 11.0]
    mean, half = ev.t_interval(x, confidence=0.9)
    low, high = stats.t.interval(0.9, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert (mean - half, mean + half) == (pytest.approx(low), pytest.approx(high))


def test_results_table_lines():
    table = ev.results_table({"return": [1.0, 3.0], "length": [10, 30]})
    header, ret, length = table.splitlines()
    assert header.split() == list(ev.STAT_NAMES)
    # [1, 3]: sample std sqrt(2), ci95 = t_{0.975, 1} * sqrt(2) / sqrt(2) = 12.706204736
    assert ret.split() == ["return", "2.000", "12.706", "2.000", "1.414", "1.000", "3.000"]
    assert length.split()[0] == "length" and float(length.split()[1]) == 20.0
    parsed = ev.parse_table(f"a header line\n{table}\nvideo: x.mp4 (3 frames of 2x2)\n")
    assert parsed["return"] == dict(mean=2.0, ci95=12.706, median=2.0, std=1.414, min=1.0,
                                    max=3.0)  # as printed, 3 decimals
    assert set(parsed) == {"return", "length"}
    single = ev.parse_table(ev.results_table({"return": [4.0]}))["return"]
    assert single["mean"] == 4.0 and np.isnan(single["ci95"]) and np.isnan(single["std"])


def test_human_normalised_row_only_for_atari():
    results = ev.EpisodeResults(returns=np.asarray([1.7, 31.8]), lengths=np.asarray([5, 9]))
    assert set(ev.result_rows("CartPole-v1", results)) == {"return", "length"}
    assert set(ev.result_rows("Breakout-MinAtar", results)) == {"return", "length"}
    rows = ev.result_rows("Breakout-v5", results)
    normalised = ev.human_normalized_scores("envpool:Breakout-v5", results.returns)
    np.testing.assert_allclose(rows["human-normalised"], normalised)
    # Breakout: random 1.7, human 30.5 (Agent57 table): 1.7 -> 0, 30.5 -> 1.
    np.testing.assert_allclose(ev.human_normalized_scores("Breakout-v5", [1.7, 30.5]),
                               [0.0, 1.0], atol=1e-9)


# ----------------------------------------------------------------------------- frames


def test_scale_nearest_reaches_min_side():
    image = np.arange(10 * 5 * 3, dtype=np.uint8).reshape(10, 5, 3)
    big = ev.scale_nearest(image)
    assert big.shape == (320, 160, 3)  # factor 32: the short side (5) to >= 160
    np.testing.assert_array_equal(big[::32, ::32], image)
    assert ev.scale_nearest(np.zeros((200, 300, 3), np.uint8)).shape == (200, 300, 3)


def test_cartpole_frame_follows_the_state():
    upright = ev.cartpole_frame(np.asarray([0.0, 0.0, 0.0, 0.0]))
    right = ev.cartpole_frame(np.asarray([1.0, 0.0, 0.0, 0.0]))
    leaning = ev.cartpole_frame(np.asarray([0.0, 0.0, 0.5, 0.0]))
    assert upright.shape == ev.CARTPOLE_FRAME + (3,) and upright.dtype == np.uint8

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
    ((6,), "float32", dict(name="Acrobot-v1"), (160, 160, 3)),  # bars
    ((9,), "float32", {}, (160, 216, 3)),               # bars, 24 px each
])
def test_obs_frame_fn_sizes(shape, dtype, kwargs, expected):
    rng = np.random.default_rng(0)
    obs = (rng.integers(0, 256, shape).astype(np.uint8) if dtype == "uint8"
           else rng.random(shape).astype(np.float32))
    frame = ev.obs_frame_fn(shape, dtype, **kwargs)(obs)
    assert frame.shape == expected and frame.dtype == np.uint8
    assert frame.min() < frame.max()  # not a blank image


def test_planes_frame_colours():
    obs = np.zeros((2, 2, 3), np.float32)
    obs[0, 0, 0] = obs[1, 1, 2] = 1.0
    frame = ev.planes_frame(obs)
    np.testing.assert_array_equal(frame[0, 0], ev.PLANE_COLOURS[0])
    np.testing.assert_array_equal(frame[1, 1], ev.PLANE_COLOURS[2])
    np.testing.assert_array_equal(frame[0, 1], (0, 0, 0))


@pytest.mark.parametrize("ext", [".mp4", ".gif"])
def test_write_video_round_trip(ext, tmp_path):
    """12 distinct frames of an odd size come back as 12 frames, padded to even."""
    frames = [np.full((21, 30, 3), 20 * i, np.uint8) for i in range(12)]
    path = str(tmp_path / f"v{ext}")
    ev.write_video(path, frames)
    back = ev.read_video(path)
    assert back.shape == (12, 22, 30, 3) and back.dtype == np.uint8
    np.testing.assert_allclose(back[5, :21].mean(), 100, atol=3)


@pytest.mark.parametrize("text, problem", [('{"seed": 0,', "is not valid JSON"),
                                           ("[1, 2]", "holds a tuple, not a run's config")])
def test_a_damaged_config_json_is_one_line(tmp_path, text, problem):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ev.EvalError, match=f"^--workdir: .*config.json {problem}") as e:
        ev.load_config(str(tmp_path))
    assert "\n" not in str(e.value)
