"""Anakin PPO on Brax ``inverted_pendulum`` (spring pipeline, envs/brax.py): continuous control
inside the compiled training step.

CleanRL's continuous PPO (``ppo_continuous_action.py``; /work/shared/REFERENCE.md), as in
configs/halfcheetah_ppo.py: lr 3e-4 annealed to 0, 2048 samples per update (here 32 envs x 64
steps), 10 epochs of 32 minibatches, gamma 0.99, GAE 0.95, clip 0.2 with value clipping, no
entropy bonus, gradient clip 0.5, separate 2x64 tanh actor and critic, a state-independent
log-std initialised to 0, observation normalisation and reward scaling, actions clipped to
the actuator's range [-3, 3] by the adapter. Episodes: 1000 steps at most (a reward of 1 a
step while the pole stands), so the maximum return is 1000.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "brax:inverted_pendulum"
    c.total_env_steps = 1_000_000
    c.num_envs = 32                # 32 x 64 = CleanRL's 2048 samples per update
    c.num_steps = 64               # rollout length T
    c.learning_rate = 3e-4         # annealed linearly to 0
    c.num_epochs = 10              # CleanRL continuous PPO
    c.num_minibatches = 32         # minibatches of 64 (step, env) samples
    c.clip_vloss = True            # CleanRL continuous PPO
    c.ent_coef = 0.0               # CleanRL continuous PPO
    c.normalize_obs = True         # CleanRL continuous PPO (NormalizeObservation, clip 10)
    c.normalize_reward = True      # CleanRL continuous PPO (NormalizeReward, clip 10)
    c.log_every = 10               # in updates (20,480 env steps)
    c.updates_per_call = 10
    c.num_devices = 1              # small batch: one device
    return c
