"""Sebulba IMPALA (V-trace) on Atari with Cleanba's IMPALA settings.

lr 6e-4, rollout length 20, RMSProp (PyTorch's: eps 0.01 outside the square root, decay
0.99), max grad norm 40, rho and pg-rho clipped at 1, entropy 0.01, value 0.5.
Atari protocol and shared fields: configs/atari_base.py; the rest are configs/base.py's
defaults.
"""

from configs import atari_base


def get_config():
    c = atari_base.get_config()
    c.algorithm = "impala"         # ppo | impala
    c.num_steps = 20               # rollout length
    c.optimizer = "rmsprop"        # adam | rmsprop (torch definition)
    c.learning_rate = 6e-4         # initial learning rate
    c.max_grad_norm = 40.0         # global-norm gradient clip
    c.num_epochs = 1               # one pass per rollout (4 minibatches of 32 envs x 20 steps)
    return c
