"""Named pytrees shared by both architectures: Trajectory, EpisodeSummary, LearnerState,
EnvSpec, and the env-axis helpers of time-major records; and the type aliases of rlcore's
signatures (``Array``, ``PRNGKey``, ``Params``, ``ApplyFn``, ``Network``, ``Scalar``,
``Observe``).

Time-major throughout: a leaf of a Trajectory is ``[T, B, ...]`` (T rollout steps, B envs),
except ``bootstrap_obs`` ``[B, ...]``; the helpers here are the one place that knows it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar

import jax
import jax.numpy as jnp
import optax
from flax import struct
from jax.sharding import PartitionSpec as P

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# A jax array (or a tracer of one).
Array = jax.Array
# A typed PRNG key array (``jax.random.key``; ``rlcore.seeding`` derives every key): ``[]``
# for one key, ``[B]`` for a batch of them.
PRNGKey = jax.Array
# Network parameters: the pytree ``network.init`` returns (flax variables, or
# ``rlcore.normalize.NormParams`` wrapping them).
Params = Any
# A network's ``apply``: feed-forward ``(params, obs [N, ...]) -> (dist [N], value [N])``;
# recurrent ``(params, obs [T, N, ...], core CoreState [N, H], first [T, N]) -> (dist
# [T, N], value [T, N], core [N, H])`` (``rlcore.networks``; ``dist`` a distribution of
# ``rlcore.distributions``).
ApplyFn = Callable[..., Any]


class Network(Protocol):
    """What rlcore calls of a network: a flax module (``rlcore.networks``) or one wrapped in
    ``rlcore.normalize.Normalized``."""

    def init(self, key: PRNGKey, /, *args: Any) -> Any:
        """Fresh params from ``key`` and example inputs (``rlcore.networks.init_params``)."""
        ...

    def apply(self, params: Params, /, *args: Any) -> Any:
        """The network's function: an ``ApplyFn``."""
        ...


# A hyperparameter: a Python number (a constant of the compiled program) or a traced ``[]``
# array (a swept value, ``rlcore.hparams``).
Scalar = float | jax.Array
# Any pytree, and a record (a ``flax.struct`` dataclass) of time-major leaves.
Tree = TypeVar("Tree")
Record = TypeVar("Record", bound="DataclassInstance")


def take_envs(tree: Tree, idx: Array) -> Tree:
    """Selects envs ``idx [b]`` along axis 1 of every time-major leaf ``[T, B, ...]``."""
    return jax.tree.map(lambda x: jnp.take(x, idx, axis=1), tree)


def take_samples(tree: Tree, steps: Array, envs: Array) -> Tree:
    """Gathers ``x[steps, envs]`` (index arrays of one shape ``S``) from every time-major leaf
    ``[T, B, ...]``: leaves ``[*S, ...]``."""
    return jax.tree.map(lambda x: x[steps, envs], tree)


@struct.dataclass
class EnvSpec:
    """Static description of an environment's interface.

    Attributes:
      obs_shape: shape of one observation, e.g. ``(4,)`` or ``(4, 84, 84)``.
      obs_dtype: numpy dtype name of observations, e.g. ``"float32"`` or ``"uint8"``.
      num_actions: discrete actions: size of the action set; box actions: the action
        vector's size D.
      action_low, action_high: box actions: the bounds, D floats each (the env adapter clips
        actions to them); None for discrete actions.
      episode_info: names of the per-episode values the env reports when an episode ends
        (e.g. ``achievement/<name>`` and ``score_percent``); logged as
        ``episode/<name>``, the mean over the ended episodes (docs/design.md, "Episode
        info"). Empty for most envs.
    """

    obs_shape: tuple[int, ...] = struct.field(pytree_node=False)
    obs_dtype: str = struct.field(pytree_node=False)
    num_actions: int = struct.field(pytree_node=False)
    action_low: tuple[float, ...] | None = struct.field(pytree_node=False, default=None)
    action_high: tuple[float, ...] | None = struct.field(pytree_node=False, default=None)
    episode_info: tuple[str, ...] = struct.field(pytree_node=False, default=())

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one action: ``()`` (an int32 index) or ``(D,)`` (float32, a box)."""
        return () if self.action_low is None else (self.num_actions,)

    @property
    def action_dtype(self) -> str:
        """numpy dtype name of actions: ``"int32"`` or ``"float32"`` (a box)."""
        return "float32" if self.action_shape else "int32"


@struct.dataclass
class CoreState:
    """The state of a recurrent core (``rlcore.networks.RecurrentActorCritic``) for a batch
    of envs; every leaf ``[B, H]`` float32 (H: the core's hidden size).

    Attributes:
      h: the cell's output (LSTM hidden state, GRU state).
      c: the LSTM's cell state; None for a GRU.
    """

    h: jax.Array
    c: jax.Array | None = None


@struct.dataclass
class Trajectory:
    """A rollout of T steps of B envs, time-major.

    ``obs[t]`` is the observation the action ``action[t]`` was taken on; ``reward[t]``,
    ``terminated[t]`` and ``truncated[t]`` are what that step returned. Envs auto-reset in the
    step that ends an episode, so ``obs[t + 1]`` is then the first observation of the next
    episode. ``bootstrap_obs`` is the observation after the last step (``obs[T]``).

    Attributes:
      obs: ``[T, B, *obs_shape]``.
      action: ``[T, B]`` int32 (discrete) or ``[T, B, D]`` float32 (a box; the unclipped
        sample: the env adapter clips what it steps with).
      reward: ``[T, B]`` float32.
      terminated: ``[T, B]`` bool, the episode reached a terminal state.
      truncated: ``[T, B]`` bool, the episode was cut (time limit), not a terminal state.
      behaviour_dist_params: ``[T, B, P]`` float32, the parameters of the behaviour
        distribution, the policy that acted (``rlcore.distributions``: ``params()`` /
        ``from_params``): categorical, its logits (``P = A``); diagonal Gaussian,
        ``concatenate([mean, log_std], -1)`` (``P = 2 D``). The name is kept from the
        discrete-only days.
      behaviour_value: ``[T, B]`` float32, that policy's value estimates, shipped only where
        that policy is the learner's at the start of the update (policy lag 0: Anakin), so
        the learner can use them as its own; None elsewhere (Sebulba), and the learner
        recomputes them.
      bootstrap_obs: ``[B, *obs_shape]``.
      core_state: recurrent agents: CoreState ``[B, H]`` leaves, the core's state *before*
        step 0 (before its reset where ``first[0]``); the loss re-runs the core over each
        whole sequence from it. None for feed-forward agents.
      first: recurrent agents: ``[T, B]`` bool, ``obs[t]`` is the first observation of an
        episode (``terminated | truncated`` of step ``t - 1``; for ``t = 0`` that of the
        previous rollout's last step, True at the very start): the core restarts from zeros
        there. None for feed-forward agents. The bootstrap observation's flag is ``done[T - 1]``.
      final_value: ``[T, B]`` float32, where ``truncated[t]`` the acting policy's value of the
        episode's final observation (the one the auto-reset replaced), 0 elsewhere: what
        the value target of a truncation bootstraps on (``rlcore.returns.step_inputs``).
        None: time limits are not bootstrapped on it (``bootstrap_time_limits`` off).
      discounted_return: ``[T, B]`` float32, with ``normalize_reward`` each env's discounted
        return including step ``t`` (``rlcore.normalize.scale_rewards``; ``reward`` is then
        the scaled reward); None otherwise.
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    behaviour_dist_params: jax.Array
    behaviour_value: jax.Array | None
    bootstrap_obs: jax.Array
    core_state: CoreState | None = None
    first: jax.Array | None = None
    final_value: jax.Array | None = None
    discounted_return: jax.Array | None = None

    # Leaves whose env axis is 0 (``[B, ...]``); every other leaf is time-major.
    _ENV_MAJOR = ("bootstrap_obs", "core_state")

    def _map_env_axis(self, fn: Callable[[Array, int], Array]) -> "Trajectory":
        """``fn(leaf, env_axis)`` on every leaf: axis 1 of ``[T, B, ...]``, axis 0 of
        ``bootstrap_obs`` and ``core_state``."""
        return map_env_axis(self, fn, self._ENV_MAJOR)

    def take_envs(self, idx: Array) -> "Trajectory":
        """The envs ``idx [b]`` (a minibatch): leaves ``[T, b, ...]``, bootstrap ``[b, ...]``."""
        return self._map_env_axis(lambda x, axis: jnp.take(x, idx, axis=axis))

    def slice_envs(self, lo: int, hi: int) -> "Trajectory":
        """Envs ``lo .. hi - 1`` (numpy or jax leaves; a view where numpy allows)."""
        return self._map_env_axis(
            lambda x, axis: x[:, lo:hi] if axis == 1 else x[lo:hi])

    @staticmethod
    def concat_envs(trajs: Sequence["Trajectory"]) -> "Trajectory":
        """Trajectories of consecutive env blocks joined along the env axis (jax arrays on
        one device); a single one is returned as is."""
        if len(trajs) == 1:
            return trajs[0]
        major = Trajectory._ENV_MAJOR
        body = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1),
                            *[dataclasses.replace(t, **dict.fromkeys(major)) for t in trajs])
        return dataclasses.replace(
            body, **{k: jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0),
                                     *[getattr(t, k) for t in trajs])
                     for k in major})

    @staticmethod
    def env_partition(axis_name: str, with_value: bool = True,
                      core_state: CoreState | None = None,
                      final_value: bool = False,
                      discounted_return: bool = False) -> "Trajectory":
        """PartitionSpecs that split the env axis over mesh axis ``axis_name`` (for
        ``shard_map`` and ``NamedSharding``); ``with_value=False`` where ``behaviour_value``
        is None; ``core_state``: a CoreState of the recurrent agent's structure (any
        leaves), None for feed-forward agents; ``final_value``, ``discounted_return``: the
        trajectory has that field."""
        tm: Any = P(None, axis_name)  # the leaves of this Trajectory are PartitionSpecs
        env: Any = P(axis_name)
        recurrent = core_state is not None
        return Trajectory(obs=tm, action=tm, reward=tm, terminated=tm, truncated=tm,
                          behaviour_dist_params=tm, behaviour_value=tm if with_value else None,
                          bootstrap_obs=env, core_state=jax.tree.map(lambda _: env, core_state),
                          first=tm if recurrent else None,
                          final_value=tm if final_value else None,
                          discounted_return=tm if discounted_return else None)


def map_env_axis(record: Record, fn: Callable[[Array, int], Array],
                 env_major: Sequence[str]) -> Record:
    """``fn(leaf, env_axis)`` on every leaf of a time-major record: axis 0 for the leaves
    under the fields ``env_major`` (``[B, ...]``), axis 1 for all others (``[T, B, ...]``)."""
    body = jax.tree.map(lambda x: fn(x, 1),
                        dataclasses.replace(record, **dict.fromkeys(env_major)))
    return dataclasses.replace(
        body, **{k: jax.tree.map(lambda x: fn(x, 0), getattr(record, k)) for k in env_major})


# What the update calls after its gradient steps: ``(params, trajectory [T, B_local],
# axis_name) -> params`` (``rlcore.normalize.observer``: the normalisation statistics).
Observe = Callable[[Params, Trajectory, str | None], Params]


@struct.dataclass
class EpisodeSummary:
    """Sums over a set of ended episodes: what a rollout reports and a log window adds up.

    Leaves are scalars (device or host numbers), or ``[N]`` where a caller keeps one
    summary per device.

    Attributes:
      return_sum: sum of the undiscounted returns of the ended episodes.
      length_sum: sum of their lengths.
      count: how many ended.
      info: ``{name: sum}`` of the env's per-episode values (``EnvSpec.episode_info``) over
        the ended episodes; None where the env reports none.
    """

    return_sum: Any
    length_sum: Any
    count: Any
    info: Any = None

    @classmethod
    def zero(cls) -> "EpisodeSummary":
        return cls(return_sum=0.0, length_sum=0.0, count=0)

    def __add__(self, other: "EpisodeSummary") -> "EpisodeSummary":
        """Host arithmetic: python floats and an int count (a name one side lacks adds 0)."""
        info = None
        if self.info is not None or other.info is not None:
            mine, theirs = self.info or {}, other.info or {}
            info = {k: float(mine.get(k, 0.0)) + float(theirs.get(k, 0.0))
                    for k in dict.fromkeys((*mine, *theirs))}
        return EpisodeSummary(return_sum=float(self.return_sum) + float(other.return_sum),
                              length_sum=float(self.length_sum) + float(other.length_sum),
                              count=int(self.count) + int(other.count), info=info)

    def means(self) -> tuple[float | None, float | None]:
        """Mean return and mean length, ``(None, None)`` when no episode ended."""
        if int(self.count) == 0:
            return None, None
        return float(self.return_sum) / int(self.count), float(self.length_sum) / int(self.count)

    def info_means(self, names: tuple[str, ...] = ()) -> dict[str, float | None]:
        """``{name: mean over the ended episodes}`` of ``names`` (default: those held),
        None when no episode ended."""
        names = names or tuple(self.info or ())
        count = int(self.count)
        return {n: float((self.info or {}).get(n, 0.0)) / count if count else None
                for n in names}

    def as_list(self, names: tuple[str, ...] = ()) -> list[float]:
        """``[return_sum, length_sum, count, *info sums of names]`` (JSON; a device array)."""
        info = self.info or {}
        return [float(self.return_sum), float(self.length_sum), int(self.count),
                *(float(info.get(n, 0.0)) for n in names)]

    @classmethod
    def from_list(cls, values, names: tuple[str, ...] = ()) -> "EpisodeSummary":
        """The inverse of ``as_list(names)`` (leaves as given: host or device numbers)."""
        info = {n: values[3 + i] for i, n in enumerate(names)} if names else None
        return cls(values[0], values[1], values[2], info)


@struct.dataclass
class LearnerState:
    """Everything the learner updates.

    Attributes:
      params: network parameters.
      opt_state: optax optimizer state.
      update: int32 scalar, number of updates done.
      extra: the algorithm's own state (``Algorithm.init_state``: target params, a replay
        buffer, a temperature), initialised, carried, sharded (``state_partition``) and
        checkpointed with the rest; None for an algorithm without one (PPO, IMPALA), which
        leaves the state's structure, and so its checkpoints, as before
        (docs/design.md, "The algorithm protocol").
    """

    params: Params
    opt_state: optax.OptState
    update: jax.Array
    extra: Any = None


@struct.dataclass
class ByEnv:
    """A part of an algorithm's own state held per env, like a trajectory: every leaf of
    ``data`` is time-major ``[R, B, ...]`` (``B`` the run's envs; ``R`` rows per env, e.g. a
    replay buffer's), split over the devices on its env axis as the rollouts are, so each
    device keeps the rows of its own envs (``state_partition``).

    Attributes:
      data: the pytree of ``[R, B, ...]`` leaves.
    """

    data: Any


def _is_by_env(x: Any) -> bool:
    return isinstance(x, ByEnv)


def state_partition(state: LearnerState, axis_name: str, agents: bool = False) -> Any:
    """PartitionSpecs of a ``LearnerState`` (any leaves: arrays or shapes) over the mesh
    axis ``axis_name``: replicated (one ``P()`` where ``extra`` is None), but the leaves
    under a ``ByEnv`` of ``extra`` split on their env axis (axis 1; 2 with a leading agent
    axis, ``agents``)."""
    if state.extra is None:
        return P()
    env: Any = P(None, None, axis_name) if agents else P(None, axis_name)

    def spec(x: Any) -> Any:
        return jax.tree.map(lambda _: env, x) if _is_by_env(x) else P()

    replicated: Any = P()  # the leaves of this LearnerState are PartitionSpecs
    return LearnerState(params=jax.tree.map(lambda _: P(), state.params),
                        opt_state=jax.tree.map(lambda _: P(), state.opt_state),
                        update=replicated,
                        extra=jax.tree.map(spec, state.extra, is_leaf=_is_by_env))
