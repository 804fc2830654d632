"""Sebulba PPO on Atari (EnvPool Breakout-v5) with Cleanba's hyperparameters.

Cleanba (arXiv 2310.00036): lr 2.5e-4 annealed, gamma 0.99, GAE lambda 0.95, 4 minibatches,
4 epochs, clip 0.1, entropy 0.01, value 0.5, max grad norm 0.5, advantage normalisation,
64 envs per actor thread, 2 actor threads, 128 steps per rollout, IMPALA ResNet.
Atari protocol and shared fields: configs/atari_base.py; the rest are configs/base.py's
defaults.
"""

from configs import atari_base


def get_config():
    c = atari_base.get_config()
    c.clip_eps = 0.1               # PPO ratio clip
    return c
