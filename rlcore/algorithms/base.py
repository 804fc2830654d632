"""The interface every algorithm implements, and hyperparameters filled from ``HParams``."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Protocol, Self

import jax.numpy as jnp

from rlcore.distributions import Distribution
from rlcore.errors import ConfigError
from rlcore.hparams import NAMES, HParams
from rlcore.losses import LossMetrics
from rlcore.types import ApplyFn, Array, EnvSpec, Params, PRNGKey, Trajectory

# Minibatch kinds: whole sequences of envs (time kept whole) or single (step, env) samples.
SAMPLES, SEQUENCES = "samples", "sequences"
AUTO = "auto"  # the config's choice for "the algorithm's own (its first kind)"
# How a loss reduces over its minibatch: a mean (PPO) or a sum (IMPALA); micro-batched
# gradients combine their chunks the same way (``rlcore.learner.micro_gradient``).
MEAN, SUM = "mean", "sum"


def accepted_kinds(algorithm: type[Algorithm], recurrent: bool) -> tuple[str, ...]:
    """The minibatch kinds an update of ``algorithm`` accepts, its own first: its
    ``minibatch_kinds``, or for a ``recurrent`` agent only ``SEQUENCES`` (its loss re-runs
    the core over whole sequences from their stored start states)."""
    kinds = algorithm.minibatch_kinds
    return tuple(k for k in kinds if k == SEQUENCES) if recurrent else kinds


def minibatch_kind(algorithm: type[Algorithm], choice: str, recurrent: bool = False) -> str:
    """The kind an update of ``algorithm`` (of a ``recurrent`` agent or not) uses for the
    config's ``minibatch_kind`` ``choice``: ``"auto"`` is the first of ``accepted_kinds``; any
    other must be one of them."""
    kinds = accepted_kinds(algorithm, recurrent)
    if choice == AUTO:
        return kinds[0]
    if choice not in kinds:
        raise ValueError(f"minibatch_kind: {algorithm.__name__} needs one of {', '.join(kinds)}, "
                         f"got {choice!r}")
    return choice


def splits_its_loss(algorithm: type) -> bool:
    """Whether ``algorithm``'s ``split_ready`` is its ``loss``'s: defined in the class that
    defines ``loss``, or below it. A class that overrides ``loss`` alone (under a parent's
    ``split_ready``, PPO's, which normalises advantages over the minibatch and runs the
    chunks without it) could change its math under micro-batches, so ``microbatches > 1``
    is refused for it (docs/design.md, "The algorithm protocol")."""
    def owner(name: str) -> type:
        return next(k for k in algorithm.__mro__ if name in vars(k))

    return issubclass(owner("split_ready"), owner("loss"))


# The types an algorithm's own hyperparameter may have (its default's type); the float
# ones are sweepable (used in arithmetic only, so an agent's value may be traced).
OWN_TYPES = (float, int, bool, str)


class FromHParams:
    """Mixin for a frozen dataclass whose fields are its hyperparameters: a field named like
    an ``HParams`` field reads that (a config field shared by algorithms: ``gamma``,
    ``clip_eps``, ...); any other is the algorithm's own, with a default of a type of
    ``OWN_TYPES``, read from ``HParams.algo`` (the config's ``algo`` sub-config)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # (the dataclass's)

    @classmethod
    def from_hparams(cls, hp: HParams) -> Self:
        """An instance with every field read from ``hp`` (an own one from ``hp.algo``, its
        default where absent)."""
        return cls(**{f.name: getattr(hp, f.name) if f.name in NAMES
                      else hp.algo.get(f.name, f.default) for f in dataclasses.fields(cls)})


def own_hyperparameters(algorithm: type) -> dict[str, Any]:
    """``{name: default}`` of ``algorithm``'s own hyperparameters (its dataclass fields not
    named like an ``HParams`` field), in field order."""
    return {f.name: f.default for f in dataclasses.fields(algorithm) if f.name not in NAMES}


def sweepable_own(algorithm: type) -> tuple[str, ...]:
    """The own hyperparameters of ``algorithm`` a sweep may vary: the floats."""
    return tuple(k for k, v in own_hyperparameters(algorithm).items() if type(v) is float)


def require_unit(algorithm: Any, *names: str) -> None:
    """Raises ConfigError (``algo.NAME: must be in [0, 1], got V``) for the first of the own
    hyperparameters ``names`` of ``algorithm`` outside [0, 1] (an epsilon, a fraction): the
    rule ``Algorithm.check`` of several algorithms uses."""
    for name in names:
        value = getattr(algorithm, name)
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"algo.{name}: must be in [0, 1], got {value}")


def linear_epsilon(update: Array, start: float | Array, finish: float | Array,
                   decay_updates: float | Array) -> Array:
    """Epsilon of the rollout of update ``update`` (updates done before it; int32 ``[]``):
    linear from ``start`` to ``finish`` over ``decay_updates`` updates, then ``finish``
    (``finish`` from the first update where ``decay_updates`` is 0): the schedule of every
    epsilon-greedy algorithm (PQN's, DQN's; CleanRL's ``linear_schedule`` in updates)."""
    decay = jnp.asarray(decay_updates, jnp.float32)  # traced where swept
    frac = jnp.where(decay > 0, jnp.clip(update / jnp.maximum(decay, 1e-9), 0.0, 1.0), 1.0)
    return start + frac * (finish - start)


def decay_updates(fraction: float | Array, env_steps: int, steps_per_update: int) -> Any:
    """Updates an epsilon decays over: ``fraction`` of the updates of ``env_steps`` env
    steps (``env_steps // steps_per_update``, rounded down, as PQN's reference)."""
    return fraction * (env_steps // steps_per_update)


# A schedule of gradient steps: ``(idx, take)``, the index arrays the gradient-step loop
# scans over (leading axis: the steps) and ``take(source, idx_k) -> minibatch``.
Schedule = tuple[Any, Callable[[Any, Any], Any]]


class Algorithm(Protocol):
    """What ``rlcore.learner.make_update_fn`` and the modes need of an algorithm;
    docs/design.md, "The algorithm protocol". ``AlgorithmBase`` gives every member after
    ``loss`` its default: the policy-and-value heads, acting by sampling the policy, no
    state of its own, epochs of minibatches over the last rollout."""

    # The minibatches its loss accepts, its own choice first: ``SAMPLES`` (``prepare``'s
    # record has ``take_samples``) and/or ``SEQUENCES`` (``take_envs``).
    minibatch_kinds: ClassVar[tuple[str, ...]]
    # ``MEAN`` or ``SUM``: how ``loss`` reduces over the minibatch's elements.
    loss_reduction: ClassVar[str]
    # The staleness corrections it implements (of ``rlcore.staleness.CORRECTIONS``; the
    # config field ``staleness_correction``).
    staleness_corrections: ClassVar[tuple[str, ...]]

    @classmethod
    def from_hparams(cls, hp: HParams) -> "Algorithm":
        """The algorithm with its hyperparameters read from ``hp``."""
        ...

    def prepare(self, params: Params, apply_fn: ApplyFn, trajectory: Trajectory) -> Any:
        """Per-rollout data for the loss, computed once before the epochs.

        Args:
          params: network parameters at the start of the update.
          apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
          trajectory: Trajectory ``[T, B_local, ...]``.

        Returns:
          A record of ``[T, B_local, ...]`` leaves with ``take_envs(idx [b])`` and, for
          ``SAMPLES``, ``take_samples(steps [T, b], envs [T, b])``.
        """
        ...

    def split_ready(self, batch: Any, axis_name: str | None) -> tuple[Any, "Algorithm"]:
        """``(batch', algorithm')`` for micro-batches: ``batch`` with what the loss needs of
        the whole minibatch computed over all of it (PPO: normalised advantages), and the
        algorithm whose ``loss`` on equal env chunks of ``batch'``, combined by
        ``loss_reduction``, is this one's ``loss`` on ``batch``."""
        ...

    def loss(self, params: Params, apply_fn: ApplyFn, batch: Any,
             axis_name: str | None) -> tuple[Array, LossMetrics]:
        """``(loss, LossMetrics)`` of a minibatch ``batch`` (a ``take_envs`` or
        ``take_samples`` of ``prepare``'s output: leaves ``[T, b, ...]``); statistics across
        ``axis_name`` devices where the math needs them."""
        ...

    @classmethod
    def heads(cls, spec: EnvSpec) -> Any:
        """The heads on the network's torso: a flax module ``features [N, F] -> (dist [N],
        value [N])`` (a distribution of ``rlcore.distributions``: the greedy policy, whose
        ``mode`` evaluation takes), or None for the platform's policy and value heads."""
        ...

    def act(self, dist: Distribution, update: Array) -> Distribution:
        """The distribution a rollout of update ``update`` (int32 ``[]``) samples its actions
        from, given the network's ``dist`` (``[N]``): ``dist`` itself (sampling), or e.g.
        ``rlcore.distributions.epsilon_greedy`` of its Q-values on a schedule."""
        ...

    def init_state(self, params: Params, spec: EnvSpec, num_envs: int, num_steps: int) -> Any:
        """The algorithm's own state of a fresh run of rollouts ``[num_steps, num_envs]``
        (all devices' envs) on ``spec`` (``LearnerState.extra``): a pytree of arrays,
        replicated on every device, but what it wraps in ``rlcore.types.ByEnv`` (leaves
        ``[R, num_envs, ...]``, split over the devices on the env axis); None for none."""
        ...

    def remember(self, extra: Any, data: Any, update: Array) -> tuple[Any, Any]:
        """``(extra', source)`` at update ``update`` (int32 ``[]``, updates done before it):
        the own state after taking ``prepare``'s ``data`` (``[T, B_local]``; a buffer stores
        it) and what the gradient steps draw their minibatches from (``data`` itself for an
        on-policy algorithm)."""
        ...

    def schedule(self, source: Any, extra: Any, key: PRNGKey,
                 axis_name: str | None) -> Schedule | None:
        """The update's gradient steps over ``source``: ``(idx, take)`` (``Schedule``; e.g.
        K minibatches sampled from a buffer with ``rlcore.replay.replay_indices``), or None
        for the platform's ``num_epochs x num_minibatches`` over the rollout. Device-count
        free as the platform's: draw per global block of envs."""
        ...

    def after_update(self, extra: Any, params: Params, update: Array) -> Any:
        """The own state after the gradient steps of the update that makes ``update``
        (int32 ``[]``) updates done, with the new ``params`` (a target network's refresh)."""
        ...

    def learns(self, extra: Any, update: Array) -> Array | bool:
        """Whether update ``update`` (int32 ``[]``, updates done before it) takes its gradient
        steps (a replay buffer's warm-up: not before it holds enough); ``True`` (a Python
        bool, the default) for every update: the steps run unconditionally. Optional: a
        class without it learns at every update."""
        ...

    def check(self) -> None:
        """Raises ``rlcore.errors.ConfigError`` (one ``algo.NAME: ...`` line) for values of
        its hyperparameters it cannot run; validation calls it before anything compiles."""
        ...


class AlgorithmBase(FromHParams):
    """The defaults of the protocol's members after ``loss`` (``Algorithm``), for an
    algorithm of the actor-critic family that learns from its last rollout: the platform's
    heads, sampling, no own state, the platform's epochs. PPO and IMPALA subclass it; an
    algorithm of the user's own overrides what it owns (docs/extending.md)."""

    @classmethod
    def heads(cls, spec: EnvSpec) -> Any:
        """None: the platform's policy and value heads."""
        del spec
        return None

    def act(self, dist: Distribution, update: Array) -> Distribution:
        """``dist``: actions are sampled from the policy."""
        del update
        return dist

    def init_state(self, params: Params, spec: EnvSpec, num_envs: int, num_steps: int) -> Any:
        """None: no state of its own."""
        del params, spec, num_envs, num_steps
        return None

    def remember(self, extra: Any, data: Any, update: Array) -> tuple[Any, Any]:
        """``(extra, data)``: the gradient steps read the last rollout."""
        del update
        return extra, data

    def schedule(self, source: Any, extra: Any, key: PRNGKey,
                 axis_name: str | None) -> Schedule | None:
        """None: the platform's epochs of minibatches."""
        del source, extra, key, axis_name
        return None

    def after_update(self, extra: Any, params: Params, update: Array) -> Any:
        """``extra`` as it is."""
        del params, update
        return extra

    def learns(self, extra: Any, update: Array) -> Array | bool:
        """True: every update takes its gradient steps."""
        del extra, update
        return True

    def check(self) -> None:
        """Nothing beyond the config fields' own rules."""
