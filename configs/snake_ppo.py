"""Anakin PPO on Jumanji's Snake (``jumanji:`` ids need the ``jumanji`` extra: ``pip install
-e '.[jumanji]'``): a 12x12 board, +1 a fruit, the episode ends when the snake hits a wall
or itself, or after 4000 steps. The observation is the board's 5 planes, the step count and
the action mask, flattened into one vector of 725 (envs/jumanji.py).

This project's CartPole PPO settings (the 2x64 MLP) with 64 envs x 128 steps; a smoke-sized
budget, not tuned. Runs in Sebulba too (the jittable env on a host CPU device).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "jumanji:Snake-v1"  # 725 observations, 4 actions
    c.num_envs = 64                # over all devices (and Sebulba actor threads)
    c.total_env_steps = 1_000_000  # 122 updates
    c.learning_rate = 3e-4         # annealed linearly to 0
    c.num_devices = 1              # Anakin: one device
    return c
