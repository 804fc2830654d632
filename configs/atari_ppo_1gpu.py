"""Sebulba PPO on Atari Breakout-v5 for one GPU with 8-16 host cores.

configs/atari_ppo.py (Cleanba's settings) on one GPU that both acts and learns, with the
actor threads taken from the machine (``sebulba.machine``): one per 4 host cores, at most 4,
so 4 threads x 32 envs on 16 cores and 2 x 64 on 8-12. Only the threads differ: the same 128
envs x 128 steps, minibatches and loss, so the learning curve is atari_ppo.py's (a run's
result does not depend on its thread count; docs/design.md, "Actor threads from the
machine"). On the one H200 measured (16 cores), Cleanba's 2 threads left the learner idle
1.55 s of every 2.4 s update while each thread alternated a 1.09 s env step and a 1.15 s
policy call; more threads overlap the two (docs/performance.md, not yet measured on a GPU).
"""

from configs import atari_ppo


def get_config():
    c = atari_ppo.get_config()
    c.num_actor_threads = 0         # from the machine: 4 on 16 cores (Cleanba: 2)
    return c
