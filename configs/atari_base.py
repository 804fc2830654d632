"""Atari protocol and the fields the Sebulba Atari configs share, after Cleanba.

Cleanba (arXiv 2310.00036) settings: EnvPool Breakout-v5, IMPALA ResNet, 50M env steps
(200M frames at frame skip 4), 2 actor threads of 64 envs each, the Cleanba pipeline.
Atari protocol (``ATARI_DEFAULTS`` in envs/envpool.py, applied to every ``-v5`` id): sticky
actions 0.25, full action space, noop_max 1, no episodic life, reward clipping, 27000 steps
max, 84x84 gray, 4 frames. atari_ppo.py and atari_impala.py import this and add the loss.
"""

from configs import base


def get_config():
    c = base.get_config()
    c.env_id = "Breakout-v5"        # EnvPool Atari (protocol from envs.envpool.ATARI_DEFAULTS)
    c.network = "impala_resnet"     # 16/32/32 channels, dense 256
    c.total_env_steps = 50_000_000  # 200M frames at frame skip 4
    c.num_actor_threads = 2         # per actor device, each with its own EnvPool
    c.num_envs = 128                # 64 per actor thread with 1 actor device
    c.update_unroll = -1            # auto: unrolled as far as memory allows (a conv-net step
    #                                 in a rolled loop is ~10x slower on CPU)
    c.xla_cpu_concurrency_scheduler = False  # off: an unrolled update keeps ~one gradient
    #                                 step's buffers live on CPU (2.5 GiB peak RSS, not ~10, for
    #                                 16 envs x 32 steps, 2-core host; docs/performance.md)
    c.microbatches = -1             # auto: 1, or the fewest gradient-accumulation chunks
    #                                 that fit (a 32 x 128 IMPALA-ResNet minibatch needs
    #                                 ~21 GiB on CPU)
    return c
