"""Actor threads from the machine (``num_actor_threads = 0``): the rule, and that a run
resolves it before anything compiles while an explicit count wins."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from configs import cartpole_ppo_sebulba
from rlcore.errors import ConfigError
from runtime.config.resolved import recorded, resolve
from runtime.config.validation import DeviceCounts
from sebulba import machine
from sebulba.layout import make_layout
from sebulba.mode import MODE, check_fields
from sebulba.train import prepare


@pytest.mark.parametrize("envs, cores, accelerator, threads", [
    (128, 16, True, 4),   # one GPU, 16 cores: one thread per 4 cores
    (128, 10, True, 2),   # Cleanba's 10 CPUs per GPU: its 2 threads
    (128, 64, True, 4),   # at most 4 per device
    (128, 3, True, 1),    # fewer cores than a thread's share: still one
    (128, 16, False, 1),  # a CPU actor shares the cores with the learner: one
    (6, 16, True, 3),     # the largest count up to 4 that divides the envs
    (7, 16, True, 1),
])
def test_auto_actor_threads_follows_the_rule(envs, cores, accelerator, threads):
    assert machine.auto_actor_threads(envs, cores, accelerator) == threads


@given(envs=st.integers(1, 512), cores=st.integers(1, 256), accelerator=st.booleans())
def test_auto_actor_threads_divides_the_envs_and_stays_in_bounds(envs, cores, accelerator):
    t = machine.auto_actor_threads(envs, cores, accelerator)
    assert 1 <= t <= machine.MAX_THREADS and envs % t == 0
    assert t <= max(1, cores // machine.CORES_PER_THREAD)


def test_zero_resolves_on_this_cpu_host_before_compiling_and_explicit_wins():
    config = cartpole_ppo_sebulba.get_config()
    config.num_actor_threads = 0
    prepare(config)
    assert config.num_actor_threads == 0  # no field check writes the config
    resolved = resolve(config, MODE, 1, 1)  # the run's one resolution, which records it
    assert resolved.actor_threads == 1 and recorded(config, resolved).num_actor_threads == 1
    layout = make_layout(config)
    assert layout.describe() == f"1 actor device x 1 thread x {config.num_envs} envs"
    config = cartpole_ppo_sebulba.get_config()
    config.num_actor_threads = 2
    prepare(config)
    assert config.num_actor_threads == 2


def test_zero_is_refused_with_several_processes():
    """Every process must lay out its envs with one thread count; each would resolve its
    own from its own cores."""
    config = cartpole_ppo_sebulba.get_config()
    config.num_actor_threads = 0
    with pytest.raises(ConfigError, match=r"^num_actor_threads: 0 \(from the machine\) needs "
                                          r"one process, got 2"):
        check_fields(config, DeviceCounts(devices=4, local_devices=2, processes=2))
