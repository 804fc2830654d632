"""anakin.evaluate: a trained CartPole agent's greedy episodes, videos, the first-episode
loop, and bad arguments (exit 2, one line)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from anakin.episodes import play_episodes
from configs import cartpole_ppo
from envs import registry
from envs.render import CAPTION_HEIGHT, CARTPOLE_FRAME
from rlcore.networks import make_network
from rlcore.seeding import EvaluateRoots, per_env_keys
from runtime.commands.evaluation import EvalError, check_agent
from runtime.commands.stats import parse_table
from tests.helpers import read_video, run_entry

SOLVED = 475.0


@pytest.fixture(scope="module")
def cartpole_run(cartpole_ppo_demo_run):
    """configs/cartpole_ppo.py as the threshold test trains it (500k steps, one device): the
    ``make demo`` run (tests/conftest.py), trained once for the three."""
    return cartpole_ppo_demo_run.workdir


@pytest.mark.slow
def test_greedy_solves_cartpole_and_writes_mp4(cartpole_run, tmp_path):
    video = tmp_path / "x.mp4"
    proc = run_entry("anakin.evaluate", [f"--workdir={cartpole_run}", "--episodes=10",
                                         "--greedy", f"--video={video}"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr  # no library chatter by default
    assert "10 episodes, greedy" in proc.stdout
    table = parse_table(proc.stdout)
    assert set(table) == {"return", "length"}, proc.stdout
    assert table["return"]["mean"] >= SOLVED, proc.stdout
    assert table["return"]["min"] <= table["return"]["median"] <= table["return"]["max"]
    assert table["length"] == table["return"]  # CartPole: reward 1 a step
    frames = read_video(str(video))
    assert len(frames) >= 10
    assert frames.shape[1:] == (CARTPOLE_FRAME[0] + CAPTION_HEIGHT, CARTPOLE_FRAME[1], 3)


@pytest.mark.slow
def test_sampled_episode_as_gif(cartpole_run, tmp_path):
    video = tmp_path / "x.gif"
    proc = run_entry("anakin.evaluate", [f"--workdir={cartpole_run}", "--episodes=2",
                                         f"--video={video}"])
    assert proc.returncode == 0, proc.stderr
    assert "2 episodes, stochastic" in proc.stdout
    assert parse_table(proc.stdout)["return"]["mean"] > 100
    frames = read_video(str(video))
    assert f"video: {video} ({len(frames)} frames of " in proc.stdout  # none merged
    assert len(frames) >= 10
    assert frames.shape[1:] == (CARTPOLE_FRAME[0] + CAPTION_HEIGHT, CARTPOLE_FRAME[1], 3)


@pytest.mark.smoke  # make test-newest
def test_play_counts_first_episode_only():
    """A 7-step time limit: every env's first episode is 7 steps long, although the
    128-step chunk runs several more episodes; env 0's frames start at its eval reset and
    end on the observation its episode ended on (docs/design.md, "Evaluation")."""
    env = registry.make_jax_env("CartPole-v1", max_steps_in_episode=7)
    network = make_network("mlp", env.spec)
    params = network.init(jax.random.key(0), jnp.zeros((1, 4)))
    roots = EvaluateRoots.from_seed(3)
    results, obs0, return0 = play_episodes(env, network.apply, params, roots, 5, greedy=False)
    np.testing.assert_array_equal(results.lengths, [7] * 5)
    np.testing.assert_array_equal(results.returns, [7.0] * 5)
    _, first = jax.vmap(env.reset)(per_env_keys(roots.reset, jnp.arange(5, dtype=jnp.int32)))
    assert obs0.shape == (8, 4)  # one per action, then the last
    np.testing.assert_array_equal(obs0[0], np.asarray(first.obs)[0])
    # CartPole's Euler step: x' = x + 0.02 x_dot, so the last frame continues the episode.
    np.testing.assert_allclose(obs0[1:, 0], obs0[:-1, 0] + 0.02 * obs0[:-1, 1], atol=1e-6)
    np.testing.assert_array_equal(return0, np.arange(1.0, 8.0))  # CartPole: 1 a step
    again, _, _ = play_episodes(env, network.apply, params, roots, 5, greedy=False)
    np.testing.assert_array_equal(again.returns, results.returns)


def _fake_rundir(path, checkpoint: bool):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(cartpole_ppo.get_config().to_dict()))
    if checkpoint:
        (path / "checkpoints" / "1").mkdir(parents=True)
    return path


@pytest.mark.parametrize("args, flag", [
    (["--workdir={missing}"], "--workdir"),
    (["--workdir={no_ckpt}"], "--workdir"),
    (["--workdir={run}", "--episodes=0"], "--episodes"),
    (["--workdir={run}", "--video=out.avi"], "--video"),
    (["--workdir={run}", "--episodes=many"], "flag --episodes"),
    # From config.json, before the (empty, so unrestorable) checkpoint is read.
    (["--workdir={run}", "--agent=1"], "--agent: the run has 1 agent (0), got 1"),
], ids=["unknown_workdir", "no_checkpoint", "episodes_0", "video_ext", "episodes_not_int",
        "agent_before_restore"])
def test_bad_arguments_exit_2_with_one_line(args, flag, tmp_path):
    paths = dict(missing=tmp_path / "missing", no_ckpt=_fake_rundir(tmp_path / "a", False),
                 run=_fake_rundir(tmp_path / "b", True))
    proc = run_entry("anakin.evaluate", [a.format(**paths) for a in args], timeout_s=60)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}"), proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("num_agents, agent, line", [
    (6, 6, "--agent: the run has 6 agents (0..5), got 6"),
    (2, 9, "--agent: the run has 2 agents (0..1), got 9"),
    (1, 1, "--agent: the run has 1 agent (0), got 1"),
])
def test_agent_out_of_range_names_the_valid_range(num_agents, agent, line):
    with pytest.raises(EvalError) as raised:
        check_agent(agent, num_agents)  # what the restore of an agent checks first
    assert str(raised.value) == line
