"""Anakin PPO on Brax ``inverted_pendulum`` (spring pipeline, envs/brax.py): continuous control
inside the compiled training step.

CleanRL's continuous PPO as configs/halfcheetah_ppo.py has it (its hyperparameters, layout of
32 envs x 64 steps and both normalisations; 1M env steps), here in Anakin on one device.
Episodes: 1000 steps at most (a reward of 1 a step while the pole stands), so the maximum
return is 1000; actions clipped to the actuator's range [-3, 3] by the adapter.
"""

from configs import halfcheetah_ppo


def get_config():
    c = halfcheetah_ppo.get_config()
    c.env_id = "brax:inverted_pendulum"  # 4 observations, 1 action in [-3, 3]
    c.log_every = 10               # in updates (20,480 env steps)
    c.num_devices = 1              # small batch: one device
    return c
