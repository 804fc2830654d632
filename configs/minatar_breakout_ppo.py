"""Anakin PPO on gymnax Breakout-MinAtar (10x10x4 binary frames, 3 actions)."""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-MinAtar"  # gymnax, jittable
    c.algorithm = "ppo"
    c.network = "mlp"              # frames are flattened (400 inputs)
    c.total_env_steps = 10_000_000
    c.num_envs = 128
    c.num_steps = 128
    c.learning_rate = 5e-4
    c.num_epochs = 4
    c.num_minibatches = 8
    c.clip_eps = 0.2
    c.ent_coef = 0.01
    c.gamma = 0.99
    c.gae_lambda = 0.95
    c.log_every = 10
    c.updates_per_call = 10
    return c
