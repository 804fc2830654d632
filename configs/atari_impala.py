"""Sebulba IMPALA (V-trace) on Atari with Cleanba's IMPALA settings.

lr 6e-4, rollout length 20, RMSProp (PyTorch's: eps 0.01 outside the square root, decay
0.99), max grad norm 40, rho and pg-rho clipped at 1, entropy 0.01, value 0.5.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-v5"       # EnvPool Atari
    c.algorithm = "impala"         # ppo | impala
    c.network = "impala_resnet"    # mlp | nature_cnn | impala_resnet
    c.total_env_steps = 50_000_000 # budget over all envs of all processes
    c.num_actor_threads = 2        # per actor device, each with its own EnvPool
    c.num_envs = 128               # envs in all
    c.num_steps = 20               # rollout length
    c.optimizer = "rmsprop"        # adam | rmsprop (torch definition)
    c.learning_rate = 6e-4         # initial learning rate
    c.anneal_lr = True             # decay linearly to 0 over the run
    c.rmsprop_decay = 0.99         # torch RMSProp alpha
    c.rmsprop_eps = 0.01           # outside the square root (torch)
    c.max_grad_norm = 40.0         # global-norm gradient clip
    c.num_epochs = 1               # one pass per rollout
    c.num_minibatches = 4          # 4 gradient steps of 32 envs x 20 steps
    c.vtrace_lambda = 1.0          # V-trace lambda
    c.clip_rho = 1.0               # V-trace rho clip
    c.clip_pg_rho = 1.0            # V-trace policy-gradient rho clip
    c.ent_coef = 0.01              # entropy bonus
    c.vf_coef = 0.5                # value-loss coefficient
    c.gamma = 0.99                 # discount
    c.update_unroll = 0            # unroll the conv-net gradient steps (10x faster on CPU)
    c.actor_device_ids = (0,)      # local devices that run the policy
    c.learner_device_ids = (0,)    # local devices that train (data-parallel)
    c.pipeline = "cleanba"         # actors exactly one update behind the learner
    c.log_every = 10               # in updates
    return c
