"""Anakin PPO on gymnax CartPole-v1 (PureJaxRL defaults); the ``make demo`` job.

Solves CartPole (mean return >= 475) within 500k env steps.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "CartPole-v1"       # gymnax, jittable
    c.algorithm = "ppo"            # ppo | impala
    c.network = "mlp"              # separate 2x64 tanh actor and critic
    c.total_env_steps = 500_000    # 976 updates of 4 x 128 steps
    c.num_envs = 4                 # envs in all
    c.num_steps = 128              # rollout length T
    c.learning_rate = 2.5e-4       # annealed linearly to 0
    c.num_epochs = 4               # passes over each rollout
    c.num_minibatches = 4          # split the env axis; time stays whole
    c.clip_eps = 0.2               # PPO ratio clip
    c.ent_coef = 0.01              # entropy bonus
    c.vf_coef = 0.5                # value-loss coefficient
    c.max_grad_norm = 0.5          # global-norm gradient clip
    c.gamma = 0.99                 # discount
    c.gae_lambda = 0.95            # GAE lambda
    c.log_every = 40               # about 20k env steps a line
    c.updates_per_call = 40        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    return c
