"""Anakin PPO on gymnax Pendulum-v1: continuous actions, a diagonal Gaussian policy.

CleanRL's continuous PPO (``ppo_continuous_action.py``, github.com/vwxyzjn/cleanrl) where it
fits: separate 2x64 tanh actor and critic, a state-independent log-std initialised to 0,
actions clipped to the bounds (+-2) by the env adapter, 10 epochs, clip 0.2 with value
clipping, GAE 0.95, no entropy bonus, gradient clip 0.5, lr annealed to 0. Changed for
Pendulum, without observation or reward normalisation (off here, as measured): more envs (16 x
64 steps, where CleanRL runs 1 x 2048 on MuJoCo), 8 minibatches, discount 0.9 (RL Baselines3
Zoo's Pendulum PPO: gamma 0.9, 10 epochs), lr 2e-3, 200k steps.

Measured (one ``num_seeds=5`` run, seeds 0-4, a line every 20 updates = 20,480 steps):
random play scores about -1200 to -1400; the best logged mean return per seed was -209 to
-293 (mean -258), and every seed passed -400 by 163,840 env steps (seed 0 at 81,920). With
lr 1e-3 (RL Zoo's): best -241 to -431, seed 1 never at -400 in 200k steps.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Pendulum-v1"       # gymnax; 200-step episodes, actions in [-2, 2]
    c.total_env_steps = 204_800    # 200 updates of 16 x 64
    c.num_envs = 16                # envs in all
    c.num_steps = 64               # rollout length T
    c.learning_rate = 2e-3         # annealed linearly to 0
    c.num_epochs = 10              # CleanRL continuous PPO
    c.num_minibatches = 8          # minibatches of 128 (step, env) samples
    c.gamma = 0.9                  # RL Zoo's Pendulum discount
    c.clip_vloss = True            # CleanRL continuous PPO
    c.ent_coef = 0.0               # CleanRL continuous PPO
    c.log_every = 20               # in updates
    c.updates_per_call = 20        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    return c
