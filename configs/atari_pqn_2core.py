"""Sebulba PQN on Atari Breakout-v5 sized for a 2-core CPU host: configs/atari_pqn.py's
algorithm and env settings (the reference's) at 16 envs in one actor thread x 32 steps,
2 epochs of 4 minibatches of 128 samples, 1.5M env steps (6M frames; epsilon decays over
the first 10% of them).
"""

from configs import atari_pqn


def get_config():
    c = atari_pqn.get_config()
    c.num_envs = 16                 # one actor thread of 16
    c.num_actor_threads = 1         # one actor thread (the reference: one pool of 128)
    c.num_minibatches = 4           # 128 samples each, as the reference's minibatches
    c.total_env_steps = 1_500_000   # 6M frames
    c.log_every = 20                # updates per console line (10,240 env steps)
    c.xla_cpu_concurrency_scheduler = True  # XLA's default (as configs/atari_ppo_2core.py)
    return c
