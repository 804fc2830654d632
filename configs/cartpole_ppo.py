"""Anakin PPO on gymnax CartPole-v1 (PureJaxRL defaults); the ``make demo`` job.

Solves CartPole (mean return >= 475) within 500k env steps. The PureJaxRL settings are
configs/base.py's defaults: separate 2x64 tanh actor and critic, 4 envs x 128 steps
(976 updates), lr 2.5e-4 annealed, 4 epochs of 4 minibatches, clip 0.2, GAE 0.95.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.log_every = 40               # about 20k env steps a line
    c.updates_per_call = 40        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    return c
