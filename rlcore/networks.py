"""Actor-critic networks: ``obs -> (logits, value)``.

- ``MLPActorCritic``: separate 2x64 tanh actor and critic, orthogonal init (sqrt 2 hidden,
  0.01 policy head, 1.0 value head), as in PureJaxRL / CleanRL.
- ``NatureCNN``: Mnih et al. 2015 torso (32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512).
- ``ImpalaResNet``: Espeholt et al. 2018 torso, channels 16/32/32, each stage conv 3x3,
  max-pool 3x3 stride 2 and two residual blocks, then dense 256.
- ``MinAtarCNN``: the MinAtar network (Young & Tian 2019, arXiv 1903.03176): one 16x3x3
  stride-1 VALID conv (computed as a dense layer over 3x3 patches) over the ``[H, W, C]``
  object-channel grid, then dense 128, ReLU. MinAtar frames are 10x10 binary grids, one
  channel per object kind; one small conv sees each cell's neighbourhood (ball next to
  brick or paddle) with weights shared across the grid, where a flattened MLP has to learn
  every position apart.

Image networks take uint8 frame stacks ``[N, C, H, W]`` (EnvPool layout), scale to [0, 1]
and move channels last. All take a batch ``[N, *obs_shape]`` and return ``logits``
``[N, A]`` and ``value`` ``[N]``.

Recurrent agents (``make_network(..., recurrent="lstm" | "gru")``): any of these torsos
(without its heads), then an LSTM or GRU cell (flax's ``OptimizedLSTMCell`` / ``GRUCell``),
then the policy and value heads: ``RecurrentActorCritic``, a sequence in and a sequence out,
``(obs [T, N, ...], core [N, H], first [T, N]) -> (logits [T, N, A], value [T, N], core
[N, H])``. The core restarts from zeros (not a learned state) at the first step of every
episode, inside the step. ``step_network`` (one acting step, carry in and carry out) and
``unroll_network`` (a whole sequence, in the losses) are the two ways the modes and losses
call any network, feed-forward or recurrent: a None core state means feed-forward.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from rlcore.types import CoreState, EnvSpec


def _ortho(scale):
    return nn.initializers.orthogonal(scale)


class _Heads(nn.Module):
    """Policy and value heads on a shared torso output ``[N, D]``."""

    num_actions: int

    @nn.compact
    def __call__(self, h):
        logits = nn.Dense(self.num_actions, kernel_init=_ortho(0.01), name="policy")(h)
        value = nn.Dense(1, kernel_init=_ortho(1.0), name="value")(h)
        return logits, value[..., 0]


class MLPActorCritic(nn.Module):
    """Separate tanh MLP actor and critic. ``obs [N, ...] -> (logits [N, A], value [N])``."""

    num_actions: int
    hidden: Sequence[int] = (64, 64)
    heads: bool = True  # False: the torso of a recurrent net, ``obs -> features [N, D]``
    takes_frames: ClassVar[bool] = False  # any observation shape, flattened

    @nn.compact
    def __call__(self, obs):
        x = obs.reshape((obs.shape[0], -1)).astype(jnp.float32)
        a, v = x, x
        for i, width in enumerate(self.hidden):
            a = nn.tanh(nn.Dense(width, kernel_init=_ortho(np.sqrt(2)), name=f"actor_{i}")(a))
            if not self.heads:  # one shared stream (the actor's) feeds the recurrent core
                continue
            v = nn.tanh(nn.Dense(width, kernel_init=_ortho(np.sqrt(2)), name=f"critic_{i}")(v))
        if not self.heads:
            return a
        logits = nn.Dense(self.num_actions, kernel_init=_ortho(0.01), name="policy")(a)
        value = nn.Dense(1, kernel_init=_ortho(1.0), name="value")(v)
        return logits, value[..., 0]


def _frames_nhwc(obs):
    """uint8 ``[N, C, H, W]`` -> float32 ``[N, H, W, C]`` in [0, 1]."""
    return jnp.transpose(obs.astype(jnp.float32) / 255.0, (0, 2, 3, 1))


class NatureCNN(nn.Module):
    """Nature DQN torso with actor-critic heads. ``obs uint8 [N, C, H, W]``."""

    num_actions: int
    heads: bool = True  # False: the torso of a recurrent net, ``obs -> features [N, D]``
    takes_frames: ClassVar[bool] = True  # uint8 [C, H, W] frame stacks only

    @nn.compact
    def __call__(self, obs):
        x = _frames_nhwc(obs)
        for feat, k, s in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(nn.Conv(feat, (k, k), (s, s), padding="VALID",
                                kernel_init=_ortho(np.sqrt(2)))(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(512, kernel_init=_ortho(np.sqrt(2)))(x))
        return _Heads(self.num_actions)(x) if self.heads else x


class _ResidualBlock(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.channels, (3, 3), padding="SAME")(nn.relu(x))
        y = nn.Conv(self.channels, (3, 3), padding="SAME")(nn.relu(y))
        return x + y


class ImpalaResNet(nn.Module):
    """IMPALA ResNet torso (16/32/32) with actor-critic heads. ``obs uint8 [N, C, H, W]``."""

    num_actions: int
    channels: Sequence[int] = (16, 32, 32)
    dense: int = 256
    heads: bool = True  # False: the torso of a recurrent net, ``obs -> features [N, D]``
    takes_frames: ClassVar[bool] = True  # uint8 [C, H, W] frame stacks only

    @nn.compact
    def __call__(self, obs):
        x = _frames_nhwc(obs)
        for ch in self.channels:
            x = nn.Conv(ch, (3, 3), padding="SAME")(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = _ResidualBlock(ch)(x)
            x = _ResidualBlock(ch)(x)
        x = nn.relu(x).reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.dense, kernel_init=_ortho(np.sqrt(2)))(x))
        return _Heads(self.num_actions)(x) if self.heads else x


def _patches_3x3(x):
    """``[N, H, W, C] -> [N, H-2, W-2, 9C]``: every 3x3 neighbourhood, (dy, dx, c) order."""
    h, w = x.shape[1] - 2, x.shape[2] - 2
    return jnp.concatenate([x[:, dy:dy + h, dx:dx + w, :] for dy in range(3) for dx in range(3)],
                           axis=-1)


class MinAtarCNN(nn.Module):
    """MinAtar conv torso with actor-critic heads. ``obs [N, H, W, C]`` (any dtype)."""

    num_actions: int
    features: int = 16
    dense: int = 128
    heads: bool = True  # False: the torso of a recurrent net, ``obs -> features [N, D]``
    takes_frames: ClassVar[bool] = False
    obs_ndim: ClassVar[int] = 3  # [H, W, C] grids (gymnax MinAtar layout)

    @nn.compact
    def __call__(self, obs):
        x = _patches_3x3(obs.astype(jnp.float32))  # [N, H-2, W-2, 9C]
        # The 3x3 VALID conv as a dense layer over the patches: the same function, run as
        # one GEMM. XLA on CPU runs this 16-channel conv (and its gradient) inside the
        # rollout and update loops far slower than the GEMM.
        x = nn.relu(nn.Dense(self.features, kernel_init=_ortho(np.sqrt(2)), name="conv")(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.dense, kernel_init=_ortho(np.sqrt(2)))(x))
        return _Heads(self.num_actions)(x) if self.heads else x


# name -> module class; the config's ``network`` choices.
NETWORKS = {"mlp": MLPActorCritic, "nature_cnn": NatureCNN, "impala_resnet": ImpalaResNet,
            "minatar_cnn": MinAtarCNN}
# Networks that need uint8 [C, H, W] frames (validation refuses them for other envs).
IMAGE_NETWORKS = tuple(name for name, cls in NETWORKS.items() if cls.takes_frames)


NO_CORE = "none"
# The config's ``recurrent`` choices: no core, or the cell after the torso.
CORES = (NO_CORE, "lstm", "gru")


class _ResetCell(nn.Module):
    """One step of an LSTM or GRU cell whose state restarts from zeros where ``first``:
    ``(core CoreState [N, H], x [N, D], first [N]) -> (core [N, H], y [N, H])``."""

    cell: str
    hidden_size: int

    @nn.compact
    def __call__(self, core: CoreState, x, first):
        core = jax.tree.map(lambda s: jnp.where(first[:, None], jnp.zeros_like(s), s), core)
        if self.cell == "lstm":
            (c, h), y = nn.OptimizedLSTMCell(self.hidden_size, name="lstm")((core.c, core.h), x)
            return CoreState(h=h, c=c), y
        h, y = nn.GRUCell(self.hidden_size, name="gru")(core.h, x)
        return CoreState(h=h), y


class RecurrentActorCritic(nn.Module):
    """A torso, an LSTM or GRU core and the policy and value heads, over whole sequences.

    ``(obs [T, N, *obs_shape], core CoreState [N, H], first [T, N] bool) -> (logits
    [T, N, A], value [T, N], core [N, H])``: the torso runs on all ``T * N`` observations at
    once, the cell is scanned along time (its state set to zeros before step ``t`` where
    ``first[t]``), the heads run on all outputs at once. One acting step is ``T = 1``
    (``step_network``).

    Attributes:
      torso: a network of ``NETWORKS`` built with ``heads=False``: ``[N, ...] -> [N, D]``.
      num_actions: A.
      cell: ``"lstm"`` or ``"gru"``.
      hidden_size: H.
    """

    torso: nn.Module
    num_actions: int
    cell: str
    hidden_size: int

    @nn.compact
    def __call__(self, obs, core: CoreState, first):
        t, n = obs.shape[:2]
        x = self.torso(obs.reshape((t * n,) + obs.shape[2:]))
        scan = nn.scan(_ResetCell, variable_broadcast="params", split_rngs={"params": False})
        core, y = scan(self.cell, self.hidden_size, name="core")(
            core, x.reshape((t, n, x.shape[-1])), first)
        logits, value = _Heads(self.num_actions, name="heads")(y.reshape((t * n, -1)))
        return logits.reshape((t, n, -1)), value.reshape((t, n)), core

    def initial_core(self, n: int) -> CoreState:
        """The zero state of ``n`` envs: leaves ``[n, H]`` float32."""
        zeros = jnp.zeros((n, self.hidden_size), jnp.float32)
        return CoreState(h=zeros, c=zeros if self.cell == "lstm" else None)


def make_network(name: str, spec: EnvSpec, recurrent: str = NO_CORE,
                 hidden_size: int = 128) -> nn.Module:
    """Returns the network ``name`` (a key of ``NETWORKS``) for ``spec``'s action count; with
    ``recurrent`` ``"lstm"`` or ``"gru"`` that network's torso in a ``RecurrentActorCritic``
    whose core has ``hidden_size`` units."""
    if recurrent == NO_CORE:
        return NETWORKS[name](num_actions=spec.num_actions)
    return RecurrentActorCritic(torso=NETWORKS[name](num_actions=spec.num_actions, heads=False),
                                num_actions=spec.num_actions, cell=recurrent,
                                hidden_size=hidden_size)


def initial_core(network: nn.Module, n: int) -> CoreState | None:
    """The core state a recurrent ``network`` starts ``n`` envs from (zeros ``[n, H]``);
    None for a feed-forward one."""
    return network.initial_core(n) if isinstance(network, RecurrentActorCritic) else None


def init_params(network: nn.Module, key, spec: EnvSpec):
    """``network.init`` on one dummy observation of ``spec`` (a sequence of one step for a
    recurrent network)."""
    dummy = jnp.zeros((1,) + tuple(spec.obs_shape), jnp.dtype(spec.obs_dtype))
    core = initial_core(network, 1)
    if core is None:
        return network.init(key, dummy)
    return network.init(key, dummy[None], core, jnp.ones((1, 1), bool))


def step_network(apply_fn: Callable, params, obs, core: CoreState | None, first):
    """One acting step of a feed-forward (``core`` None) or recurrent network.

    Args:
      apply_fn: the network's ``apply``.
      params: its parameters.
      obs: ``[N, *obs_shape]``.
      core: CoreState ``[N, H]`` before this step, or None (feed-forward).
      first: ``[N]`` bool, ``obs`` starts an episode (unused, may be None, when feed-forward).

    Returns:
      ``(logits [N, A], value [N], core [N, H] or None)``, the core after this step.
    """
    if core is None:
        logits, value = apply_fn(params, obs)
        return logits, value, None
    logits, value, core = apply_fn(params, obs[None], core, first[None])
    return logits[0], value[0], core


def unroll_network(apply_fn: Callable, params, obs, core: CoreState | None = None,
                   first=None):
    """A feed-forward or recurrent network over time-major observations.

    Args:
      apply_fn: the network's ``apply``.
      params: its parameters.
      obs: ``[T, N, *obs_shape]``.
      core: CoreState ``[N, H]`` before step 0, or None: feed-forward, every observation on
        its own (one batch of ``T * N``).
      first: ``[T, N]`` bool episode starts (recurrent only).

    Returns:
      ``(logits [T, N, A], value [T, N])``.
    """
    t, n = obs.shape[:2]
    if core is None:
        logits, value = apply_fn(params, obs.reshape((t * n,) + obs.shape[2:]))
        return logits.reshape((t, n) + logits.shape[1:]), value.reshape((t, n))
    logits, value, _ = apply_fn(params, obs, core, first)
    return logits, value
