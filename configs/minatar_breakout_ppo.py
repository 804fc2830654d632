"""Anakin PPO on gymnax Breakout-MinAtar (10x10x4 binary frames, 3 actions)."""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-MinAtar"  # gymnax, jittable
    c.algorithm = "ppo"            # ppo | impala
    c.network = "mlp"              # frames are flattened (400 inputs)
    c.total_env_steps = 10_000_000 # budget over all envs of all processes
    c.num_envs = 128               # envs in all
    c.num_steps = 128              # rollout length T
    c.learning_rate = 5e-4         # initial learning rate
    c.num_epochs = 4               # passes over each rollout
    c.num_minibatches = 8          # split the env axis; time stays whole
    c.clip_eps = 0.2               # PPO ratio clip
    c.ent_coef = 0.01              # entropy bonus
    c.gamma = 0.99                 # discount
    c.gae_lambda = 0.95            # GAE lambda
    c.log_every = 10               # in updates
    c.updates_per_call = 10        # updates per compiled call
    return c
