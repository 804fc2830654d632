"""Anakin PQN on gymnax Breakout-MinAtar, the reference's MinAtar settings
(``pqn_minatar.yaml`` of purejaxql at 47af6d7, Gallici et al. 2024): 128 envs x 32 steps,
2 epochs x 32 minibatches of single samples, RAdam lr 5e-4 annealed, grad norm 10, gamma
0.99, lambda 0.65, epsilon 1 -> 0.05 over the first 10% of 10M env steps, greedy
evaluation; the MinAtar network (``minatar_cnn``: one 16x3x3 conv + dense 128) with
LayerNorm. Where ours differs from the reference: docs/algorithms.md, "PQN".
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-MinAtar"   # gymnax, jittable
    c.algorithm = "pqn"             # its defaults: epsilon 1 -> 0.05 over 10% of the updates
    c.network = "minatar_cnn"       # one 16x3x3 conv + dense 128 (the reference's)
    c.layer_norm = True             # LayerNorm before each ReLU (PQN's networks)
    c.total_env_steps = 10_000_000  # the reference's budget
    c.num_envs = 128                # envs in all
    c.num_steps = 32                # 2441 updates
    c.num_epochs = 2                # passes over each rollout
    c.num_minibatches = 32          # of 128 single (step, env) samples
    c.optimizer = "radam"           # rectified Adam (the reference's)
    c.adam_eps = 1e-8               # optax's default, the reference's
    c.learning_rate = 5e-4          # annealed to 0 once per update
    c.max_grad_norm = 10.0          # global-norm clip
    c.gae_lambda = 0.65             # Q(lambda)'s lambda
    c.log_every = 25                # about 100k env steps a line
    c.updates_per_call = 25         # updates per compiled call
    c.eval_every = 125              # greedy episodes every ~500k env steps
    c.eval_episodes = 128           # the reference's TEST_NUM_ENVS
    return c
