"""The device memory check by XLA's own figure (docs/design.md, "Memory plan"): the compiled
Anakin call and Sebulba learner update are checked against the devices before their first
call, on the test session's 4 fake CPU devices with a small ``device_memory_gib``; a refusal
names the field to change and ``memory_check=False`` overrides it."""

import re

import pytest

from anakin import train as anakin_train
from configs import cartpole_ppo, cartpole_ppo_sebulba
from rlcore.errors import ConfigError
from runtime.config import memory, plan
from sebulba import train as sebulba_train
from tests.helpers import config_error_lines, run_entry

GIB = memory.GIB


def small_cartpole(**fields):
    """The demo's config on all 4 devices, 64 envs, one 20-update call."""
    c = cartpole_ppo.get_config()
    c.num_devices, c.num_envs, c.num_steps, c.updates_per_call = 0, 64, 16, 20
    c.total_env_steps = 2 * 64 * 16
    c.update(fields)
    return c


def figures(config) -> tuple[memory.CompiledMemory, plan.PlanFigure]:
    """XLA's figure for ``config``'s compiled call and the plan's figure (XLA's for one
    agent's update on one device, the state's exact sizes), per device (the default
    capacity: both fit)."""
    run = anakin_train.AnakinRun(config)
    run.compile(run.abstract_state())
    used = memory.CompiledMemory.of(run._call)
    assert used is not None and used.total > 0
    program = plan.UpdateProgram.of(config, run.env.spec, anakin_train.MODE, run.num_devices)
    resolved = plan.UpdatePlan(run.hparams.update_unroll, run.hparams.microbatches)
    return used, plan.plan_figure(config, program, resolved, anakin_train.MODE)


def test_the_planned_update_fits_and_trains(tmp_path):
    """``microbatches=-1`` under a limit the one-pass update just passes by XLA's figure:
    two micro-batches are chosen, and the whole call, checked by its own figure, fits and
    trains (the call holds little beyond its update in a rolled loop; unrolled, about 5%
    more: the plan's figure is the update's)."""
    c = small_cartpole(microbatches=-1)
    program = plan.UpdateProgram.of(c, anakin_train.MODE.env_spec(c.env_id),
                                    anakin_train.MODE, 4)
    one = plan.plan_figure(c, program, plan.UpdatePlan(1, 1), anakin_train.MODE).total
    two = plan.plan_figure(c, program, plan.UpdatePlan(1, 2), anakin_train.MODE).total
    assert one > two
    c.device_memory_gib = (one - 1) / memory.HEADROOM / GIB
    run = anakin_train.AnakinRun(c)
    assert (run.hparams.update_unroll, run.hparams.microbatches) == (1, 2)
    rows = anakin_train.train(c, str(tmp_path))
    assert rows and rows[-1]["update"] == 2


SIZE = r"[\d.]+ [KMG]iB"


def test_refused_by_xla_naming_the_fields_by_share_and_the_override(tmp_path, capsys):
    """The demo's MLP at 64 envs, 16 per device: its params, Adam's moments and a gradient
    are most of the plan's figure, a gradient step's working memory (XLA's temporaries
    beyond the gradient) the rest; the line names both, largest first, and leads with the
    first."""
    c = small_cartpole()
    used, _ = figures(c)
    c.device_memory_gib = used.total / memory.HEADROOM / 2 / GIB  # half of what it needs
    with pytest.raises(ConfigError, match=(
            rf"^network: the update call needs about {SIZE} per device \(XLA: arguments "
            rf"{SIZE}, temporaries {SIZE}, outputs {SIZE} beyond the donated arguments\) but "
            rf"cpu:0 \(device_memory_gib\) has {SIZE} \(a run may use 80%\); by share of XLA's "
            r"figure for one update and the state's sizes: network \d+%, num_minibatches \d+%; "
            r"choose a smaller network than mlp; memory_check=False runs it anyway$")):
        anakin_train.train(c, str(tmp_path / "refused"))
    c.memory_check = False
    rows = anakin_train.train(c, str(tmp_path / "anyway"))
    assert rows and rows[-1]["update"] == 2
    said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("memory:")]
    assert len(said) == 1 and said[0].endswith("running anyway (memory_check=False)"), said


def test_agents_refused_naming_the_sweep_and_num_seeds(tmp_path):
    """Four agents of which one fits: the line leads with the fields that make them."""
    c = small_cartpole(num_seeds=2)
    c.sweep.learning_rate = (1e-4, 3e-4)
    used, _ = figures(c)
    c.device_memory_gib = used.total / 2 / memory.HEADROOM / GIB  # about two of four fit
    with pytest.raises(ConfigError, match=rf"^sweep.learning_rate, num_seeds: 4 agents need "
                       rf"about {SIZE} per device \(XLA's figure for the update call; "
                       rf"{SIZE} each\) .*at most about [12] agents fit; sweep fewer "
                       r"values or seeds; memory_check=False runs it anyway$"):
        anakin_train.train(c, str(tmp_path))


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_big_recurrent_core_refused_naming_recurrent_hidden(tmp_path):
    """A GRU of 1024 units on 4 envs: its params and optimizer state are most of the
    figure, so the line leads with recurrent_hidden, not num_envs."""
    c = small_cartpole(num_envs=4, recurrent="gru", recurrent_hidden=1024,
                       num_minibatches=1, total_env_steps=4 * 16)
    used, _ = figures(c)
    c.device_memory_gib = used.total / memory.HEADROOM / 2 / GIB
    with pytest.raises(ConfigError, match=r"^recurrent_hidden: the update call needs .*; by "
                       r"share of XLA's figure for one update and the state's sizes: "
                       r"recurrent_hidden \d+%[^;]*; "
                       r"lower recurrent_hidden \(1024 units; the core's params grow with "
                       r"its square\); memory_check=False runs it anyway$"):
        anakin_train.train(c, str(tmp_path))


def test_lagged_params_named_with_their_share(tmp_path):
    """At policy lag 4 a GRU's params are kept four more times: the line names policy_lag
    with its share, next to recurrent_hidden, largest first (the shares add up)."""
    c = small_cartpole(num_envs=4, recurrent="gru", recurrent_hidden=512, policy_lag=4,
                       num_minibatches=1, total_env_steps=4 * 16)
    used, fig = figures(c)
    assert fig.lagged > 0
    c.device_memory_gib = used.total / memory.HEADROOM / 2 / GIB
    with pytest.raises(ConfigError) as refused:
        anakin_train.train(c, str(tmp_path))
    shares = re.search(r"the state's sizes: ([^;]+);", str(refused.value)).group(1)
    named = [(f, int(s)) for f, s in re.findall(r"(\w+) (\d+)%", shares)]
    assert [f for f, _ in named][:2] in (["policy_lag", "recurrent_hidden"],
                                         ["recurrent_hidden", "policy_lag"]), shares
    assert [s for _, s in named] == sorted((s for _, s in named), reverse=True)
    assert all(s >= 10 for _, s in named) and sum(s for _, s in named) <= 101
    assert str(refused.value).startswith(named[0][0] + ": ")


def test_sebulba_learner_refused_before_its_first_update(tmp_path):
    c = cartpole_ppo_sebulba.get_config()
    c.total_env_steps = 4 * c.num_envs * c.num_steps
    c.device_memory_gib = 1e-6  # about 1 KiB
    with pytest.raises(ConfigError, match=r"^num_minibatches: the learner update needs about "
                       r".* memory_check=False runs it anyway$"):
        sebulba_train.train(c, str(tmp_path))
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints")
                                                                .iterdir())


def test_command_refusal_is_one_line_and_exit_2(tmp_path):
    # 210 KiB: above the state's floor by its shapes (115 KiB), under XLA's figure
    proc = run_entry("anakin.main", ["--config=configs/cartpole_ppo.py",
                                     f"--workdir={tmp_path}", "--config.device_memory_gib=2e-4"])
    assert proc.returncode == 2, proc.stderr
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and re.match(r"config error: num_minibatches: the update call "
                                        r"needs about", lines[0]), proc.stderr
    assert "Traceback" not in proc.stderr
