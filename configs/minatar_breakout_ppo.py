"""Anakin PPO on gymnax Breakout-MinAtar (10x10x4 binary frames, 3 actions).

The base MLP sees the frames flattened (400 inputs).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-MinAtar"  # gymnax, jittable
    c.total_env_steps = 10_000_000  # budget over all envs of all processes
    c.num_envs = 128               # envs in all
    c.learning_rate = 5e-4         # initial learning rate
    c.num_minibatches = 8          # split the env axis; time stays whole
    return c
