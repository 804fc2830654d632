"""A small torso of the user's (docs/extending.md, "Your own network"): one 3x3 convolution
over the grid's planes, then a dense layer. ``obs [N, H, W, C] -> features [N, width]``."""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp


class GridTorso(nn.Module):
    """``channels`` 3x3 filters (ReLU), flattened, then ``width`` units (ReLU)."""

    channels: int = 16
    width: int = 64

    @nn.compact
    def __call__(self, obs):
        x = nn.relu(nn.Conv(self.channels, (3, 3), padding="SAME")(obs.astype(jnp.float32)))
        return nn.relu(nn.Dense(self.width)(x.reshape((x.shape[0], -1))))
