"""sebulba.evaluate: EnvPool CartPole and Atari runs evaluated through the CLI (table,
human-normalised score, RGB video), the first-episode host loop, bad arguments."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import atari_ppo, cartpole_ppo_sebulba
from envs import registry
from envs.atari_scores import human_normalized_scores
from envs.render import CAPTION_HEIGHT, CARTPOLE_FRAME
from rlcore.networks import make_network
from rlcore.seeding import EvaluateRoots, evaluate_host_seed, host_env_root
from runtime.commands.stats import parse_table
from sebulba.episodes import make_host_policy, play_first_episodes
from sebulba.train import prepare, train
from tests.helpers import read_video, run_entry


def _train(config, workdir):
    prepare(config)
    train(config, str(workdir))
    return workdir


@pytest.mark.slow
def test_cartpole_run_prints_the_table(tmp_path):
    config = cartpole_ppo_sebulba.get_config()  # actors and learner on device 0
    config.total_env_steps = config.num_envs * config.num_steps * 2
    config.log_every = 1
    workdir = _train(config, tmp_path / "run")
    proc = run_entry("sebulba.evaluate", [f"--workdir={workdir}", "--episodes=4"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr
    assert "envpool:CartPole-v1" in proc.stdout and "4 episodes, stochastic" in proc.stdout
    assert "episodes drawn from seed 0, on env seeds and keys training never uses" in proc.stdout
    assert "fold_in" not in proc.stdout  # no seed internals on the console
    table = parse_table(proc.stdout)
    assert set(table) == {"return", "length"}, proc.stdout
    assert table["return"] == table["length"]  # CartPole: reward 1 a step
    assert 8 <= table["length"]["min"] <= table["length"]["max"] <= 500


@pytest.mark.optimized
@pytest.mark.slow
def test_atari_human_normalised_score_and_rgb_video(tmp_path):
    """A 1-update Breakout-v5 run (tiny sizes; Nature CNN, which compiles faster than the
    IMPALA ResNet): 2 episodes cut at 40 steps, the score normalised, the screen recorded."""
    config = atari_ppo.get_config()
    config.network = "nature_cnn"
    config.num_envs = 4
    config.num_actor_threads = 1
    config.num_steps = 8
    config.num_minibatches = 2
    config.num_epochs = 1
    config.update_unroll = 1
    config.total_env_steps = 4 * 8
    workdir = _train(config, tmp_path / "run")
    video = tmp_path / "breakout.mp4"
    proc = run_entry("sebulba.evaluate", [f"--workdir={workdir}", "--episodes=2",
                                          "--max_episode_steps=40", f"--video={video}"])
    assert proc.returncode == 0, proc.stderr
    table = parse_table(proc.stdout)
    assert set(table) == {"return", "length", "human-normalised"}, proc.stdout
    assert table["length"]["max"] <= 40
    expected = human_normalized_scores("Breakout-v5", [table["return"]["mean"]])[0]
    assert table["human-normalised"]["mean"] == pytest.approx(expected, abs=2e-3)
    frames = read_video(str(video))
    assert len(frames) >= 10  # the ALE screen under the step-and-return strip
    assert frames.shape[1:] == (210 + CAPTION_HEIGHT, 160, 3)
    channels = frames.reshape(-1, 3).astype(int)
    assert np.abs(channels[:, 0] - channels[:, 2]).max() > 50  # colour, not gray


@pytest.mark.smoke  # make test-newest
def test_play_counts_first_episode_only():
    """Host-served gymnax CartPole with a 6-step limit: first episodes of 6 steps, one frame
    per action of env 0's, then the one its episode ended on (docs/design.md,
    "Evaluation")."""
    env = registry.make_host_env("gymnax:CartPole-v1", 3, seed=evaluate_host_seed(0),
                                 key_root=host_env_root(evaluate_host_seed(0)),
                                 max_steps_in_episode=6)
    network = make_network("mlp", env.spec)
    params = network.init(jax.random.key(0), jnp.zeros((1, 4)))
    policy = make_host_policy(network.apply, jax.devices()[0], True,
                              EvaluateRoots.from_seed(0).action)
    to_frame = registry.obs_frame_fn("gymnax:CartPole-v1", registry.SEBULBA, env)
    try:
        episodes = play_first_episodes(env, lambda obs, t, first: policy(params, obs, t, first),
                                       capture=lambda obs: np.array(obs[0]))
    finally:
        env.close()
    results, seen = episodes.results(), np.stack(episodes.frames)
    np.testing.assert_array_equal(results.lengths, [6, 6, 6])
    np.testing.assert_array_equal(results.returns, [6.0, 6.0, 6.0])
    assert seen.shape == (7, 4) and to_frame(seen[0]).shape == CARTPOLE_FRAME + (3,)
    # CartPole's Euler step: x' = x + 0.02 x_dot, so the last frame continues the episode.
    np.testing.assert_allclose(seen[1:, 0], seen[:-1, 0] + 0.02 * seen[:-1, 1], atol=1e-6)
    assert episodes.frame_returns == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # after each action


def test_agent_other_than_0_exits_2(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(cartpole_ppo_sebulba.get_config().to_dict()))
    (tmp_path / "checkpoints" / "1").mkdir(parents=True)
    proc = run_entry("sebulba.evaluate", [f"--workdir={tmp_path}", "--agent=1"], timeout_s=60)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --agent:"), proc.stderr
