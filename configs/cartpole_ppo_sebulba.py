"""Sebulba PPO on EnvPool CartPole-v1 (the host-env twin of configs/cartpole_ppo.py)."""

from configs import cartpole_ppo


def get_config():
    c = cartpole_ppo.get_config()
    c.env_id = "CartPole-v1"       # EnvPool (host) CartPole
    c.num_envs = 8                 # over all actor threads and devices
    c.num_steps = 64
    c.total_env_steps = 500_000
    c.num_minibatches = 4
    c.learning_rate = 1e-3
    c.actor_device_ids = (0,)
    c.learner_device_ids = (0,)
    c.num_actor_threads = 1
    c.pipeline = "cleanba"
    c.log_every = 20
    return c
