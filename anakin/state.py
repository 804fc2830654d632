"""Anakin's train state (docs/design.md, "Anakin calls"): the learner's, the envs', the
lagged params the rollouts act with and the agents' population, the rules of the lag ring,
and what one update gives (``UpdateOutput``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from anakin.rollout import EnvCarry
from rlcore import pbt
from rlcore.losses import LossMetrics
from rlcore.types import EpisodeSummary, LearnerState, Params


@struct.dataclass
class AnakinState:
    """Whole train state; ``envs`` leaves are sharded ``[B, ...]`` over the mesh.

    ``lagged``: at policy lag S > 0, the params of the last S versions, oldest first, each
    leaf ``[S, ...]`` (replicated): before update ``u`` versions ``max(u - S + i, 0)``,
    ``i = 0 .. S - 1`` (version ``v``: the params after ``v`` updates); the rollout acts
    with the oldest (docs/design.md, "Pipelines and staleness"). None at lag 0 (the rollout
    acts with the learner's params).

    With ``num_seeds`` A > 1 every leaf has a leading agent axis: learner ``[A, ...]``
    (replicated), envs ``[A, B, ...]`` (sharded on B), lagged ``[A, S, ...]``.

    ``population``: with population-based training, the agents' hyperparameters and the
    statistic's window (``rlcore.pbt.Population``, replicated); None without it (docs/design.md,
    "Population-based training").
    """

    learner: LearnerState
    envs: EnvCarry
    lagged: Params | None = None
    population: pbt.Population | None = None


def acting_params(state: AnakinState) -> Params:
    """The params the rollout acts with: the oldest of ``lagged``, else the learner's."""
    if state.lagged is None:
        return state.learner.params
    return jax.tree.map(lambda x: x[0], state.lagged)


def pushed(lagged: Params | None, params: Params) -> Params | None:
    """``lagged`` ``[S, ...]`` with its oldest version dropped and ``params`` appended (the
    params before an update, now one version behind the learner's)."""
    if lagged is None:
        return None
    return jax.tree.map(lambda ring, p: jnp.concatenate([ring[1:], p[None]]), lagged, params)


def ring_of(params: Params, lag: int) -> Params | None:
    """``lag`` copies of ``params`` ``[lag, ...]`` (a fresh run's ring), None at lag 0."""
    if not lag:
        return None
    return jax.tree.map(lambda p: jnp.broadcast_to(p[None], (lag,) + p.shape), params)


@struct.dataclass
class PopulationOutput:
    """A population's update: the hyperparameters the agents trained with ``[A, H]`` and
    what the step after the update did (``rlcore.pbt.Events``; nothing where none was
    due)."""

    values: jax.Array
    events: pbt.Events


@struct.dataclass
class UpdateOutput:
    """Per-update outputs of a call, each leaf ``[K]`` for K updates; ``evals`` holds the
    greedy evaluation episodes after the update (zeros where it did not evaluate);
    ``population``, with population-based training, its update."""

    loss: LossMetrics
    episodes: EpisodeSummary
    evals: EpisodeSummary
    population: PopulationOutput | None = None
