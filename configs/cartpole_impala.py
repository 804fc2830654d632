"""Anakin IMPALA (V-trace) on gymnax CartPole-v1."""

from configs import base


def get_config():
    c = base.get_config()
    c.algorithm = "impala"         # ppo | impala
    c.num_envs = 16                # envs in all (4 minibatches of 4 envs)
    c.num_steps = 32               # rollout length T (V-trace keeps time whole)
    c.learning_rate = 1e-3         # initial learning rate
    c.num_epochs = 1               # IMPALA: one pass over each rollout
    c.log_every = 40               # in updates
    c.updates_per_call = 40        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    return c
