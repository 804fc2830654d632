"""Anakin PPO on gymnax CartPole-v1 (PureJaxRL defaults); the ``make demo`` job.

The PureJaxRL settings are configs/base.py's defaults: separate 2x64 tanh actor and
critic, 4 envs x 128 steps (976 updates), 4 epochs of 4 minibatches of single (step, env)
samples, clip 0.2, GAE 0.95, annealed once per update; with value clipping, which PureJaxRL
always does, and twice PureJaxRL's learning rate (5e-4 for its 2.5e-4). Measured with 10
seeds each (one ``num_seeds=10`` run, mean return over the last 20% of training;
docs/results.md):

- 4 envs (this config): 500.0 with lr 2.5e-4 and with 5e-4, all 10 seeds at 500 (without
  value clipping 381, 3 of 10 at 475 or more);
- 64 envs x 128 steps, 2.6M steps: 497.7, 10 of 10 at 475 or more, with lr 5e-4 against
  390.6, 0 of 10, with 2.5e-4 (the single-file PPO whose settings these are: 384).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.log_every = 40               # about 20k env steps a line
    c.updates_per_call = 40        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    c.clip_vloss = True            # PPO value clipping (PureJaxRL always clips)
    c.learning_rate = 5e-4         # annealed to 0; PureJaxRL's 2.5e-4 learns less at 64 envs
    return c
