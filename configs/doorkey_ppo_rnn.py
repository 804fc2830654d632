"""Anakin recurrent PPO on XLand-MiniGrid's DoorKey-5x5 (``xminigrid:`` ids need the
``xminigrid`` extra: ``pip install -e '.[xminigrid]'``): a partially observed gridworld
(a 7x7 view) where the agent must find a key, open a door and reach the goal; the reward,
``1 - 0.9 * steps / 250`` at the goal, rewards doing it fast. An exploration task: a random
policy rarely gets the key and the door in one episode of 250 steps.

A GRU core after the 2x64 MLP torso (the view is partial); XLand-MiniGrid's own baselines
train recurrent PPO too. ``--config.env_id=xminigrid:MiniGrid-MemoryS8`` gives the memory
task (an object seen at the start, matched at the end of a corridor). Runs in Sebulba too
(the jittable env on a host CPU device). Measured: docs/results.md, "Gridworlds".
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "xminigrid:MiniGrid-DoorKey-5x5"  # a 7x7x2 view, 6 actions
    c.recurrent = "gru"            # the view is partial
    c.num_envs = 64                # over all devices (and Sebulba actor threads)
    c.num_steps = 32               # sequences of 32 steps (4 minibatches of 16 envs)
    c.learning_rate = 1e-3         # annealed linearly to 0
    c.log_every = 20               # in updates (40,960 env steps)
    c.updates_per_call = 20        # Anakin: updates per compiled call
    c.num_devices = 1              # Anakin: one device
    return c
