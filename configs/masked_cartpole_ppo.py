"""Anakin PPO with an LSTM core on CartPole without velocities (``own:MaskedCartPole``:
the agent sees the cart position and the pole angle only, envs/masked.py).

configs/cartpole_ppo.py's settings but for the core and whole sequences as minibatches;
``--config.recurrent=none`` gives the feed-forward agent of the same torso (which needs
the velocities a single observation no longer shows). Measured figures:
WORKSPACE-notes.md (issue 20).
"""

from configs import cartpole_ppo


def get_config():
    c = cartpole_ppo.get_config()
    c.env_id = "MaskedCartPole-own"  # gymnax CartPole-v1 seeing [x, theta] only
    c.recurrent = "lstm"           # none: the feed-forward agent of the same torso
    c.recurrent_hidden = 64        # units of the core
    c.minibatch = "sequences"      # the recurrent agent's only kind (auto picks it too)
    return c
