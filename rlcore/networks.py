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
"""

from __future__ import annotations

from typing import ClassVar, Sequence

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from rlcore.types import EnvSpec


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
    takes_frames: ClassVar[bool] = False  # any observation shape, flattened

    @nn.compact
    def __call__(self, obs):
        x = obs.reshape((obs.shape[0], -1)).astype(jnp.float32)
        a, v = x, x
        for i, width in enumerate(self.hidden):
            a = nn.tanh(nn.Dense(width, kernel_init=_ortho(np.sqrt(2)), name=f"actor_{i}")(a))
            v = nn.tanh(nn.Dense(width, kernel_init=_ortho(np.sqrt(2)), name=f"critic_{i}")(v))
        logits = nn.Dense(self.num_actions, kernel_init=_ortho(0.01), name="policy")(a)
        value = nn.Dense(1, kernel_init=_ortho(1.0), name="value")(v)
        return logits, value[..., 0]


def _frames_nhwc(obs):
    """uint8 ``[N, C, H, W]`` -> float32 ``[N, H, W, C]`` in [0, 1]."""
    return jnp.transpose(obs.astype(jnp.float32) / 255.0, (0, 2, 3, 1))


class NatureCNN(nn.Module):
    """Nature DQN torso with actor-critic heads. ``obs uint8 [N, C, H, W]``."""

    num_actions: int
    takes_frames: ClassVar[bool] = True  # uint8 [C, H, W] frame stacks only

    @nn.compact
    def __call__(self, obs):
        x = _frames_nhwc(obs)
        for feat, k, s in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(nn.Conv(feat, (k, k), (s, s), padding="VALID",
                                kernel_init=_ortho(np.sqrt(2)))(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(512, kernel_init=_ortho(np.sqrt(2)))(x))
        return _Heads(self.num_actions)(x)


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
        return _Heads(self.num_actions)(x)


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
        return _Heads(self.num_actions)(x)


# name -> module class; the config's ``network`` choices.
NETWORKS = {"mlp": MLPActorCritic, "nature_cnn": NatureCNN, "impala_resnet": ImpalaResNet,
            "minatar_cnn": MinAtarCNN}
# Networks that need uint8 [C, H, W] frames (validation refuses them for other envs).
IMAGE_NETWORKS = tuple(name for name, cls in NETWORKS.items() if cls.takes_frames)


def make_network(name: str, spec: EnvSpec) -> nn.Module:
    """Returns the network ``name`` (a key of ``NETWORKS``) for ``spec``'s action count."""
    return NETWORKS[name](num_actions=spec.num_actions)
