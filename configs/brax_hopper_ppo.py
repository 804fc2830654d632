"""Anakin PPO on Brax ``hopper`` (spring pipeline, envs/brax.py): locomotion inside the
compiled training step, for a fixed budget.

The hyperparameters of configs/brax_inverted_pendulum_ppo.py (CleanRL's continuous PPO:
2048 samples per update as 32 envs x 64 steps, 10 epochs of 32 minibatches, lr 3e-4 annealed,
clip 0.2 with value clipping, no entropy bonus, observation normalisation and reward
scaling), with 1000-step episodes (Brax's limit) that end early where the hopper falls.
"""

from configs import brax_inverted_pendulum_ppo


def get_config():
    c = brax_inverted_pendulum_ppo.get_config()
    c.env_id = "brax:hopper"       # 11 observations, 3 actions in [-1, 1]
    c.total_env_steps = 1_000_000  # the fixed budget measured in the README
    return c
