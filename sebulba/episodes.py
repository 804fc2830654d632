"""The episode player of host envs: the first episode of each env of a HostEnv pool.

One player (``play_first_episodes``) and one policy (``make_host_policy``) for both uses of
a host pool: in-training evaluation (``EvalPool``: every ``eval_every`` updates the learner
thread plays ``eval_episodes`` greedy episodes on a pool of its own, seeded
``rlcore.seeding.train_eval_host_seed(seed)``, outside every training env seed) and the
evaluate command (``sebulba.evaluate``: N episodes, greedy or sampled, with env 0's frames
for ``--video``). It lives in sebulba/ because it is host-env machinery as Sebulba runs it
(numpy pools stepped from a Python loop, the policy jitted on an actor device); jittable
envs have theirs in ``anakin.episodes``.

In-training evaluation reads the params the learner just published and nothing else: the
training data and metrics are the same with it on or off (in the ``sync`` and ``cleanba``
pipelines, whose data do not depend on timing).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import numpy as np

from envs.base import HostEnv
from rlcore.policy import policy_step
from rlcore.types import EpisodeSummary
from runtime.commands.stats import EpisodeResults


def no_core(n: int) -> None:
    """The initial core state of a feed-forward agent's ``n`` envs: none."""
    del n


def make_host_policy(apply_fn: Callable, device, greedy: bool, action_root=None,
                     initial_core: Callable = no_core):
    """``policy(params, obs [N, ...] numpy, t, first [N] numpy bool) -> actions [N]`` numpy,
    jitted on ``device``.

    A recurrent agent's core state (``initial_core(N)`` at ``t = 0``, then the one the
    previous call left) is kept by the policy and reset to zeros where ``first`` (``obs``
    starts an episode); one policy plays one episode set at a time.

    Args:
      apply_fn: the network's apply.
      device: where the policy runs (params must be there).
      greedy: argmax actions; otherwise sampled with keys ``per_env_keys(action_root, i, t)``.
      action_root: the action root key (``EvaluateRoots.action``); unused when greedy.
      initial_core: ``n ->`` a recurrent agent's zero state of ``n`` envs (None:
        feed-forward; ``rlcore.networks.initial_core``).
    """
    fn = jax.jit(functools.partial(policy_step, apply_fn), static_argnames="greedy")
    root = None if action_root is None else jax.device_put(action_root, device)
    held = {}

    def policy(params, obs: np.ndarray, t: int, first: np.ndarray) -> np.ndarray:
        if t == 0:
            held["core"] = jax.device_put(initial_core(len(obs)), device)
        core = held["core"]
        obs, t, first = jax.device_put((obs, np.int32(t), None if core is None else first),
                                       device)
        actions, held["core"] = fn(params, obs, core, first, root, t, greedy=greedy)
        return np.asarray(actions)

    return policy


@dataclasses.dataclass(frozen=True)
class FirstEpisodes:
    """The first episode of each env of a pool.

    Attributes:
      returns: ``[N]`` float64 returns (where finished).
      lengths: ``[N]`` int64 lengths (where finished).
      finished: ``[N]`` bool, the first episode ended.
      frames: env 0's frames, one per action of its first episode (empty without capture).
      frame_returns: env 0's return after each of those actions (empty without capture).
    """

    returns: np.ndarray
    lengths: np.ndarray
    finished: np.ndarray
    frames: list
    frame_returns: list = dataclasses.field(default_factory=list)

    def results(self) -> EpisodeResults:
        return EpisodeResults(returns=self.returns, lengths=self.lengths)

    def summary(self) -> EpisodeSummary:
        """Sums over the finished first episodes."""
        done = self.finished
        return EpisodeSummary(return_sum=float(self.returns[done].sum()),
                              length_sum=float(self.lengths[done].sum()),
                              count=int(done.sum()))


def play_first_episodes(env: HostEnv,
                        policy: Callable[[np.ndarray, int, np.ndarray], np.ndarray], *,
                        max_steps: int | None = None,
                        should_stop: Callable[[], bool] | None = None,
                        capture: Callable[[np.ndarray], np.ndarray] | None = None,
                        capture_final: bool = True) -> FirstEpisodes | None:
    """Resets ``env`` and steps it with ``policy(obs, t, first) -> actions`` until each of its
    envs has finished one episode (or ``max_steps`` steps).

    Args:
      env: a HostEnv of N envs (same-step auto-reset, episode statistics in ``env.stats``).
      policy: ``(obs [N, ...], t, first [N] bool) -> actions [N]``; ``first``: ``obs`` starts
        an episode (all at ``t = 0``; then where the previous step ended one).
      max_steps: cap on the steps (None: until every env finished).
      should_stop: checked before every step; when it turns true the play is abandoned.
      capture: ``obs [N, ...] -> frame`` of env 0, called on the obs of each of its first
        episode's actions and on the one it ended on (``TimeStep.final_obs``: a video shows
        the episode's last frame; docs/design.md, "Evaluation"); None: no frames.
      capture_final: whether ``capture`` draws that last one: False for a capture that
        renders the env's current state (``obs`` unused), gone with the auto-reset.

    Returns:
      FirstEpisodes, or None when ``should_stop()`` came true first.
    """
    n = env.num_envs
    finished = np.zeros(n, bool)
    returns, lengths = np.zeros(n, np.float64), np.zeros(n, np.int64)
    obs = env.reset().obs
    first = np.ones(n, bool)
    frames = [] if capture is None else [capture(obs)]
    frame_returns = []
    t = 0
    while not finished.all() and (max_steps is None or t < max_steps):
        if should_stop is not None and should_stop():
            return None
        ts = env.step(np.asarray(policy(obs, t, first)))
        obs, t = ts.obs, t + 1
        first = ts.terminated | ts.truncated
        ended = first & ~finished
        if capture is not None and not finished[0]:
            frame_returns.append(float(env.stats.completed_return[0] if ended[0]
                                       else env.stats.running_return[0]))
        returns[ended] = env.stats.completed_return[ended]
        lengths[ended] = env.stats.completed_length[ended]
        finished |= ended
        if capture is not None and (not finished[0] or (ended[0] and capture_final)):
            frames.append(capture(obs if not finished[0] else ts.final_obs))
    return FirstEpisodes(returns=returns, lengths=lengths, finished=finished, frames=frames,
                         frame_returns=frame_returns)


class EvalPool:
    """The in-training evaluation envs and greedy policy of a Sebulba run.

    Args:
      env: the HostEnv (``eval_episodes`` envs, in-training evaluation seeds).
      apply_fn: the network's apply.
      device: where the policy runs (the first actor device).
      max_steps: cap on one evaluation's steps.
      initial_core: ``n ->`` a recurrent agent's zero state (see ``make_host_policy``).
    """

    def __init__(self, env: HostEnv, apply_fn: Callable, device, max_steps: int,
                 initial_core: Callable = no_core):
        self.env = env
        self.max_steps = max_steps
        self._policy = make_host_policy(apply_fn, device, greedy=True,
                                        initial_core=initial_core)

    def run(self, params, should_stop: Callable[[], bool] | None = None
            ) -> EpisodeSummary | None:
        """Greedy first episodes of every eval env with ``params`` (on the pool's device);
        None when ``should_stop()`` came true before they ended."""
        episodes = play_first_episodes(self.env, functools.partial(self._policy, params),
                                       max_steps=self.max_steps, should_stop=should_stop)
        return None if episodes is None else episodes.summary()

    def close(self) -> None:
        self.env.close()
