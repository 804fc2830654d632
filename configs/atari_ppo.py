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
    c.algorithm = "ppo"
    c.network = "impala_resnet"    # 16/32/32 channels, dense 256
    c.total_env_steps = 50_000_000  # 200M frames at frame skip 4
    c.num_actor_threads = 2        # per actor device
    c.num_envs = 128               # 64 per actor thread with 1 actor device
    c.num_steps = 128
    c.learning_rate = 2.5e-4
    c.anneal_lr = True
    c.num_epochs = 4
    c.num_minibatches = 4
    c.clip_eps = 0.1
    c.clip_vloss = False
    c.norm_adv = True
    c.ent_coef = 0.01
    c.vf_coef = 0.5
    c.max_grad_norm = 0.5
    c.gamma = 0.99
    c.gae_lambda = 0.95
    c.update_unroll = 0            # unroll the conv-net gradient steps (10x faster on CPU)
    c.actor_device_ids = (0,)
    c.learner_device_ids = (0,)
    c.pipeline = "cleanba"         # actors exactly one update behind the learner
    c.log_every = 10
    return c
