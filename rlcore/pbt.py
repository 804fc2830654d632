"""Population-based training's exploit and explore step (Jaderberg et al. 2017, arXiv
1711.09846), as one pure function over a population of A agents and H hyperparameters.

Exploit is truncation selection: the ``num_exploited`` agents with the lowest statistic
(ties: the lower agent index ranks lower) each copy an agent drawn uniformly from the
``num_exploited`` with the highest, its whole agent state (params with their normalisation
statistics, optimizer state, ...) and its hyperparameters. Explore changes the copied values
of the explored hyperparameters: ``perturb`` multiplies each by a factor drawn uniformly
from ``factors``, ``resample`` draws each from its ``choices``; both clip to ``[low,
high]``. Agents that do not copy keep everything.

Every draw comes from one key (the run's, ``rlcore.seeding.pbt_key``) and has the shape of
the population, so the history depends neither on the device count nor on timing. The draws
are apart from their use (``draws``, ``apply``), so that a NumPy reference can check the
step on the same draws (tests/rlcore/test_pbt.py). See docs/design.md, "Population-based
training".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from rlcore.types import Array, PRNGKey

PERTURB, RESAMPLE = METHODS = ("perturb", "resample")


@dataclasses.dataclass(frozen=True)
class Explore:
    """The static settings of the step (hashable: constants of the compiled program).

    Attributes:
      num_exploited: agents that copy per step (``1 <= n <= A // 2``).
      explored: per hyperparameter ``[H]``, whether explore changes it (else it is copied).
      method: ``"perturb"`` or ``"resample"``.
      factors: perturb's factors, one drawn per agent and hyperparameter.
      low: lower bounds ``[H]`` (unexplored ones: unused).
      high: upper bounds ``[H]``.
      choices: resample's values per hyperparameter (``[H]`` tuples; unexplored: unused).
    """

    num_exploited: int
    explored: tuple[bool, ...]
    method: str = PERTURB
    factors: tuple[float, ...] = (0.8, 1.25)
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    choices: tuple[tuple[float, ...], ...] = ()


@struct.dataclass
class Draws:
    """The random choices of one step.

    Attributes:
      pick: ``int32 [A]``: the worst agent of rank ``i`` copies the top agent of rank
        ``pick[i]`` (ranks count from the best; only the first ``num_exploited`` are read).
      factor: ``int32 [A, H]``: index into ``factors`` (perturb).
      choice: ``int32 [A, H]``: index into each hyperparameter's ``choices`` (resample).
    """

    pick: Array
    factor: Array
    choice: Array


@struct.dataclass
class Events:
    """What one step did, per agent ``[A]`` (an agent that did not copy: ``exploited``
    False, ``source`` itself, ``new == old``).

    Attributes:
      exploited: ``bool [A]``: the agent copied another.
      source: ``int32 [A]``: the agent it copied.
      statistic: ``float32 [A]``: the statistic that ranked the agents.
      old: ``float32 [A, H]``: its hyperparameters before the step.
      new: ``float32 [A, H]``: after it.
    """

    exploited: Array
    source: Array
    statistic: Array
    old: Array
    new: Array


def draws(key: PRNGKey, settings: Explore, num_agents: int) -> Draws:
    """The step's draws from ``key``: shapes ``[A]`` and ``[A, H]`` only, so they are the
    same on any device split."""
    k_pick, k_factor, k_choice = jax.random.split(key, 3)
    h = len(settings.explored)
    counts = jnp.asarray([max(len(c), 1) for c in settings.choices] or [1] * h, jnp.int32)
    return Draws(
        pick=jax.random.randint(k_pick, (num_agents,), 0, settings.num_exploited),
        factor=jax.random.randint(k_factor, (num_agents, h), 0,
                                  max(len(settings.factors), 1)),
        choice=jax.random.randint(k_choice, (num_agents, h), 0,
                                  jnp.broadcast_to(counts, (num_agents, h))))


def sources(statistic: Array, num_exploited: int, pick: Array) -> Array:
    """The agent each agent copies ``int32 [A]`` (itself where it does not copy).

    Args:
      statistic: ``[A]``; NaN ranks lowest.
      num_exploited: n, the agents that copy.
      pick: ``int32 [A]`` (``Draws.pick``).
    """
    a = statistic.shape[0]
    ranked = jnp.argsort(jnp.nan_to_num(statistic, nan=-jnp.inf), stable=True)  # worst first
    worst, best = ranked[:num_exploited], ranked[::-1][:num_exploited]
    return jnp.arange(a, dtype=jnp.int32).at[worst].set(
        best[pick[:num_exploited]].astype(jnp.int32))


def explored_values(copied: Array, settings: Explore, d: Draws) -> Array:
    """Each agent's explored hyperparameters ``[A, H]`` from the copied ones ``[A, H]``,
    clipped to the bounds (the unexplored columns as copied)."""
    if settings.method == PERTURB:
        new = copied * jnp.asarray(settings.factors, copied.dtype)[d.factor]
    else:
        width = max(len(c) for c in settings.choices)
        table = jnp.asarray([c + (c[-1],) * (width - len(c)) for c in settings.choices],
                            copied.dtype)  # [H, C]
        new = table[jnp.arange(copied.shape[1])[None, :], d.choice]
    new = jnp.clip(new, jnp.asarray(settings.low, copied.dtype)[None, :],
                   jnp.asarray(settings.high, copied.dtype)[None, :])
    return jnp.where(jnp.asarray(settings.explored)[None, :], new, copied)


def apply(d: Draws, settings: Explore, statistic: Array, values: Array,
          agents: Any) -> tuple[Any, Array, Events]:
    """The step on given draws.

    Args:
      d: the draws (``draws``).
      settings: the static settings.
      statistic: ``[A]``, higher is better.
      values: ``float32 [A, H]`` hyperparameters.
      agents: a pytree whose leaves have a leading agent axis ``[A, ...]`` (params,
        optimizer state, normalisation statistics, ...).

    Returns:
      ``(agents, values, events)``: each agent's state and hyperparameters after the step.
    """
    source = sources(statistic, settings.num_exploited, d.pick)
    exploited = source != jnp.arange(source.shape[0])
    copied = values[source]
    new = jnp.where(exploited[:, None], explored_values(copied, settings, d), copied)
    agents = jax.tree.map(lambda x: x[source], agents)
    return agents, new, Events(exploited=exploited, source=source,
                               statistic=statistic.astype(jnp.float32), old=values, new=new)


def exploit_and_explore(key: PRNGKey, settings: Explore, statistic: Array, values: Array,
                        agents: Any) -> tuple[Any, Array, Events]:
    """One exploit and explore step: ``apply`` on ``draws(key, ...)``; jittable, with
    ``settings`` static. Shapes as ``apply``'s."""
    return apply(draws(key, settings, statistic.shape[0]), settings, statistic, values,
                 agents)


def no_events(statistic: Array, values: Array) -> Events:
    """The events of an update without a step: nobody copied."""
    a = statistic.shape[0]
    return Events(exploited=jnp.zeros((a,), bool), source=jnp.arange(a, dtype=jnp.int32),
                  statistic=statistic.astype(jnp.float32), old=values, new=values)


@struct.dataclass
class Population:
    """What a population carries between steps: each agent's hyperparameters and the
    statistic's window.

    Attributes:
      values: ``float32 [A, H]``: the hyperparameters each agent trains with.
      statistic: ``float32 [A]``: the statistic of the last step's window (-inf before the
        first, or while an agent's windows held no episode).
      total: ``float32 [A]``: the sum of the returns seen since the last step.
      count: ``float32 [A]``: how many.
    """

    values: Array
    statistic: Array
    total: Array
    count: Array

    @classmethod
    def fresh(cls, values: Array) -> "Population":
        """A population before its first step, with ``values [A, H]``."""
        a = values.shape[0]
        return cls(values=jnp.asarray(values, jnp.float32),
                   statistic=jnp.full((a,), -jnp.inf, jnp.float32),
                   total=jnp.zeros((a,), jnp.float32), count=jnp.zeros((a,), jnp.float32))

    def observe(self, return_sum: Array, count: Array) -> "Population":
        """Adds ended episodes (or evaluations): sums ``[A]`` of returns and their counts."""
        return dataclasses.replace(self, total=self.total + return_sum.astype(jnp.float32),
                                   count=self.count + count.astype(jnp.float32))

    def window_statistic(self) -> Array:
        """``[A]``: the mean return of the window, the previous statistic where it is empty."""
        return jnp.where(self.count > 0, self.total / jnp.maximum(self.count, 1.0),
                         self.statistic)

    def restart(self, values: Array, statistic: Array) -> "Population":
        """After a step: the new values, the statistic that ranked, an empty window."""
        return dataclasses.replace(self, values=values, statistic=statistic,
                                   total=jnp.zeros_like(self.total),
                                   count=jnp.zeros_like(self.count))
