"""Anakin PPO with an LSTM core on Recall (envs/recall.py): a cue at an episode's first
step, recalled at its sixth; +1 for the right answer, -1 for the wrong one, so guessing (all
a feed-forward agent can do) averages 0. Runs in Sebulba too (the jittable env on a host
CPU device).

``--config.recurrent=none`` gives the feed-forward agent of the same size (the same 2x64
torso). Measured (seeds 0-4 in one ``num_seeds=5`` run, 40,960 env steps, mean return over
the last 20% of the logged lines): LSTM 0.997 (0.995 to 0.999 per seed), feed-forward 0.020
(-0.008 to 0.054: chance); docs/results.md.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Recall-own"        # own jittable memory task (cue, 4 blank steps, query)
    c.recurrent = "lstm"           # none: the feed-forward agent of the same size
    c.recurrent_hidden = 32        # units of the core
    c.num_envs = 32                # over all devices (and Sebulba actor threads)
    c.num_steps = 16               # sequences span whole episodes (6 steps) most of the time
    c.total_env_steps = 40_960     # 80 updates
    c.learning_rate = 1e-3         # annealed linearly to 0
    c.num_minibatches = 2          # of whole sequences (a recurrent agent's only kind)
    c.log_every = 20               # in updates
    c.updates_per_call = 20        # Anakin: updates per compiled call
    c.num_devices = 1              # Anakin: small batch, one device
    return c
