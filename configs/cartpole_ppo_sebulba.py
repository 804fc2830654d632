"""Sebulba PPO on EnvPool CartPole-v1 (the host-env twin of configs/cartpole_ppo.py).

Solves CartPole (mean return >= 475) in about 150k env steps, actors on device 0 and
learners on 1-3 or all on one device.
"""

from configs import cartpole_ppo


def get_config():
    c = cartpole_ppo.get_config()
    c.num_envs = 24                # over all processes, actor devices and threads
    c.num_steps = 32               # rollout length T (4 minibatches of 6 envs x 32 steps)
    c.total_env_steps = 250_000    # budget over all envs of all processes
    c.learning_rate = 1e-3         # annealed linearly to 0
    c.num_actor_threads = 2        # each with its own EnvPool of 12 envs
    c.log_every = 20               # in updates
    return c
