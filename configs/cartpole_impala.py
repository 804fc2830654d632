"""Anakin IMPALA (V-trace) on gymnax CartPole-v1.

Adam, lr 1e-3. The IMPALA loss is a sum over each minibatch's steps and envs (Cleanba's
scale), so its gradient is about T x b = 128 times the mean's: Adam does not mind the scale
(up to its eps), and the gradient clip is Cleanba's 40 (about 0.3 of the mean loss's
gradient, where base's 0.5 applies to PPO's mean loss).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.algorithm = "impala"         # ppo | impala
    c.num_envs = 16                # envs in all (4 minibatches of 4 envs)
    c.num_steps = 32               # rollout length T (V-trace keeps time whole)
    c.learning_rate = 1e-3         # initial learning rate
    c.num_epochs = 1               # IMPALA: one pass over each rollout
    c.max_grad_norm = 40.0         # global-norm clip of the summed loss's gradient
    c.log_every = 40               # in updates
    c.updates_per_call = 40        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    return c
