"""Evaluation during Sebulba training: greedy episodes on a host env pool of its own.

Every ``eval_every`` updates the learner thread plays ``eval_episodes`` greedy (argmax)
episodes, the first episode of each env of a separate HostEnv (EnvPool, or a jittable env
served on the host) seeded ``rlcore.seeding.eval_host_seed(seed)``, outside every training env
seed. The policy runs on the first actor device with the params the learner just published,
so evaluation reads the params and nothing else: the training data and metrics are the same
with it on or off (in the ``sync`` and ``cleanba`` pipelines, whose data do not depend on
timing).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from envs.base import HostEnv
from rlcore.types import EpisodeSummary


def make_greedy_policy(apply_fn: Callable):
    """Jitted ``(params, obs [n, ...]) -> action [n]``, the argmax of the logits."""
    return jax.jit(lambda params, obs: jnp.argmax(apply_fn(params, obs)[0], axis=-1))


def play_first_episodes(env: HostEnv, act: Callable[[np.ndarray], np.ndarray],
                        max_steps: int,
                        should_stop: Callable[[], bool] | None = None) -> EpisodeSummary | None:
    """Resets ``env`` and steps it with ``act(obs) -> actions`` until each of its envs has
    finished one episode (or ``max_steps`` steps); sums over the finished first episodes.
    Returns None when ``should_stop()`` turns true first (checked every step)."""
    n = env.num_envs
    done = np.zeros(n, bool)
    ret, length = np.zeros(n), np.zeros(n)
    ts = env.reset()
    for _ in range(max_steps):
        if done.all():
            break
        if should_stop is not None and should_stop():
            return None
        ts = env.step(np.asarray(act(ts.obs)))
        ended = (ts.terminated | ts.truncated) & ~done
        ret[ended] = env.stats.completed_return[ended]
        length[ended] = env.stats.completed_length[ended]
        done |= ended
    return EpisodeSummary(return_sum=float(ret[done].sum()), length_sum=float(length[done].sum()),
                          count=int(done.sum()))


class EvalPool:
    """The evaluation envs and greedy policy of a Sebulba run.

    Args:
      env: the HostEnv (``eval_episodes`` envs, evaluation seeds).
      apply_fn: the network's apply.
      device: where the policy runs (the first actor device).
      max_steps: cap on one evaluation's steps.
    """

    def __init__(self, env: HostEnv, apply_fn: Callable, device, max_steps: int):
        self.env = env
        self.device = device
        self.max_steps = max_steps
        self._policy = make_greedy_policy(apply_fn)

    def run(self, params, should_stop: Callable[[], bool] | None = None
            ) -> EpisodeSummary | None:
        """Greedy first episodes of every eval env with ``params`` (on ``device``); None
        when ``should_stop()`` came true before they ended."""
        act = lambda obs: self._policy(params, jax.device_put(obs, self.device))  # noqa: E731
        return play_first_episodes(self.env, act, self.max_steps, should_stop)

    def close(self) -> None:
        self.env.close()
