"""One process of a two-process run on 127.0.0.1 (jax.distributed, gloo CPU collectives).

Usage: ``python -m tests.multiprocess_worker MODE PROCESS_ID PORT WORKDIR``, MODE ``anakin``
or ``sebulba``. Each process has 2 fake CPU devices; together they form one 4-device mesh.
The config is ``tests.multiprocess_worker.config_for(MODE)`` with the process fields set.
"""

from __future__ import annotations

import os
import sys


def config_for(mode: str):
    """The small config both the two-process run and its one-process twin use."""
    if mode == "anakin":
        from configs import cartpole_ppo

        c = cartpole_ppo.get_config()
        c.num_devices = 0
        c.num_envs = 16
        c.num_steps = 32
        c.total_env_steps = 16 * 32 * 6
        c.updates_per_call = 3
    else:
        from configs import cartpole_ppo_sebulba

        c = cartpole_ppo_sebulba.get_config()
        c.num_envs = 16
        c.num_steps = 16
        c.num_minibatches = 2
        c.num_actor_threads = 1
        c.total_env_steps = 16 * 16 * 6
        c.pipeline = "cleanba"
    c.log_every = 1
    return c


def main(mode, process_id, port, workdir):
    os.environ["JAX_PLATFORMS"] = "cpu"
    # The caller's flags (the test session's compile settings) and two fake devices.
    os.environ["XLA_FLAGS"] = " ".join((*os.environ.get("XLA_FLAGS", "").split(),
                                        "--xla_force_host_platform_device_count=2"))
    config = config_for(mode)
    config.num_processes = 2
    config.process_id = int(process_id)
    config.coordinator_address = f"127.0.0.1:{port}"
    if mode == "anakin":
        from anakin.train import prepare, train
    else:
        from sebulba.train import prepare, train

        config.actor_device_ids = (0,)
        config.learner_device_ids = (1,)
    prepare(config)
    train(config, workdir)


if __name__ == "__main__":
    main(*sys.argv[1:5])
