"""Anakin IMPALA (V-trace) on gymnax Breakout-MinAtar, Cleanba's IMPALA optimizer.

The loss is summed over each minibatch's steps and envs (``rlcore.losses.impala_loss``), the
scale Cleanba's RMSProp settings were tuned for: RMSProp (PyTorch's: eps 0.01 outside the
square root, decay 0.99), gradient clip 40, rho and pg-rho clipped at 1, value 0.5, rollout
length 20, minibatches of 32 envs x 20 steps (128 envs, 4 minibatches, one epoch). Tuned
for MinAtar by sweeps of lr, entropy and lambda (docs/results.md): lr 1.5e-3 (Cleanba's 6e-4
and entropy 0.01 stalled at a return of 5.5 for 5M steps), entropy 0.05, V-trace lambda 0.9.
Over 5M env steps, 3 seeds, mean return of the last 20%: Anakin 20.5 (16.3, 24.1, 21.0),
Sebulba through the jittable-env host adapter (bare ``Breakout-MinAtar``) 21.4 (22.6, 25.0,
16.6); one seed in each stays near 16 (docs/results/minatar_breakout_impala.png). Network:
``minatar_cnn`` (see configs/minatar_breakout_ppo.py).
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-MinAtar"  # gymnax, jittable
    c.network = "minatar_cnn"       # conv suited to 10x10 object grids
    c.algorithm = "impala"         # ppo | impala
    c.total_env_steps = 5_000_000  # budget over all envs of all processes
    c.num_envs = 128               # 4 minibatches of 32 envs
    c.num_steps = 20               # rollout length
    c.num_epochs = 1               # one pass per rollout
    c.optimizer = "rmsprop"        # torch definition
    c.learning_rate = 1.5e-3       # initial learning rate (Cleanba's 6e-4 stalled here)
    c.ent_coef = 0.05              # entropy bonus (0.01 collapsed the policy early)
    c.vtrace_lambda = 0.9          # V-trace lambda
    c.max_grad_norm = 40.0         # global-norm clip of the summed loss's gradient
    c.log_every = 40               # in updates (about 100k env steps a line)
    c.updates_per_call = 40        # updates per compiled call
    return c
