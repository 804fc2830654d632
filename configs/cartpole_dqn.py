"""Anakin DQN on gymnax CartPole-v1, CleanRL ``dqn_jax.py``'s CartPole settings: one env,
a gradient step of 128 transitions every 10 env steps (``replay.ratio`` 0.1) from 10,000 env
steps on, a buffer of 10,000, Adam lr 2.5e-4 constant, gamma 0.99, the target copied every
500 env steps, epsilon 1 -> 0.05 over the first half of 500k env steps, MSE TD loss, no
gradient clipping (ours: 2x64 tanh MLP, CleanRL's 120-84 ReLU). docs/algorithms.md, "DQN".
"""

from configs import base


def get_config():
    c = base.get_config()
    c.algorithm = "dqn"             # ppo | impala | pqn | dqn
    c.num_devices = 1               # one env: one device (0 = all devices)
    c.num_envs = 1                  # x 500k env steps (base.py's budget)
    c.num_steps = 10                # a gradient step every 10 env steps: 50,000 updates
    c.num_minibatches = 1           # (the replay fields set the gradient steps: base.py's
    #                                 capacity 10,000, warm-up 10,000 env steps, ratio 0.1,
    #                                 batch 128 are CleanRL's)
    c.algo.target_every = 500       # env steps between target copies (tau 1)
    c.algo.epsilon_finish = 0.05    # epsilon 1 -> 0.05 ...
    c.algo.epsilon_fraction = 0.5   # ... over the first half of the run
    c.anneal_lr = False             # Adam at base.py's 2.5e-4, constant
    c.adam_eps = 1e-8               # optax's default, CleanRL's
    c.max_grad_norm = 0.0           # no clipping (CleanRL's)
    c.log_every = 2500              # 25k env steps a line
    c.updates_per_call = 500        # updates per compiled call
    return c
