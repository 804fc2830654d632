"""Action distributions as objects: what a policy head returns and what every consumer of the
policy (rollouts, actors, evaluation, losses) calls.

- ``Categorical``: discrete actions, int32 ``[...]`` from ``logits [..., A]``.
- ``DiagGaussian``: box actions, float32 ``[..., D]`` from ``mean [..., D]`` and ``log_std
  [..., D]`` (the policy head's log-std is one learned vector, state-independent as in
  CleanRL's continuous PPO, broadcast to the mean's shape). Actions are sampled unbounded;
  the env adapters clip them to the action bounds, and log-probabilities are those of the
  unclipped sample.

Both are named pytrees (``flax.struct.dataclass``), so ``jax.tree.map`` reshapes and slices
them and they pass through ``jit``, ``vmap`` and ``scan``. Methods, for a distribution of
batch shape ``S``:

- ``sample(key)``: one action per row ``[*S, ...]`` with one key;
- ``sample_rows(keys)``: rows ``[N]`` with one key each (``keys [N]``): the actors' rule;
- ``noise(keys, spec)`` (classmethod) and ``sample_from_noise(noise)``: the same samples as
  ``sample_rows`` with randomness drawn ahead (Anakin draws a rollout's noise before its
  steps);
- ``log_prob(action) [*S]``, ``entropy() [*S]``, both at once ``log_prob_entropy(action)``,
  ``mode() [*S, ...]`` (the greedy action: argmax, or the mean);
- ``params() [*S, P]`` and ``from_params(params)`` (classmethod): the flat float32 vector a
  Trajectory stores as ``behaviour_dist_params`` (categorical: the logits, ``P = A``, bit for bit;
  Gaussian: ``concatenate([mean, log_std], -1)``, ``P = 2 D``).

``distribution_for(spec)`` is the one place that chooses the family from the env's action
space (``EnvSpec.action_shape``: ``()`` discrete, ``(D,)`` a box).
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rlcore.seeding import map_keys
from rlcore.types import EnvSpec

LOG_2PI = math.log(2.0 * math.pi)


def _take_action(log_p: jax.Array, action: jax.Array) -> jax.Array:
    """``log_p[..., action]``: ``[*S]`` of log-probabilities ``[*S, A]`` and int ``action
    [*S]``."""
    return jnp.take_along_axis(log_p, action[..., None], axis=-1)[..., 0]


def _entropy(log_p: jax.Array) -> jax.Array:
    """``-sum_a p(a) log p(a)``: ``[*S]`` of log-probabilities ``[*S, A]``."""
    return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)


@struct.dataclass
class Categorical:
    """A categorical distribution over ``A`` actions per row.

    Attributes:
      logits: ``[*S, A]`` float32 unnormalised log-probabilities.
    """

    logits: jax.Array

    @classmethod
    def from_head(cls, module: nn.Module, out: jax.Array) -> "Categorical":
        """The distribution of a policy head's dense output ``out [N, A]`` (``module``:
        the network, unused)."""
        del module
        return cls(logits=out)

    @staticmethod
    def param_size(spec: EnvSpec) -> int:
        """P: floats per row of ``params()``, ``A``."""
        return spec.num_actions

    @classmethod
    def from_params(cls, params: jax.Array) -> "Categorical":
        """The distribution whose ``params()`` are ``params [*S, A]``."""
        return cls(logits=params)

    def params(self) -> jax.Array:
        """``[*S, A]``: the logits."""
        return self.logits

    def sample(self, key: jax.Array) -> jax.Array:
        """Gumbel-max samples int32 ``[*S]`` (``jax.random.categorical``)."""
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def sample_rows(self, keys: jax.Array) -> jax.Array:
        """int32 ``[N]``: row ``i`` sampled with ``keys[i]`` (``S = (N,)``)."""
        return jax.vmap(lambda d, k: d.sample(k))(self, keys)

    @staticmethod
    def noise(keys: jax.Array, spec: EnvSpec) -> jax.Array:
        """Gumbel noise ``[*K, A]`` for keys ``[*K]``: ``sample_from_noise`` of it equals
        ``sample_rows(keys)`` (how ``jax.random.categorical`` samples)."""
        return map_keys(lambda k: jax.random.gumbel(k, (spec.num_actions,)), keys)

    def sample_from_noise(self, noise: jax.Array) -> jax.Array:
        """``argmax(logits + noise)``: int32 ``[*S]``."""
        return jnp.argmax(self.logits + noise, axis=-1).astype(jnp.int32)

    def log_prob(self, action: jax.Array) -> jax.Array:
        """``log pi(action)`` ``[*S]`` of int ``action [*S]``."""
        return _take_action(jax.nn.log_softmax(self.logits), action)

    def entropy(self) -> jax.Array:
        """``-sum_a pi(a) log pi(a)``: ``[*S]``."""
        return _entropy(jax.nn.log_softmax(self.logits))

    def log_prob_entropy(self, action: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(log_prob(action), entropy())`` from one ``log_softmax`` (what the losses
        differentiate: one node, so the gradient sums its two uses in one fixed order)."""
        log_p = jax.nn.log_softmax(self.logits)
        return _take_action(log_p, action), _entropy(log_p)

    def mode(self) -> jax.Array:
        """The most probable action, int32 ``[*S]`` (argmax; the lowest index on ties)."""
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)


@struct.dataclass
class DiagGaussian:
    """A Gaussian with diagonal covariance over ``D``-dimensional actions per row.

    Attributes:
      mean: ``[*S, D]`` float32.
      log_std: ``[*S, D]`` float32 log standard deviations.
    """

    mean: jax.Array
    log_std: jax.Array

    # Initial value of the policy head's state-independent log-std (CleanRL: zeros, std 1).
    INIT_LOG_STD = 0.0

    @classmethod
    def from_head(cls, module: nn.Module, out: jax.Array) -> "DiagGaussian":
        """The distribution of a policy head's dense output ``out [N, D]`` (the mean) and
        the learned vector ``log_std [D]``, a parameter of ``module`` (inside its compact
        call), broadcast over rows."""
        log_std = module.param("log_std", nn.initializers.constant(cls.INIT_LOG_STD),
                               (out.shape[-1],))
        return cls(mean=out, log_std=jnp.broadcast_to(log_std, out.shape))

    @staticmethod
    def param_size(spec: EnvSpec) -> int:
        """P: floats per row of ``params()``, ``2 D``."""
        return 2 * spec.num_actions

    @classmethod
    def from_params(cls, params: jax.Array) -> "DiagGaussian":
        """The distribution whose ``params()`` are ``params [*S, 2 D]``."""
        mean, log_std = jnp.split(params, 2, axis=-1)
        return cls(mean=mean, log_std=log_std)

    def params(self) -> jax.Array:
        """``[*S, 2 D]``: ``concatenate([mean, log_std], -1)``."""
        return jnp.concatenate([self.mean, self.log_std], axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        """``mean + exp(log_std) * N(0, 1)``: float32 ``[*S, D]``, unbounded."""
        return self.sample_from_noise(jax.random.normal(key, self.mean.shape))

    def sample_rows(self, keys: jax.Array) -> jax.Array:
        """float32 ``[N, D]``: row ``i`` sampled with ``keys[i]`` (``S = (N,)``)."""
        return jax.vmap(lambda d, k: d.sample(k))(self, keys)

    @staticmethod
    def noise(keys: jax.Array, spec: EnvSpec) -> jax.Array:
        """Standard normal noise ``[*K, D]`` for keys ``[*K]``: ``sample_from_noise`` of it
        equals ``sample_rows(keys)``."""
        return map_keys(lambda k: jax.random.normal(k, (spec.num_actions,)), keys)

    def sample_from_noise(self, noise: jax.Array) -> jax.Array:
        """``mean + exp(log_std) * noise``: float32 ``[*S, D]``."""
        return self.mean + jnp.exp(self.log_std) * noise

    def log_prob(self, action: jax.Array) -> jax.Array:
        """``sum_d log N(action_d; mean_d, std_d^2)``: ``[*S]`` of ``action [*S, D]``."""
        z = (action - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * jnp.square(z) - self.log_std - 0.5 * LOG_2PI, axis=-1)

    def entropy(self) -> jax.Array:
        """``sum_d (0.5 + 0.5 log(2 pi) + log_std_d)``: ``[*S]``."""
        return jnp.sum(0.5 + 0.5 * LOG_2PI + self.log_std, axis=-1)

    def log_prob_entropy(self, action: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(log_prob(action), entropy())``."""
        return self.log_prob(action), self.entropy()

    def mode(self) -> jax.Array:
        """The mean, ``[*S, D]`` (the env adapter clips it like any action)."""
        return self.mean


Distribution = Categorical | DiagGaussian


def distribution_for(spec: EnvSpec) -> type[Categorical] | type[DiagGaussian]:
    """The family of ``spec``'s action space: ``Categorical`` for discrete actions
    (``action_shape == ()``), ``DiagGaussian`` for a box ``(D,)``. The one place that tells
    the two apart."""
    return DiagGaussian if spec.action_shape else Categorical


# The smallest probability ``epsilon_greedy`` writes: its log (-69) is finite, and no
# float32 Gumbel draw (within about -2.8 and 16.7) lifts such an action over the greedy one.
TINY_PROB = 1e-30


def epsilon_greedy(q: jax.Array, epsilon: jax.Array | float) -> Categorical:
    """The epsilon-greedy policy of Q-values ``q [*S, A]``: probability ``1 - epsilon +
    epsilon / A`` on the first argmax, ``epsilon / A`` on every other action, as a
    ``Categorical`` of those log-probabilities (so sampling, ``params()`` and the
    behaviour log-probabilities are a categorical's; probabilities below ``TINY_PROB``
    are ``TINY_PROB``: epsilon 0 acts greedily).

    Args:
      q: ``[*S, A]`` action values.
      epsilon: ``[]`` (or broadcastable to ``[*S]``) in [0, 1].
    """
    num_actions = q.shape[-1]
    greedy = jax.nn.one_hot(jnp.argmax(q, axis=-1), num_actions, dtype=q.dtype)
    eps = jnp.broadcast_to(jnp.asarray(epsilon, q.dtype), q.shape[:-1])[..., None]
    probs = (1.0 - eps) * greedy + eps / num_actions
    return Categorical(logits=jnp.log(jnp.maximum(probs, TINY_PROB)))
