"""Anakin PQN on gymnax CartPole-v1, the reference's CartPole settings
(``pqn_cartpole.yaml`` of purejaxql, Gallici et al. 2024): 32 envs x 64 steps, 4 epochs x
16 minibatches of single samples, RAdam lr 1e-4 annealed, grad norm 10, gamma 0.99,
lambda 0.95 (``gae_lambda``), rewards scaled by 0.1 in the targets, epsilon 1 -> 0.2 over
the first 20% of 500k env steps, greedy evaluation; LayerNorm in the MLP (ours: 2x64 tanh,
the reference's 2x256 ReLU). docs/algorithms.md, "PQN".
"""

from configs import base


def get_config():
    c = base.get_config()
    c.algorithm = "pqn"             # ppo | impala | pqn
    c.algo.epsilon_finish = 0.2     # epsilon 1 -> 0.2 ...
    c.algo.epsilon_fraction = 0.2   # ... over the first 20% of the updates
    c.algo.reward_scale = 0.1       # rewards x 0.1 in the targets (the reference's REW_SCALE)
    c.layer_norm = True             # LayerNorm before each activation (PQN's networks)
    c.num_devices = 1               # small batch: one device (0 = all devices)
    c.num_envs = 32                 # x 500k env steps (base.py's budget)
    c.num_steps = 64                # 244 updates
    c.num_minibatches = 16          # of 128 single (step, env) samples, 4 epochs (base.py's)
    c.optimizer = "radam"           # rectified Adam (the reference's)
    c.adam_eps = 1e-8               # optax's default, the reference's
    c.learning_rate = 1e-4          # annealed to 0 once per update
    c.max_grad_norm = 10.0          # global-norm clip
    c.log_every = 12                # about 25k env steps a line
    c.updates_per_call = 12         # updates per compiled call
    return c
