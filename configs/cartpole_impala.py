"""Anakin IMPALA (V-trace) on gymnax CartPole-v1."""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "CartPole-v1"       # gymnax, jittable
    c.algorithm = "impala"         # ppo | impala
    c.network = "mlp"              # mlp | nature_cnn | impala_resnet
    c.total_env_steps = 500_000    # budget over all envs of all processes
    c.num_envs = 16                # envs in all
    c.num_steps = 32               # rollout length T (V-trace keeps time whole)
    c.optimizer = "adam"           # adam | rmsprop (torch definition)
    c.learning_rate = 1e-3         # initial learning rate
    c.anneal_lr = True             # decay linearly to 0 over the run
    c.max_grad_norm = 0.5          # global-norm gradient clip
    c.num_epochs = 1               # IMPALA: one pass over each rollout
    c.num_minibatches = 4          # 4 gradient steps per rollout, 4 envs each
    c.gamma = 0.99                 # discount
    c.vtrace_lambda = 1.0          # V-trace lambda
    c.clip_rho = 1.0               # V-trace rho clip
    c.clip_pg_rho = 1.0            # V-trace policy-gradient rho clip
    c.ent_coef = 0.01              # entropy bonus
    c.vf_coef = 0.5                # value-loss coefficient
    c.log_every = 40               # in updates
    c.updates_per_call = 40        # updates per compiled call
    c.num_devices = 1              # small batch: one device (0 = all devices)
    return c
