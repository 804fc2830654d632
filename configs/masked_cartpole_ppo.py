"""Anakin PPO with an LSTM core on CartPole without velocities (``own:MaskedCartPole``:
the agent sees the cart position and the pole angle only, envs/masked.py).

configs/cartpole_ppo.py's settings but for the core, whole sequences as minibatches, 16 envs
x 64 steps and lr 1e-3; ``--config.recurrent=none`` gives the feed-forward agent of the
same torso, which needs the velocities a single observation no longer shows. Measured (6
seeds, 1M env steps, mean return over the last 20% of training; one ``num_seeds=6`` run
each): LSTM 224 (215 to 248 per seed, still rising), feed-forward 45 (44.5 to 45.8, flat
from 40k steps on); docs/results/masked_cartpole_lstm_vs_feedforward.png. lr 4e-3 learns
faster (past 100 by 20-41k steps) and ends higher on average (279) but spreads wider (146
to 387); docs/results.md.
"""

from configs import cartpole_ppo


def get_config():
    c = cartpole_ppo.get_config()
    c.env_id = "MaskedCartPole-own"  # gymnax CartPole-v1 seeing [x, theta] only
    c.recurrent = "lstm"           # none: the feed-forward agent of the same torso
    c.recurrent_hidden = 64        # units of the core
    c.minibatch_kind = "sequences"  # the recurrent agent's only kind (auto picks it too)
    c.num_envs = 16                # 4 minibatches of 4 whole sequences
    c.num_steps = 64               # rollout length T (the backpropagation window)
    c.learning_rate = 1e-3         # annealed linearly to 0
    return c
