"""Sebulba IMPALA (V-trace) on EnvPool CartPole-v1."""

from configs import cartpole_impala


def get_config():
    c = cartpole_impala.get_config()
    c.env_id = "CartPole-v1"       # EnvPool (host) CartPole
    c.num_envs = 16
    c.num_steps = 32
    c.total_env_steps = 1_000_000
    c.actor_device_ids = (0,)
    c.learner_device_ids = (0,)
    c.num_actor_threads = 1
    c.pipeline = "cleanba"
    c.log_every = 50
    return c
