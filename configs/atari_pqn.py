"""Sebulba PQN on Atari (EnvPool Breakout-v5), the reference's Atari settings
(``pqn_atari.yaml`` of purejaxql at 47af6d7, Gallici et al. 2024): 128 envs x 32 steps,
2 epochs x 32 minibatches, RAdam lr 2.5e-4 (configs/base.py's) constant, grad norm 10,
gamma 0.99, lambda 0.65, epsilon 1 -> 0.001 over the first 10% of 50M env steps (200M
frames); its env settings: episodic life, reward clipping, no sticky actions, noop 30, the
minimal action set (where configs/atari_base.py keeps Cleanba's protocol); the Nature CNN
with LayerNorm. Evaluation plays whole games (``episodic_life`` off there). Where ours
differs from the reference: docs/algorithms.md, "PQN".
"""

from configs import atari_base


def get_config():
    c = atari_base.get_config()
    c.algorithm = "pqn"             # epsilon 1 -> ... over the first 10% (its default)
    c.algo.epsilon_finish = 0.001   # ... 0.001 (the reference's Atari)
    c.network = "nature_cnn"        # 3 convs + dense 512 (the reference's CNN)
    c.layer_norm = True             # LayerNorm before each ReLU (PQN's networks)
    c.env_kwargs.episodic_life = True  # a lost life ends the learner's episode
    c.env_kwargs.reward_clip = True    # rewards into {-1, 0, 1} (the protocol's too)
    c.env_kwargs.repeat_action_probability = 0.0  # no sticky actions
    c.env_kwargs.noop_max = 30         # up to 30 no-ops at a game's start
    c.env_kwargs.full_action_space = False  # the game's minimal action set
    c.num_steps = 32                # rollout length T
    c.num_epochs = 2                # passes over each rollout
    c.num_minibatches = 32          # of 128 single (step, env) samples
    c.optimizer = "radam"           # rectified Adam (the reference's)
    c.adam_eps = 1e-8               # optax's default, the reference's
    c.anneal_lr = False             # constant (the reference's Atari)
    c.max_grad_norm = 10.0          # global-norm clip
    c.gae_lambda = 0.65             # Q(lambda)'s lambda
    return c
