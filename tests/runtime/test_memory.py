"""runtime.config.plan: the update plan from XLA's figure for the compiled update and the
state's exact sizes (which plan fits is chosen, found once), Sebulba's host check
(``prepare``, before anything compiles) and the state's floor by its shapes. The device
check by XLA's figure for the whole program: tests/runtime/test_memory_xla.py."""

import re
import time

import pytest

from anakin import train as anakin_train
from configs import atari_ppo, cartpole_ppo, cartpole_ppo_sebulba, minatar_breakout_ppo
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec
from runtime.config import memory, memory_check, plan
from sebulba import mode as sebulba_mode
from sebulba import train as sebulba_train

CARTPOLE = EnvSpec(obs_shape=(4,), obs_dtype="float32", num_actions=2)
# MLP 4 -> 64 -> 64 actor and critic, policy head 64 -> 2, value head 64 -> 1.
MLP_PARAMS = 2 * (4 * 64 + 64 + 64 * 64 + 64) + (64 * 2 + 2) + (64 + 1)


def small_cartpole(**fields):
    """CartPole PPO, 16 envs x 16 steps on one device, 2 epochs x 2 minibatches (4
    gradient steps, 8 envs per minibatch): updates that compile in seconds."""
    c = cartpole_ppo.get_config()
    c.num_devices, c.num_envs, c.num_steps, c.num_epochs, c.num_minibatches = 1, 16, 16, 2, 2
    c.update(fields)
    return c


def figure(c, unroll: int, micro: int, mode=anakin_train.MODE) -> plan.PlanFigure:
    """The plan figure of ``c`` on one shard under ``(unroll, micro)``."""
    program = plan.UpdateProgram.of(c, CARTPOLE, mode, 1)
    return plan.plan_figure(c, program, plan.UpdatePlan(unroll, micro), mode)


def with_room(c, room: float):
    """``c`` whose device may hold ``room`` bytes under the headroom."""
    c.device_memory_gib = room / memory.HEADROOM / memory.GIB
    return c


def test_exact_sizes_of_the_update_and_its_figure():
    """The plan's parts: the learner state (params, Adam's two moments and counts) and one
    gradient, the trajectory field by field (exact, from shapes), the rest XLA's figure for
    the compiled update; agents multiply it, the lagged params add their copies."""
    c = small_cartpole()
    program = plan.UpdateProgram.of(c, CARTPOLE, anakin_train.MODE, 2)  # 8 envs per shard
    state, traj = plan.program_inputs(program)
    params = plan.tree_bytes(state.params)
    assert params == MLP_PARAMS * 4
    assert 3 * params <= plan.tree_bytes(state) <= 3 * params + 32
    t, b = 16, 8
    # obs and bootstrap obs; action, reward, terminated, truncated, 2 logits, the rollout's
    # value, the final observation's value (bootstrap_time_limits, on by default)
    assert plan.tree_bytes(traj) == (t + 1) * b * 16 + t * b * (4 + 4 + 1 + 1 + 8 + 4 + 4)
    one = plan.plan_figure(c, program, plan.UpdatePlan(1, 1), anakin_train.MODE)
    used = plan.update_figure(program, plan.UpdatePlan(1, 1))
    assert one.learner_state == plan.tree_bytes(state) + params
    assert one.trajectory == plan.tree_bytes(traj) and one.lagged == 0
    assert one.total == used.total > one.working > 0
    c.num_seeds, c.sweep.learning_rate = 3, (1e-3, 3e-4)
    six = plan.plan_figure(c, program, plan.UpdatePlan(1, 1), anakin_train.MODE)
    assert six.total == 6 * one.total
    c = small_cartpole(policy_lag=3)  # 3 lagged params; the rollout's values not shipped
    lagged = figure(c, 1, 1)
    assert lagged.lagged == 3 * params
    assert lagged.trajectory == figure(small_cartpole(), 1, 1).trajectory - t * 16 * 4


def test_recurrent_trajectory_carries_core_and_starts():
    """An LSTM agent's trajectory adds the envs' start core state (c and h, float32) and
    the [T, B] episode starts."""
    ff = plan.program_inputs(plan.UpdateProgram.of(small_cartpole(), CARTPOLE,
                                                   anakin_train.MODE, 1))[1]
    c = small_cartpole(recurrent="lstm", recurrent_hidden=32, minibatch_kind="sequences")
    traj = plan.program_inputs(plan.UpdateProgram.of(c, CARTPOLE, anakin_train.MODE, 1))[1]
    assert plan.tree_bytes(traj) == plan.tree_bytes(ff) + 16 * 2 * 32 * 4 + 16 * 16


def test_auto_unroll_is_the_most_that_fits():
    """``update_unroll=-1``: fully unrolled on GPU/TPU; on CPU the most unroll whose
    compiled update fits (XLA's figure; with the concurrency-optimized scheduler on, as in
    the tests, every unrolled step keeps its buffers), else 1; an explicit value is kept."""
    c = small_cartpole(update_unroll=3)
    assert plan.update_plan(c, CARTPOLE, anakin_train.MODE, 1, platform="cpu").unroll == 3
    c.update_unroll = -1
    assert plan.update_plan(c, CARTPOLE, anakin_train.MODE, 1, platform="gpu").unroll == 0
    size = {k: figure(c, k, 1).total for k in (0, 3, 2, 1)}
    assert size[0] > size[2] > size[1], size
    for room, want in ((size[0], 0), (size[2], 2 if size[3] > size[2] else 3),
                       (size[1], 1), (size[1] // 2, 1)):
        got = plan.update_plan(with_room(c, room), CARTPOLE, anakin_train.MODE, 1)
        assert got == plan.UpdatePlan(want, 1), (room, size)


def test_auto_microbatches_are_the_fewest_that_fit():
    """``microbatches=-1``: 1 where the whole minibatch fits, else the fewest divisors of a
    minibatch's envs per device whose update fits, else the most."""
    c = small_cartpole(microbatches=-1)
    size = {k: figure(c, 1, k).total for k in (1, 2, 4, 8)}
    assert size[1] > size[2] > size[8], size
    for room, want in ((size[1], 1), (size[1] - 1, 2), (size[8], 8), (1, 8)):
        got = plan.update_plan(with_room(c, room), CARTPOLE, anakin_train.MODE, 1)
        assert got == plan.UpdatePlan(1, want), (room, size)
    c.microbatches = 3  # explicit: kept, nothing compiled
    assert plan.update_plan(c, CARTPOLE, anakin_train.MODE, 1) == plan.UpdatePlan(1, 3)


def test_a_plan_is_found_once(monkeypatch):
    """The figures are cached per program and plan: planning again, or the refusal's
    blame, compiles nothing; an explicit plan compiles nothing at all."""
    compiled = []
    real = plan.compile_update
    monkeypatch.setattr(plan, "compile_update",
                        lambda *a: compiled.append(a[1]) or real(*a))
    plan.update_figure.cache_clear()
    c = small_cartpole(update_unroll=-1, microbatches=-1, num_envs=8)  # unrolls 0, 3, 2, 1
    first = plan.update_plan(c, CARTPOLE, anakin_train.MODE, 1)
    tried = list(compiled)
    assert first == plan.UpdatePlan(0, 1) and tried == [plan.UpdatePlan(1, 1),
                                                        plan.UpdatePlan(0, 1)]
    assert plan.update_plan(c, CARTPOLE, anakin_train.MODE, 1) == first
    assert compiled == tried
    plan.update_plan(small_cartpole(), CARTPOLE, anakin_train.MODE, 1)
    assert compiled == tried


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


@pytest.mark.slow
def test_atari_ppo_starts_here_with_micro_batches(monkeypatch):
    """The headline config on one CPU device: XLA's figure for its compiled update plans
    two micro-batches, fully unrolled, on a host of 23.5 GiB (a whole 4096-sample minibatch
    of the IMPALA ResNet does not fit), and ``prepare`` accepts it without overrides.
    ``prepare`` checks the host's *available* RAM, which another test worker's run lowers
    by some GiB: here it sees the host's total, as a run alone on the host would."""
    monkeypatch.setattr(memory, "host_available_bytes", memory.host_total_bytes)
    c = atari_ppo.get_config()
    spec = sebulba_train.MODE.env_spec(c.env_id)
    resolved = plan.update_plan(c, spec, sebulba_train.MODE, 1)
    if 23 * memory.GIB <= memory.host_total_bytes() <= 24 * memory.GIB:
        assert resolved == plan.UpdatePlan(0, 2)
    program = plan.UpdateProgram.of(c, spec, sebulba_train.MODE, 1)
    fig = plan.plan_figure(c, program, resolved, sebulba_train.MODE)
    assert fig.total <= memory.HEADROOM * memory.host_total_bytes(), (resolved, fig)
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
