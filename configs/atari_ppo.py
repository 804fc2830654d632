"""Sebulba PPO on Atari (EnvPool Breakout-v5) with Cleanba's hyperparameters.

Cleanba (arXiv 2310.00036): lr 2.5e-4 annealed, gamma 0.99, GAE lambda 0.95, 4 minibatches,
4 epochs, clip 0.1, entropy 0.01, value 0.5, max grad norm 0.5, advantage normalisation,
64 envs per actor thread, 2 actor threads, 128 steps per rollout, IMPALA ResNet.
Atari protocol (envs.envpool defaults): sticky actions 0.25, full action space, noop_max 1,
no episodic life, reward clipping, 27000 steps max, 84x84 gray, 4 frames.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-v5"       # EnvPool Atari
    c.algorithm = "ppo"            # ppo | impala
    c.network = "impala_resnet"    # 16/32/32 channels, dense 256
    c.total_env_steps = 50_000_000  # 200M frames at frame skip 4
    c.num_actor_threads = 2        # per actor device
    c.num_envs = 128               # 64 per actor thread with 1 actor device
    c.num_steps = 128              # rollout length T
    c.learning_rate = 2.5e-4       # initial learning rate
    c.anneal_lr = True             # decay linearly to 0 over the run
    c.num_epochs = 4               # passes over each rollout
    c.num_minibatches = 4          # split the env axis; time stays whole
    c.clip_eps = 0.1               # PPO ratio clip
    c.clip_vloss = False           # PPO value clipping
    c.norm_adv = True              # per-minibatch advantage normalisation
    c.ent_coef = 0.01              # entropy bonus
    c.vf_coef = 0.5                # value-loss coefficient
    c.max_grad_norm = 0.5          # global-norm gradient clip
    c.gamma = 0.99                 # discount
    c.gae_lambda = 0.95            # GAE lambda
    c.update_unroll = 0            # unroll the conv-net gradient steps (10x faster on CPU)
    c.actor_device_ids = (0,)      # local devices that run the policy
    c.learner_device_ids = (0,)    # local devices that train (data-parallel)
    c.pipeline = "cleanba"         # actors exactly one update behind the learner
    c.log_every = 10               # in updates
    return c
