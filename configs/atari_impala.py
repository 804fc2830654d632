"""Sebulba IMPALA (V-trace) on Atari with Cleanba's IMPALA settings.

lr 6e-4, rollout length 20, RMSProp (PyTorch's: eps 0.01 outside the square root, decay
0.99), max grad norm 40, rho and pg-rho clipped at 1, entropy 0.01, value 0.5.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-v5"       # EnvPool Atari
    c.algorithm = "impala"
    c.network = "impala_resnet"
    c.total_env_steps = 50_000_000
    c.num_actor_threads = 2
    c.num_envs = 128
    c.num_steps = 20               # rollout length
    c.optimizer = "rmsprop"
    c.learning_rate = 6e-4
    c.anneal_lr = True
    c.rmsprop_decay = 0.99
    c.rmsprop_eps = 0.01
    c.max_grad_norm = 40.0
    c.num_epochs = 1               # one pass per rollout
    c.num_minibatches = 4          # 4 gradient steps of 32 envs x 20 steps
    c.vtrace_lambda = 1.0
    c.clip_rho = 1.0
    c.clip_pg_rho = 1.0
    c.ent_coef = 0.01
    c.vf_coef = 0.5
    c.gamma = 0.99
    c.update_unroll = 0
    c.actor_device_ids = (0,)
    c.learner_device_ids = (0,)
    c.pipeline = "cleanba"
    c.log_every = 10
    return c
