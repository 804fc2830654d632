"""runtime.config.memory: the estimate's parts by hand, the update plan it chooses,
Sebulba's host check (``prepare``, before anything compiles), and the estimate against
XLA's own accounting of one small compiled update. The device check by XLA's figure:
tests/runtime/test_memory_xla.py."""

import re
import time

import pytest

from anakin import train as anakin_train
from benchmarks.memory_check import compile_learner_update, measured_bytes
from configs import atari_ppo, cartpole_ppo, cartpole_ppo_sebulba, minatar_breakout_ppo
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec
from runtime.config import memory, memory_check
from runtime.config.agent import NetworkChoice
from sebulba import mode as sebulba_mode
from sebulba import train as sebulba_train

CARTPOLE = EnvSpec(obs_shape=(4,), obs_dtype="float32", num_actions=2)
MINATAR = EnvSpec(obs_shape=(10, 10, 4), obs_dtype="float32", num_actions=3)
# MLP 4 -> 64 -> 64 actor and critic, policy head 64 -> 2, value head 64 -> 1.
MLP_PARAMS = 2 * (4 * 64 + 64 + 64 * 64 + 64) + (64 * 2 + 2) + (64 + 1)


def test_cartpole_parts_by_hand():
    c = cartpole_ppo.get_config()
    c.num_envs, c.num_steps, c.num_minibatches = 8, 16, 2
    sizes = memory.network_sizes(NetworkChoice("mlp"), CARTPOLE, "adam", True)
    assert sizes.params == MLP_PARAMS * 4
    assert 2 * MLP_PARAMS * 4 <= sizes.opt_state <= 2 * MLP_PARAMS * 4 + 16  # mu, nu, counts
    est = memory.estimate(c, CARTPOLE, anakin_train.MODE, num_shards=2)
    t, b = 16, 4  # 8 envs over 2 shards
    assert est.rollout_obs == (t + 1) * b * 4 * 4
    # action, reward, terminated, truncated, 2 logits, behaviour value, PPO's 3 values, the
    # final observation's value (bootstrap_time_limits, on by default)
    assert est.trajectory == t * b * (4 + 4 + 1 + 1 + 8 + 4 + 12 + 4)
    c.bootstrap_time_limits, c.normalize_reward = False, True  # + the discounted return
    assert memory.estimate(c, CARTPOLE, anakin_train.MODE, num_shards=2).trajectory == (
        est.trajectory)
    c.normalize_reward = False
    assert memory.estimate(c, CARTPOLE, anakin_train.MODE, num_shards=2).trajectory == (
        est.trajectory - t * b * 4)
    assert est.params_optimizer == 2 * sizes.params + sizes.opt_state
    samples = t * b // 2
    assert est.minibatch == samples * int(16 + memory.BACKWARD_FACTOR
                                          * sizes.residual_per_sample)
    assert est.total == (est.rollout_obs + est.trajectory + est.params_optimizer
                         + max(est.minibatch, est.value_pass))
    c.bootstrap_time_limits, c.policy_lag = True, 3  # 3 lagged params; no behaviour values
    lagged = memory.estimate(c, CARTPOLE, anakin_train.MODE, num_shards=2)
    assert lagged.params_optimizer == (2 + 3) * sizes.params + sizes.opt_state
    assert lagged.trajectory == est.trajectory - t * b * 4
    assert lagged.value_pass > est.value_pass  # the learner recomputes every value


def test_recurrent_core_states_by_hand():
    """An LSTM agent of 32 units: its params count the cell (4 gates, input and recurrent
    kernels, biases on the recurrent side) and the heads on the core; the estimate adds the
    envs' carried and stored core states (c and h, float32) and the [T, B] episode starts,
    and the value pass is the whole rollout's (the unroll recomputes the values)."""
    c = cartpole_ppo.get_config()
    c.num_envs, c.num_steps, c.num_minibatches, c.minibatch_kind = 8, 16, 2, "sequences"
    c.recurrent, c.recurrent_hidden = "lstm", 32
    h = 32
    sizes = memory.network_sizes(NetworkChoice("mlp", "lstm", h), CARTPOLE, "adam", True)
    torso = 4 * 64 + 64 + 64 * 64 + 64  # the actor stream only
    cell = 4 * (64 * h + h * h + h)
    heads = (h * 2 + 2) + (h + 1)
    assert sizes.params == (torso + cell + heads) * 4
    assert sizes.core_per_env == 2 * h * 4
    est = memory.estimate(c, CARTPOLE, anakin_train.MODE, num_shards=2)
    t, b = 16, 4
    assert est.core_states == b * (2 * 2 * h * 4 + t)
    assert est.value_pass >= (t + 1) * b * 4 * 4  # the copied observations of the unroll
    assert est.total == (est.rollout_obs + est.trajectory + est.params_optimizer
                         + est.core_states + max(est.minibatch, est.value_pass))
    feed_forward = memory.estimate(cartpole_ppo.get_config(), CARTPOLE, anakin_train.MODE, 1)
    assert feed_forward.core_states == 0


def test_agents_multiply_the_anakin_estimate():
    c = cartpole_ppo.get_config()
    one = memory.estimate(c, CARTPOLE, anakin_train.MODE, 1)
    c.num_seeds = 3
    c.sweep.learning_rate = (1e-3, 3e-4)
    six = memory.estimate(c, CARTPOLE, anakin_train.MODE, 1)
    assert six.total == 6 * one.total


def test_oversized_atari_refused_by_prepare_quickly():
    """65,536 Atari envs: their rollout queues alone pass the host's RAM, said before
    anything compiles or any env starts."""
    c = atari_ppo.get_config()
    c.num_envs, c.num_steps = 65536, 128
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"^num_envs: the actors' rollouts need about [\d.]+ "
                       r"[KMG]iB of host memory \(.*\) but the host has [\d.]+ [KMG]iB available .*"
                       r"lower num_envs, num_steps, num_actor_threads or policy_lag; "
                       r"memory_check=False runs it anyway$"):
        sebulba_train.prepare(c)
    assert time.perf_counter() - t0 < 10


def test_live_steps_of_unrolled_loops(monkeypatch):
    """One gradient step's buffers live, but on CPU with XLA's concurrency-optimized
    scheduler on (config field, or its flag in XLA_FLAGS, which wins) every unrolled step's;
    the unrolled steps' minibatch inputs (uint8 and float32) are counted on CPU either way."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    c = atari_ppo.get_config()  # 4 epochs x 4 minibatches
    c.update_unroll = 0  # fully unrolled
    assert memory.live_steps(c, "cpu") == memory.live_steps(c, "gpu") == 1
    c.xla_cpu_concurrency_scheduler = True
    assert memory.live_steps(c, "cpu") == 16
    assert memory.live_steps(c, "gpu") == 1
    c.update_unroll = 2
    assert memory.live_steps(c, "cpu") == 2
    c.update_unroll = 64
    assert memory.live_steps(c, "cpu") == 16
    monkeypatch.setenv("XLA_FLAGS", f"{memory.CONCURRENCY_FLAG}=false")
    assert memory.live_steps(c, "cpu") == 1
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    c = cartpole_ppo_sebulba.get_config()
    c.num_epochs, c.num_minibatches, c.update_unroll = 4, 4, 0
    c.xla_cpu_concurrency_scheduler = True
    one = memory.estimate(c, CARTPOLE, sebulba_train.MODE, 1, platform="gpu").minibatch
    assert memory.estimate(c, CARTPOLE, sebulba_train.MODE, 1, platform="cpu").minibatch == 16 * one
    c.xla_cpu_concurrency_scheduler = False
    n = c.num_steps * c.num_envs // 4  # samples of a minibatch
    inputs = 15 * n * (4 * 4 + 4 * 4)  # 4 float32 obs, kept and as float32
    assert memory.estimate(c, CARTPOLE, sebulba_train.MODE, 1,
                           platform="cpu").minibatch == one + inputs


def test_auto_unroll_is_the_most_that_fits(monkeypatch):
    """``update_unroll=-1``: fully unrolled on GPU/TPU; on CPU fully unrolled when the host's
    total RAM holds it, else the largest unroll whose estimate fits, else 1; an explicit
    value is kept."""
    c = minatar_breakout_ppo.get_config()
    c.num_envs, c.num_steps, c.num_minibatches, c.num_epochs = 32, 32, 4, 4  # 16 steps
    c.xla_cpu_concurrency_scheduler = True  # every unrolled step live: unrolls differ a lot
    mode, spec = anakin_train.MODE, MINATAR
    c.update_unroll = 3
    assert memory.update_plan(c, spec, mode, 1, platform="cpu").unroll == 3
    c.update_unroll = -1
    assert memory.update_plan(c, spec, mode, 1, platform="gpu").unroll == 0
    est = {k: memory.estimate(c, spec, mode, 1, platform="cpu", unroll=k).total
           for k in range(17)}
    assert est[0] == est[16] > est[5] > est[1]
    for room, want in ((est[0], 0), (est[5] + 1, 5), (est[1], 1), (est[1] // 2, 1)):
        monkeypatch.setattr(memory, "host_total_bytes", lambda room=room: room / memory.HEADROOM)
        assert memory.update_plan(c, spec, mode, 1, platform="cpu").unroll == want, room
    assert memory.estimate(c, spec, mode, 1, platform="cpu").total == est[1]  # the auto one


def test_auto_microbatches_are_the_fewest_that_fit(monkeypatch):
    """``microbatches=-1``: 1 where the whole minibatch fits, else the fewest divisors of a
    minibatch's envs per device whose chunk fits (each tried with the most unroll first);
    a micro-batch holds 1/k of the minibatch's activations and adds one gradient buffer."""
    c = minatar_breakout_ppo.get_config()
    c.num_envs, c.num_steps, c.num_minibatches, c.num_epochs = 48, 32, 2, 1  # 24 envs each
    mode, spec = anakin_train.MODE, MINATAR
    c.update_unroll, c.microbatches = 1, -1
    est = {k: memory.estimate(c, spec, mode, 1, platform="cpu", microbatches=k)
           for k in (1, 2, 3, 4, 6, 8, 12, 24)}
    sizes = memory.network_sizes(NetworkChoice.of(c), spec, c.optimizer, True)
    assert est[1].minibatch == 2 * est[2].minibatch == 6 * est[6].minibatch
    assert est[2].params_optimizer == est[1].params_optimizer + sizes.params
    for room, want in ((est[1].total, 1), (est[1].total - 1, 2), (est[4].total, 4),
                       (est[8].total - 1, 12), (1, 24)):
        monkeypatch.setattr(memory, "host_total_bytes", lambda room=room: room / memory.HEADROOM)
        assert memory.update_plan(c, spec, mode, 1, platform="cpu").microbatches == want, room
    c.microbatches = 3  # explicit: kept
    assert memory.update_plan(c, spec, mode, 1, platform="cpu") == memory.UpdatePlan(1, 3)


def test_atari_ppo_starts_here_with_micro_batches(monkeypatch):
    """The headline config on one CPU device: its plan fits this host (micro-batches where
    the minibatch alone would not) and ``prepare`` accepts it without overrides. ``prepare``
    checks the host's *available* RAM, which the other test worker's run lowers by some GiB
    (once to 18.3 of 23 GiB, refusing the plan's 14.9 GiB): here it sees the host's total, as
    a run alone on the host would."""
    monkeypatch.setattr(memory, "host_available_bytes", memory.host_total_bytes)
    c = atari_ppo.get_config()
    spec = sebulba_train.MODE.env_spec(c.env_id)
    plan = memory.update_plan(c, spec, sebulba_train.MODE, 1)
    est = memory.estimate(c, spec, sebulba_train.MODE, 1)
    assert est.total <= memory.HEADROOM * memory.host_total_bytes(), (plan, est)
    sebulba_train.prepare(c)


def test_auto_unroll_in_the_atari_configs():
    """The Atari configs unroll and micro-batch automatically; the learner never sees -1."""
    from rlcore.learner import micro_count, scan_unroll

    assert atari_ppo.get_config().update_unroll == atari_ppo.get_config().microbatches == -1
    with pytest.raises(ValueError, match="update_unroll"):
        scan_unroll(-1)
    with pytest.raises(ValueError, match="microbatches"):
        micro_count(-1)


def test_sweep_of_a_million_agents_validated_fast():
    """3 fields x 100 values (10^6 agents): validated value by value in seconds (it used to
    take hours), a bad value named by its field; that they do not fit is refused from their
    shapes, as fast, before anything compiles."""
    c = minatar_breakout_ppo.get_config()
    c.sweep.learning_rate = tuple(1e-4 * (1 + i) for i in range(100))
    c.sweep.gamma = tuple(0.9 + 0.0009 * i for i in range(100))
    c.sweep.ent_coef = tuple(0.001 * i for i in range(100))
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"^sweep.ent_coef, sweep.gamma, sweep.learning_rate: "
                                          r"1000000 agents need about [0-9.]+ GiB per device "
                                          r"\(params, optimizer state and rollout observations, "
                                          r"from their shapes alone; 4.7 MiB each\)"):
        anakin_train.prepare(c)
    assert time.perf_counter() - t0 < 10
    c.memory_check = False  # said and run anyway: validation itself passes
    anakin_train.prepare(c)
    c.sweep.gamma = tuple(0.9 + 0.0009 * i for i in range(99)) + (1.5,)  # one bad value
    with pytest.raises(ConfigError, match=r"^sweep.gamma: must be <= 1.0, got 1.5$"):
        anakin_train.prepare(c)


def test_an_absurd_num_seeds_is_one_line_exit_2_in_seconds(tmp_path):
    """``num_seeds=10**9``: refused by the state's shapes before anything compiles or the
    workdir is made (it used to start building a billion agents' tags)."""
    from tests.helpers import run_entry

    workdir = tmp_path / "run"
    t0 = time.perf_counter()
    proc = run_entry("anakin.main", ["--config=configs/cartpole_ppo.py",
                                     "--config.num_seeds=1000000000", f"--workdir={workdir}"],
                     timeout_s=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "config error: num_seeds: 1000000000 agents need about"), lines
    assert "at most about" in lines[0] and lines[0].endswith("memory_check=False runs it anyway")
    assert time.perf_counter() - t0 < 60 and not workdir.exists()


def test_normal_configs_accepted():
    anakin_train.prepare(cartpole_ppo.get_config())
    anakin_train.prepare(minatar_breakout_ppo.get_config())
    sebulba_train.prepare(cartpole_ppo_sebulba.get_config())


def test_sebulba_host_bytes_and_check(monkeypatch):
    c = cartpole_ppo_sebulba.get_config()
    c.num_envs, c.num_steps, c.num_actor_threads = 8, 10, 2
    # 4 envs per thread; the final observation's value (bootstrap_time_limits) is shipped
    per_thread = (10 + 1) * 4 * 16 + 10 * 4 * (4 + 4 + 1 + 1 + 8 + 4)
    whole = (10 + 1) * 8 * 16 + 10 * 8 * (4 + 4 + 1 + 1 + 8 + 4)
    assert sebulba_mode.host_bytes(c, CARTPOLE) == 3 * 2 * per_thread + whole
    lagged = c.copy_and_resolve_references()
    lagged.policy_lag = 4  # 4 queued, 1 being filled, 1 held by the learner
    assert sebulba_mode.host_bytes(lagged, CARTPOLE) == 6 * 2 * per_thread + whole
    assert memory_check.host_refusal(c, sebulba_train.MODE, 1) is None
    need = sebulba_mode.host_bytes(c, sebulba_train.MODE.env_spec(c.env_id))
    monkeypatch.setattr(memory, "host_available_bytes", lambda: need)  # the 80% rule
    assert re.match(r"^num_envs: the actors' rollouts need about .* lower num_envs, num_steps, "
                    r"num_actor_threads or policy_lag; memory_check=False runs it anyway$",
                    memory_check.host_refusal(c, sebulba_train.MODE, 1))
    assert memory_check.host_refusal(c, anakin_train.MODE, 1) is None  # Anakin keeps none


def test_capacity_on_cpu_is_shared_host_ram():
    capacity, name = memory.device_capacity(4)
    assert name.startswith("cpu:")
    assert 0 < capacity <= memory.host_available_bytes() // 4 + 2**30


def test_estimate_close_to_compiled_memory_analysis():
    c = minatar_breakout_ppo.get_config()
    c.num_envs, c.num_steps, c.num_minibatches, c.num_epochs = 32, 32, 2, 1
    measured = measured_bytes(compile_learner_update(c, MINATAR))
    est = memory.estimate(c, MINATAR, sebulba_train.MODE, 1).total
    assert measured / 2 <= est <= 2 * measured, (est, measured)
