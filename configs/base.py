"""Fields every config has, with typed defaults; other configs import and override them.

Every field can be overridden from the command line, e.g. ``--config.total_env_steps=1000000``
or ``--config.learner_device_ids=1,2,3`` (tuples, not lists).
"""

import ml_collections

from runtime.sweep import sweep_fields


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0                      # every key and env seed derives from this
    c.env_id = "CartPole-v1"        # bare: Anakin gymnax/own, Sebulba EnvPool if it has it;
    #                                 or name the library: gymnax:, envpool:, own:Catch
    c.algorithm = "ppo"             # ppo | impala
    c.network = "mlp"               # mlp | nature_cnn | impala_resnet | minatar_cnn
    c.recurrent = "none"            # none | lstm | gru: a core after the network's torso,
    #                                 reset to zeros at every episode's first step
    c.recurrent_hidden = 128        # units of the recurrent core
    c.total_env_steps = 500_000     # budget over all envs of all processes
    c.num_envs = 4                  # envs in all, over all processes, threads and devices
    c.num_steps = 128               # rollout length T
    c.learning_rate = 2.5e-4       # initial learning rate
    c.anneal_lr = True              # decay linearly to 0 over the run
    c.optimizer = "adam"            # adam | rmsprop (torch definition)
    c.adam_eps = 1e-5              # Adam epsilon
    c.rmsprop_decay = 0.99         # torch RMSProp alpha
    c.rmsprop_eps = 0.01           # outside the square root (torch)
    c.max_grad_norm = 0.5           # global-norm gradient clip; 0 disables
    c.num_epochs = 4               # passes over each rollout
    c.num_minibatches = 4           # minibatches per epoch
    c.minibatch = "auto"            # auto (the algorithm's: PPO samples, IMPALA sequences) |
    #                                 samples (single (step, env) samples) | sequences (whole envs)
    c.update_unroll = 1             # scan unroll of the gradient steps; 0 = fully unrolled;
    #                                 -1 = auto: fully unrolled on GPU/TPU, on CPU as far as
    #                                 the host's RAM holds (runtime.memory.update_plan)
    c.microbatches = 1              # chunks each minibatch's gradient is accumulated over
    #                                 (a rolled loop: 1/k of the activations live); -1 = auto:
    #                                 the fewest that fit the device (runtime.memory.update_plan)
    # Losses.
    c.gamma = 0.99                 # discount
    c.gae_lambda = 0.95             # PPO
    c.clip_eps = 0.2                # PPO ratio clip
    c.clip_vloss = False            # PPO value clipping
    c.norm_adv = True               # PPO per-minibatch advantage normalisation
    c.vf_coef = 0.5                # value-loss coefficient
    c.ent_coef = 0.01              # entropy bonus
    c.vtrace_lambda = 1.0           # IMPALA
    c.clip_rho = 1.0                # IMPALA
    c.clip_pg_rho = 1.0             # IMPALA
    c.bootstrap_time_limits = True  # a time-limit cut's value target bootstraps on the value
    #                                 of the episode's final observation (False: on the cut
    #                                 step's own value; docs/design.md, "Truncation and the
    #                                 final observation")
    # Normalisation (CleanRL's; statistics in the train state, rlcore/normalize.py).
    c.normalize_obs = False         # observations by their running mean and variance
    c.normalize_obs_clip = 10.0     # bound of a normalised observation
    c.normalize_reward = False      # rewards by the running std of a discounted return
    c.normalize_reward_clip = 10.0  # bound of a scaled reward
    # Logging and checkpoints (in updates).
    c.log_every = 10               # a metrics line every this many updates
    c.checkpoint_every = 0          # 0: only at the end and on signals
    # Evaluation during training: greedy episodes on envs with seeds of their own.
    c.eval_every = 0               # in updates; 0: off
    c.eval_episodes = 8            # episodes per evaluation, over all devices
    c.eval_max_steps = 100_000     # cap on an evaluation's env steps (episodes end sooner)
    # Weights & Biases (optional; metrics.jsonl and TensorBoard are always written).
    c.wandb_project = ""           # W&B project to log to; "" = off (wandb not imported)
    c.wandb_mode = "online"        # online | offline (no network; `wandb sync` later)
    # Anakin.
    c.updates_per_call = 10         # updates per compiled call (no Python per update)
    c.num_devices = 0               # devices of the data mesh; 0 = every device of every process
    c.num_seeds = 1                 # agents in one program, seeds seed..seed+num_seeds-1
    # Host CPU runtime (read once, before JAX starts; no effect on GPU/TPU computations).
    c.xla_cpu_multi_thread_eigen = True  # XLA CPU GEMMs on the intra-op pool (XLA default)
    c.xla_cpu_concurrency_scheduler = True  # XLA CPU's concurrency-optimized scheduler (XLA's
    #                                 default); on, an unrolled update keeps every gradient
    #                                 step's buffers live at once (runtime/memory.py)
    c.cpu_threads = 0               # XLA CPU intra-op threads (PJRT_NPROC); 0 = auto: 1 for
    #                                 an Anakin run on one device with <= 1024 env steps per
    #                                 update (all agents), else XLA's (one per core)
    c.deterministic = False         # GPU: XLA's deterministic ops (slower scatters, reductions)
    # Sebulba.
    c.actor_device_ids = (0,)       # local device indices
    c.learner_device_ids = (0,)     # local devices that train (data-parallel)
    c.num_actor_threads = 1         # per actor device, each with its own EnvPool
    c.env_threads = 0               # EnvPool worker threads per pool; 0 = EnvPool default
    c.pipeline = "cleanba"          # sync | cleanba | async
    c.queue_timeout_s = 300.0       # longest wait on a rollout or params hand-off (an actor's
                                    # clock stops while the learner is busy)
    # Multi-process (jax.distributed); num_processes 1 = single process.
    c.coordinator_address = ""      # host:port of process 0
    c.num_processes = 1             # processes of the run
    c.process_id = 0                # this process, 0..num_processes-1
    c.heartbeat_timeout_s = 20      # a peer silent this long aborts the run (dead host)
    # Test knobs, off by default.
    c.debug = ml_collections.ConfigDict()  # fault injection for the tests
    c.debug.actor_jitter_ms = 0     # random extra sleep per actor step (own RNG)
    c.debug.fail_actor_at_update = -1  # raise in actor thread 0 before rollout k (0-based)
    c.debug.nan_at_update = -1      # poison the rewards of rollout k (0-based; update k+1 fails)
    c.debug.learner_delay_ms = 0    # updates (Anakin: calls) but the first (compiling) last longer
    c.sweep = sweep_fields(c)       # Anakin: values per number field, one agent each (x seeds)
    return c
