"""Sebulba PPO on Atari Breakout-v5 sized for a 2-core CPU host (``make bench-breakout``).

The Atari protocol and PPO loss of configs/atari_ppo.py (Cleanba's: sticky actions 0.25,
full action space, no episodic life, reward clipping; clip 0.1, lr 2.5e-4 annealed, entropy
0.01, GAE 0.95), scaled to what two CPU cores train in an hour: the Nature CNN instead of
the IMPALA ResNet (about a tenth of the compute per sample), 16 envs in one actor thread x
128 steps, 2 epochs of 16 minibatches of 128 samples (XLA on CPU runs this net's backward
pass ~1.4x faster per sample at 128 than at 512; measured on the 2-core host), 1.5M env steps.
"""

from configs import atari_ppo


def get_config():
    c = atari_ppo.get_config()
    c.network = "nature_cnn"        # 3 convs + dense 512 (Mnih et al. 2015)
    c.num_envs = 16                 # one actor thread of 16
    c.num_actor_threads = 1         # one actor thread (Cleanba: 2)
    c.num_epochs = 2                # passes per rollout (Cleanba/CleanRL: 4)
    c.num_minibatches = 16          # 128 samples each
    c.total_env_steps = 1_500_000   # 6M frames; the lr anneals over them
    c.log_every = 5                 # updates per console line (10,240 env steps)
    c.xla_cpu_concurrency_scheduler = True  # XLA's default, as in the measured Breakout run
    #                                 (docs/results.md); off is not measured here
    return c
