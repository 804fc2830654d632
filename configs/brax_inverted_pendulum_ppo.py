"""Anakin PPO on Brax ``inverted_pendulum`` (spring pipeline, envs/brax.py): continuous control
inside the compiled training step.

CleanRL's continuous PPO as configs/halfcheetah_ppo.py has it (its hyperparameters, layout of
32 envs x 64 steps and both normalisations), here in Anakin on one device, for 2M env steps
(Brax's own budget for this env). Episodes: 1000 steps at most (a reward of 1 a step while
the pole stands), so the maximum return is 1000; actions clipped to the actuator's range
[-3, 3] by the adapter.

Measured (seeds 0-2 in one ``num_seeds=3`` run, 6.4 min on a 2-core host, 2026-12-03): mean
return over the last 20% of training 934, 959, 888; greedy evaluation (8 episodes) 996,
958, 971 with a median of 1000 for every seed. At 1M steps: 752, 930, 762 (greedy 806, 1000,
799); 256-step rollouts or Brax's discount 0.97 did worse (docs/results.md).
"""

from configs import halfcheetah_ppo


def get_config():
    c = halfcheetah_ppo.get_config()
    c.env_id = "brax:inverted_pendulum"  # 4 observations, 1 action in [-3, 3]
    c.total_env_steps = 2_000_000  # Brax's budget for this env (1M: 2 of 3 seeds near 770)
    c.log_every = 10               # in updates (20,480 env steps)
    c.num_devices = 1              # small batch: one device
    return c
