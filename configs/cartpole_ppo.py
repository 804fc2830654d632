"""Anakin PPO on gymnax CartPole-v1 (PureJaxRL defaults); the ``make demo`` job.

The PureJaxRL settings are configs/base.py's defaults: separate 2x64 tanh actor and
critic, 4 envs x 128 steps (976 updates), lr 2.5e-4 annealed once per update, 4 epochs of 4
minibatches of single (step, env) samples, clip 0.2, GAE 0.95; and value clipping, which
PureJaxRL always does. Measured with 10 seeds (one ``num_seeds=10`` run, mean return over
the last 20% of training): 500.0, all 10 seeds at 500 (without value clipping 381, 3 of 10
at 475 or more; WORKSPACE-notes.md, issue 17).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.log_every = 40               # about 20k env steps a line
    c.updates_per_call = 40        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    c.clip_vloss = True            # PPO value clipping (PureJaxRL always clips)
    return c
