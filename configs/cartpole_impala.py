"""Anakin IMPALA (V-trace) on gymnax CartPole-v1."""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "CartPole-v1"       # gymnax, jittable
    c.algorithm = "impala"
    c.network = "mlp"
    c.total_env_steps = 500_000
    c.num_envs = 16
    c.num_steps = 32               # rollout length T (V-trace keeps time whole)
    c.optimizer = "adam"
    c.learning_rate = 1e-3
    c.anneal_lr = True
    c.max_grad_norm = 0.5
    c.num_epochs = 1               # IMPALA: one pass over each rollout
    c.num_minibatches = 4          # 4 gradient steps per rollout, 4 envs each
    c.gamma = 0.99
    c.vtrace_lambda = 1.0
    c.clip_rho = 1.0
    c.clip_pg_rho = 1.0
    c.ent_coef = 0.01
    c.vf_coef = 0.5
    c.log_every = 40
    c.updates_per_call = 40
    c.num_devices = 1              # small batch: one device (0 = all devices)
    return c
