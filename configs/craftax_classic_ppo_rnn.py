"""Anakin PPO-RNN on Craftax-Classic (symbolic observations, ``craftax:`` ids need the
``craftax`` extra: ``pip install -e '.[craftax]'``).

The Craftax paper's PPO-RNN (its baselines' ``ppo_rnn.py``): 1024 envs x 64 steps, 4 epochs
of 8 minibatches, Adam at 2e-4 annealed to 0, gamma 0.99, GAE lambda 0.8, clip 0.2,
entropy 0.01, value 0.5, gradient norm 1.0, a GRU core; 1e9 env steps. Its value loss is
clipped too; ours is not (``clip_vloss`` False, the base config's). Scaled to a 2-core
CPU host: 64 envs (the same 64-step rollouts and 8 sequence minibatches), a GRU of 256
units after this project's 2x64 MLP torso (the paper's layers are 512 wide; the torso's
width is not a config field here), and 1M env steps: about 16 minutes for 3 seeds in one
program (``--config.num_seeds=3``) on a 2-core host, score 25% of the maximum
(docs/suites.md, "Measured results"). Every episode logs ``episode/score_percent``
(the achievements' reward as % of the maximum, as the paper reports) and
``episode/achievement/<name>`` (% of episodes that unlocked it).

Runs in Sebulba too (the jittable env on a host CPU device).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "craftax:Craftax-Classic-Symbolic-v1"  # 1345 observations, 17 actions
    c.recurrent = "gru"            # the paper's PPO-RNN core
    c.recurrent_hidden = 256       # the paper: 512
    c.num_envs = 64                # the paper: 1024
    c.num_steps = 64               # the paper's
    c.total_env_steps = 1_000_000  # the paper: 1e9
    c.learning_rate = 2e-4         # annealed linearly to 0 (anneal_lr)
    c.num_minibatches = 8          # of whole sequences (a recurrent agent's only kind)
    c.gae_lambda = 0.8             # the paper's (gamma 0.99, clip 0.2, entropy 0.01, value
                                   # 0.5 and 4 epochs are the base config's too)
    c.max_grad_norm = 1.0          # the paper's
    c.num_devices = 1              # Anakin: one device
    return c
