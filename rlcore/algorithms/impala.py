"""IMPALA: actor-critic with V-trace off-policy correction (Espeholt et al. 2018,
arXiv 1802.01561). Needs nothing before the epochs: V-trace runs inside the loss on each
minibatch of whole sequences."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rlcore import losses, staleness
from rlcore.algorithms.base import SEQUENCES, SUM, AlgorithmBase
from rlcore.types import ApplyFn, Array, Params, Trajectory


@dataclasses.dataclass(frozen=True)
class Impala(AlgorithmBase):
    """IMPALA hyperparameters (``HParams`` fields of the same names; no defaults: configs/base.py
    holds them).

    Attributes:
      gamma: discount factor.
      vf_coef: baseline-loss coefficient.
      ent_coef: entropy-bonus coefficient.
      vtrace_lambda: V-trace lambda.
      clip_rho: importance-weight clip in the targets.
      clip_pg_rho: importance-weight clip in the policy gradient.
    """

    gamma: float
    vf_coef: float
    ent_coef: float
    vtrace_lambda: float
    clip_rho: float
    clip_pg_rho: float

    # V-trace runs backwards along each whole sequence.
    minibatch_kinds: ClassVar[tuple[str, ...]] = (SEQUENCES,)
    loss_reduction: ClassVar[str] = SUM  # over the global minibatch, see ``losses.impala_loss``
    # Its V-trace already corrects for the behaviour policy, with the current params, per
    # minibatch: no proximal pass for ``decoupled``, ``vtrace`` or ``filter`` to read.
    staleness_corrections: ClassVar[tuple[str, ...]] = staleness.ALGORITHM_FREE

    def prepare(self, params: Params, apply_fn: ApplyFn, trajectory: Trajectory) -> Trajectory:
        """The Trajectory as it is (minibatches are ``Trajectory.take_envs``)."""
        del params, apply_fn
        return trajectory

    def split_ready(self, batch: Trajectory,
                    axis_name: str | None) -> tuple[Trajectory, "Impala"]:
        """As it is: V-trace needs nothing beyond each sequence, and each chunk's loss is the
        sum over its own envs (their sum the minibatch's)."""
        del axis_name
        return batch, self

    def loss(self, params: Params, apply_fn: ApplyFn, batch: Trajectory,
             axis_name: str | None) -> tuple[Array, losses.LossMetrics]:
        """``losses.impala_loss``, summed over the global minibatch (``axis_name`` devices)."""
        return losses.impala_loss(
            params, apply_fn, batch, discount=self.gamma, vf_coef=self.vf_coef,
            ent_coef=self.ent_coef, lambda_=self.vtrace_lambda, clip_rho=self.clip_rho,
            clip_pg_rho=self.clip_pg_rho, axis_name=axis_name,
        )
