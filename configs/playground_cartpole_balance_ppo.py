"""Anakin PPO on MuJoCo Playground's CartpoleBalance (DM Control Suite on MJX; ``playground:``
ids need the ``playground`` extra: ``pip install -e '.[playground]'``): a Gaussian policy,
one action in [-1, 1], episodes of 1000 steps, a reward in [0, 1] a step.

Playground's own PPO for its DM Control tasks (``dm_control_suite_params.brax_ppo_config``):
2048 envs, 30-step unrolls, 16 epochs of 32 minibatches, Adam at 1e-3, discount 0.995,
entropy 1e-2, observation normalisation, rewards x 10, 60M env steps. Scaled to a 2-core CPU
host: 64 envs of the same 30-step unrolls, 16 epochs of 4 minibatches (480 samples each),
the same learning rate, discount, entropy and normalisation, and 1M env steps: on a 2-core
CPU host MJX alone steps about 260k env steps/s at 64 envs and a 3-agent training program
about 58k (19k per agent); 10 seeds in one program took 4 minutes, 9 of them ending above
900 (docs/suites.md, "Measured results"). Not reproduced: the reward scale of 10 (no
config field; ``normalize_reward`` is CleanRL's, a different rule)
and Playground's wider networks (32x4 policy, 256x5 value; the torso here is 2x64).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "playground:CartpoleBalance"  # 5 observations, 1 action in [-1, 1]
    c.num_envs = 64                # Playground: 2048
    c.num_steps = 30               # Playground's unroll_length
    c.total_env_steps = 1_000_000  # Playground: 60M
    c.learning_rate = 1e-3         # Playground's, annealed linearly to 0
    c.num_epochs = 16              # Playground's num_updates_per_batch (4 minibatches: the
                                   # base config's; Playground: 32 of 1024 x 30 samples)
    c.gamma = 0.995                # Playground's discounting
    c.normalize_obs = True         # Playground's normalize_observations
    c.log_every = 20               # in updates (38,400 env steps)
    c.updates_per_call = 20        # Anakin: updates per compiled call
    c.num_devices = 1              # Anakin: one device
    return c
