"""Anakin PPO on gymnax Breakout-MinAtar (10x10x4 binary frames, 3 actions).

Network: ``minatar_cnn``, the MinAtar paper's one 16x3x3 conv + dense 128 (Young & Tian
2019), which suits 10x10 object grids: the conv's shared 3x3 weights see "ball next to
brick/paddle" anywhere on the grid, where an MLP on the 400 flattened inputs must learn each
position apart. Sizes and optimizer follow PureJaxRL's MinAtar PPO (64 envs, 128 steps,
4 epochs, 8 minibatches, Adam lr 5e-3 annealed, value clipping); 10M env steps is where its
published curve ends. With lr 5e-4 and 128 envs the policy's entropy collapsed and the
return stalled at 7 from 1.6M to 2.9M env steps.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-MinAtar"  # gymnax, jittable
    c.network = "minatar_cnn"       # conv suited to 10x10 object grids (see docstring)
    c.total_env_steps = 10_000_000  # budget over all envs of all processes
    c.num_envs = 64                # envs in all
    c.learning_rate = 5e-3         # initial learning rate (PureJaxRL MinAtar)
    c.num_minibatches = 8          # split the env axis; time stays whole
    c.clip_vloss = True            # PPO value clipping (PureJaxRL MinAtar)
    return c
