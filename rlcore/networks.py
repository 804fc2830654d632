"""Actor-critic networks: ``obs -> (logits, value)``.

- ``MLPActorCritic``: separate 2x64 tanh actor and critic, orthogonal init (sqrt 2 hidden,
  0.01 policy head, 1.0 value head), as in PureJaxRL / CleanRL.
- ``NatureCNN``: Mnih et al. 2015 torso (32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512).
- ``ImpalaResNet``: Espeholt et al. 2018 torso, channels 16/32/32, each stage conv 3x3,
  max-pool 3x3 stride 2 and two residual blocks, then dense 256.

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


# name -> module class; the config's ``network`` choices.
NETWORKS = {"mlp": MLPActorCritic, "nature_cnn": NatureCNN, "impala_resnet": ImpalaResNet}
# Networks that need uint8 [C, H, W] frames (validation refuses them for other envs).
IMAGE_NETWORKS = tuple(name for name, cls in NETWORKS.items() if cls.takes_frames)


def make_network(name: str, spec: EnvSpec) -> nn.Module:
    """Returns the network ``name`` (a key of ``NETWORKS``) for ``spec``'s action count."""
    return NETWORKS[name](num_actions=spec.num_actions)
