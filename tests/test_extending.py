"""The user's own env, network and algorithm from a package outside the repository, by
import path (``envs.imported``, ``rlcore.networks.imported_torso``,
``rlcore.algorithms.algorithm_class`` with ``runtime.config.algo``; docs/extending.md).

The package is written to a temporary directory outside the repository; in-process tests put
it on ``sys.path``, the command-line ones on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from anakin.train import prepare, train
from configs import cartpole_ppo, masked_cartpole_ppo
from envs import registry
from rlcore.errors import ConfigError
from runtime.distributed import data_mesh
from tests.helpers import (
    REPO,
    assert_rows_close,
    entry_env,
    read_metrics,
    reproducible_part,
    run_entry,
)

PACKAGE = textwrap.dedent('''
    """A user's envs: a corridor written to the StepEnv protocol, gymnax's CartPole from
    elsewhere, and things that are not envs."""
    import gymnax
    import jax
    import jax.numpy as jnp
    from flax import struct
    from gymnax.environments.classic_control.cartpole import CartPole

    from rlcore.types import EnvSpec


    @struct.dataclass
    class State:
        pos: jax.Array
        time: jax.Array


    class Corridor:
        """Walk right to the goal: +1 there, -0.01 a step, cut at ``max_steps``."""

        def __init__(self, length=6, max_steps=20):
            self.length, self.max_steps = length, max_steps
            self.spec = EnvSpec(obs_shape=(length,), obs_dtype="float32", num_actions=2)

        def reset(self, key):
            state = State(pos=jnp.int32(0), time=jnp.int32(0))
            return jax.nn.one_hot(state.pos, self.length), state

        def step(self, state, action, key):
            pos = jnp.clip(state.pos + jnp.where(action == 1, 1, -1), 0, self.length - 1)
            state = State(pos=pos, time=state.time + 1)
            done = pos == self.length - 1
            return (jax.nn.one_hot(pos, self.length), state, jnp.where(done, 1.0, -0.01),
                    done, state.time >= self.max_steps)


    def short_corridor(max_steps_in_episode=20):
        return Corridor(length=4, max_steps=max_steps_in_episode)


    class WrongShape(Corridor):
        def __init__(self):
            super().__init__()
            self.spec = EnvSpec(obs_shape=(3,), obs_dtype="float32", num_actions=2)


    class NoSpec(Corridor):
        def __init__(self):
            super().__init__()
            self.spec = {"obs_shape": (6,)}


    class NoActions(Corridor):
        def __init__(self):
            super().__init__()
            self.spec = EnvSpec(obs_shape=(6,), obs_dtype="float32", num_actions=0)


    def needs_a_map():
        raise FileNotFoundError("maps/level1.txt is missing")


    class Branchy(Corridor):
        """A Python branch on a traced value: does not trace."""

        def step(self, state, action, key):
            if state.pos > 3:  # the user's line
                action = 0
            return super().step(state, action, key)


    class MyCartPole(CartPole):
        pass


    cartpole_object = MyCartPole()
    made = gymnax.make("CartPole-v1")
    not_an_env = 3
''')


NETWORKS = textwrap.dedent('''
    """A user's torsos: one of its own, the built-in MLP torso by a factory, and wrong ones."""
    import flax.linen as nn
    import jax.numpy as jnp

    from rlcore.networks import MLPActorCritic


    class Wide(nn.Module):
        """One ReLU layer: ``obs [N, ...] -> [N, width]``."""

        width: int = 32

        @nn.compact
        def __call__(self, obs):
            x = obs.reshape((obs.shape[0], -1)).astype(jnp.float32)
            return nn.relu(nn.Dense(self.width)(x))


    def mlp_torso(spec):
        return MLPActorCritic(num_actions=spec.num_actions, heads=False)


    class Flat(nn.Module):
        @nn.compact
        def __call__(self, obs):
            return nn.Dense(3)(obs.reshape((obs.shape[0], -1)))[:, 0]


    class Raises(nn.Module):
        @nn.compact
        def __call__(self, obs):
            raise RuntimeError("not today")


    def needs_two(spec, other):
        return Wide()
''')


ALGORITHMS = textwrap.dedent('''
    """A user's algorithms: PPO with an entropy scale of its own, and wrong ones."""
    import dataclasses

    from rlcore.algorithms.ppo import PPO


    @dataclasses.dataclass(frozen=True)
    class ScaledPPO(PPO):
        """PPO whose entropy bonus is scaled by ``ent_scale`` (1.0: PPO's)."""

        ent_scale: float = 1.0
        label: str = "plain"
        extra_epochs: int = 0

        def loss(self, params, apply_fn, batch, axis_name):
            scaled = dataclasses.replace(self, ent_coef=self.ent_coef * self.ent_scale)
            return PPO.loss(scaled, params, apply_fn, batch, axis_name)


    @dataclasses.dataclass(frozen=True)
    class NoLoss:
        gamma: float


    @dataclasses.dataclass(frozen=True)
    class NoDefault(PPO):
        temperature: float = dataclasses.field(default=None)
''')


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    """``userenvs``, ``usernets`` and ``useralgos`` (the modules above) in a directory
    outside the repository, importable."""
    root = tmp_path / "outside"
    root.mkdir()
    (root / "userenvs.py").write_text(PACKAGE)
    (root / "usernets.py").write_text(NETWORKS)
    (root / "useralgos.py").write_text(ALGORITHMS)
    monkeypatch.syspath_prepend(str(root))
    return root


def _with(user_package) -> dict:
    """The environment of a command that imports the user's package."""
    return dict(entry_env(), PYTHONPATH=os.pathsep.join([str(user_package), REPO]))


def _sebulba_trains(env: dict, workdir, *overrides: str) -> None:
    """``sebulba.main`` on the shipped CartPole config with ``overrides``, 4000 steps."""
    proc = run_entry("sebulba.main", [f"--config={REPO}/configs/cartpole_ppo_sebulba.py",
                                      *overrides, "--config.total_env_steps=4000",
                                      f"--workdir={workdir}"], env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("name", ["Corridor", "short_corridor", "MyCartPole",
                                  "cartpole_object", "made"])
def test_each_form_of_env_runs_with_auto_reset_in_both_modes(user_package, name):
    """A class, a factory, a gymnax subclass, a gymnax object and gymnax.make's pair: each
    resolves in both modes, steps with auto-reset and keeps episode statistics."""
    env_id = f"userenvs:{name}"
    registry.check_jax_env_id(env_id)
    registry.check_host_env_id(env_id)
    assert registry.resolve(env_id, registry.SEBULBA).library == registry.IMPORTED
    env = registry.make_jax_env(env_id)
    state, step = env.reset(jax.random.key(0))
    ended = False
    for i in range(600):
        state, step = env.step(state, jnp.int32(1), jax.random.key(i + 1))
        if bool(step.terminated | step.truncated):
            ended = True
            break
    assert ended and step.obs.shape == env.spec.obs_shape
    assert int(state.stats.completed_length) == i + 1 and int(state.stats.running_length) == 0


def test_the_step_protocol_auto_resets_and_truncates(user_package):
    """The corridor walked left never reaches the goal: cut at its own ``max_steps``, the
    step that ends it returns the first obs of the next episode."""
    env = registry.make_jax_env("userenvs:short_corridor", max_steps_in_episode=5)
    assert env.env.max_steps == 5  # the time-limit keyword reaches the factory
    state, first = env.reset(jax.random.key(0))
    for i in range(5):
        state, step = env.step(state, jnp.int32(0), jax.random.key(i + 1))
    assert bool(step.truncated) and not bool(step.terminated)
    np.testing.assert_array_equal(step.obs, first.obs)
    assert float(state.stats.completed_return) == pytest.approx(-0.05)


@pytest.mark.parametrize("env_id,message", [
    ("nopackage.envs:Env", "env_id: cannot import module 'nopackage.envs' of "
     "'nopackage.envs:Env'; is its package installed or on PYTHONPATH?"),
    ("userenvs:Missing", "env_id: module 'userenvs' has no attribute 'Missing'"),
    ("userenvs:not_an_env", "env_id: 'userenvs:not_an_env' gives an object of type int, "
     "not an env"),
    ("userenvs:NoSpec", "env_id: 'userenvs:NoSpec' has spec dict, not an rlcore.types.EnvSpec"),
    ("userenvs:WrongShape", "env_id: 'userenvs:WrongShape': reset's obs has shape (6,), its "
     "spec says (3,)"),
    ("userenvs:NoActions", "env_id: 'userenvs:NoActions' has spec num_actions=0: must be an "
     "integer >= 1 (its action set's size)"),
    ("userenvs:needs_a_map", "env_id: building 'userenvs:needs_a_map' with no arguments "
     "raised: FileNotFoundError: maps/level1.txt is missing (at "),
    ("userenvs.Corridor", "env_id: unknown env 'userenvs.Corridor'; did you mean "
     "'userenvs:Corridor'? (an import path puts a colon before the name: MODULE:NAME)"),
])
def test_a_bad_import_path_or_object_is_one_line(user_package, env_id, message):
    for check in (registry.check_jax_env_id, registry.check_host_env_id):
        with pytest.raises(ConfigError) as e:
            check(env_id)
        assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.mark.parametrize("field, value", [  # two in the long tier: each a Python start
    ("env_id", "userenvs:NoActions"),
    pytest.param("env_id", "userenvs:needs_a_map", marks=pytest.mark.slow),
    ("network", "usernets.Wide"),
    pytest.param("algorithm", "useralgos.ScaledPPO", marks=pytest.mark.slow)])
def test_a_refused_env_or_a_dot_for_the_colon_exits_2_from_the_command_line(
        user_package, tmp_path, field, value):
    """One ``config error: <field>:`` line, exit 2, in both modes (the env with no actions
    before anything compiles); a dot for the colon names the path meant."""
    for module in ("anakin.main", "sebulba.main"):
        proc = run_entry(module, [f"--config.{field}={value}", f"--workdir={tmp_path / 'r'}"],
                         env=_with(user_package), timeout_s=120)
        assert proc.returncode == 2 and proc.stderr.startswith(f"config error: {field}: "), \
            proc.stderr[-2000:]
        assert proc.stderr.count("\n") == 1
        if "." in value.split(":")[0] and ":" not in value:
            assert f"did you mean '{value.replace('.', ':')}'?" in proc.stderr


def test_a_module_whose_own_import_fails_says_which(user_package):
    (user_package / "broken.py").write_text("import not_installed_anywhere\n")
    with pytest.raises(ConfigError, match="^env_id: cannot import module 'broken' of "
                       "'broken:Env' \\(it imports 'not_installed_anywhere', which is missing"):
        registry.check_jax_env_id("broken:Env")


def _line_of(text: str, marker: str) -> int:
    """The line number of the first line of ``text`` holding ``marker``."""
    return next(i for i, ln in enumerate(text.splitlines(), 1) if marker in ln)


@pytest.mark.parametrize("module, field, value, file, marker", [
    ("anakin.main", "env_id", "userenvs:Branchy", "userenvs.py", "# the user's line"),
    ("sebulba.main", "network", "usernets:Raises", "usernets.py", 'RuntimeError("not today")'),
])
def test_a_refusal_of_your_code_names_your_line_and_keeps_the_traceback(
        user_package, tmp_path, module, field, value, file, marker):
    """An env that does not trace, a torso that raises: one ``config error:`` line, exit 2,
    naming the user's file and line (not the frame of ours that called it) and a file with
    the whole traceback, written though no workdir exists yet (docs/design.md, "Exit
    codes")."""
    proc = run_entry(module, [f"--config.{field}={value}", f"--workdir={tmp_path / 'r'}"],
                     env=_with(user_package), timeout_s=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    line = _line_of((user_package / file).read_text(), marker)
    assert f"(at {user_package / file}:{line} in " in proc.stderr, proc.stderr
    details = proc.stderr.strip().rpartition("; traceback in ")[2]
    text = open(details).read()
    assert "Traceback (most recent call last)" in text and f"{file}\", line {line}" in text
    assert not os.path.exists(tmp_path / "r")
    os.remove(details)


def test_a_checkpoint_your_changed_network_no_longer_fits_says_so(user_package, tmp_path):
    """A run of a torso of the user's, resumed after its width changed: the checkpoint line
    blames the user's code by its import path, not the version."""
    import sys

    torso = NETWORKS.replace("width: int = 32", "width: int = {width}")
    (user_package / "changing.py").write_text(torso.replace("{width}", "8"))
    mesh = data_mesh(jax.devices()[:1])
    config = _short("CartPole-v1", network="changing:Wide")
    half = _short("CartPole-v1", network="changing:Wide",
                  total_env_steps=config.total_env_steps // 2)
    train(half, str(tmp_path / "run"), mesh=mesh)
    (user_package / "changing.py").write_text(torso.replace("{width}", "12"))
    sys.modules.pop("changing")
    with pytest.raises(Exception, match="your own code \\(network=changing:Wide\\) changed "
                       "since it was written") as e:
        train(config, str(tmp_path / "run"), mesh=mesh)
    assert "version" not in str(e.value) and "\n" not in str(e.value)


def test_an_object_whose_repr_spans_lines_is_refused_in_one_line():
    """A refusal that quotes a repr of several lines reads as one line."""
    from rlcore.imports import path_of

    class Tall:
        def __repr__(self):
            return "Tall(\n  a=1,\n  b=2)"

    with pytest.raises(ConfigError) as e:
        path_of(Tall(), "env_id")
    assert "\n" not in str(e.value) and "Tall( a=1, b=2)" in str(e.value)


def _short(env_id: str, **overrides):
    config = cartpole_ppo.get_config()
    config.env_id = env_id
    config.total_env_steps = 16 * 32 * 4
    config.num_envs, config.num_steps = 16, 32
    config.log_every, config.updates_per_call = 2, 2
    for k, v in overrides.items():
        config[k] = v
    return config


def test_a_gymnax_subclass_trains_as_the_built_in_env(user_package, tmp_path):
    """gymnax's CartPole through an import path gives the same metrics as ``CartPole-v1``
    (fixed seed; two seeds of two swept learning rates, four agents): the adapter is the one
    gymnax's own ids go through."""
    mesh = data_mesh(jax.devices()[:1])
    for env_id, name in (("userenvs:MyCartPole", "user"), ("CartPole-v1", "builtin")):
        config = _short(env_id, num_seeds=2)
        config.sweep.learning_rate = (5e-4, 1e-3)
        train(config, str(tmp_path / name), mesh=mesh)
    user = reproducible_part(read_metrics(tmp_path / "user"))
    assert user == reproducible_part(read_metrics(tmp_path / "builtin")) and len(user) == 8
    assert {(r["learning_rate"], r["seed"]) for r in user} == {
        (lr, s) for lr in (5e-4, 1e-3) for s in (0, 1)}


@pytest.mark.slow  # 20-30 s (the default tier's 12 minutes)
def test_the_commands_run_a_package_outside_the_repository(user_package, tmp_path):
    """Anakin trains the corridor, resumes it and evaluates it; Sebulba trains it on a host
    CPU device; a bad path exits 2 in one line before anything compiles."""
    env = _with(user_package)
    workdir = str(tmp_path / "anakin")
    args = [f"--config={REPO}/configs/cartpole_ppo.py", "--config.env_id=userenvs:Corridor",
            "--config.total_env_steps=8192", "--config.log_every=4", f"--workdir={workdir}"]
    for total in (8192, 12288):  # trains, then extends
        proc = run_entry("anakin.main", [*args, f"--config.total_env_steps={total}"], env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_metrics(workdir)[-1]["env_steps"] == 12288
    proc = run_entry("anakin.evaluate", [f"--workdir={workdir}", "--episodes=2"], env=env)
    assert proc.returncode == 0 and "return" in proc.stdout, proc.stderr[-2000:]
    _sebulba_trains(env, tmp_path / "sebulba", "--config.env_id=userenvs:short_corridor")
    proc = run_entry("anakin.main", [*args[:1], "--config.env_id=userenvs:not_an_env",
                                     f"--workdir={tmp_path / 'bad'}"], env=env)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert proc.stderr.startswith("config error: env_id: 'userenvs:not_an_env' gives")
    assert not os.path.exists(tmp_path / "bad")


def _own_names_dir(user_package):
    """The user's directory as a project around the platform has it: a ``configs/`` folder
    of YAML only (Hydra's), its own ``envs/`` and ``runtime/`` packages and a
    ``benchmarks/`` folder, with the user's env module beside them."""
    (user_package / "configs").mkdir()
    (user_package / "configs" / "train.yaml").write_text("lr: 0.001\n")
    for package in ("envs", "runtime"):
        (user_package / package).mkdir()
        (user_package / package / "__init__.py").write_text('"""Their own package."""\n')
    (user_package / "envs" / "grid.py").write_text("from userenvs import Corridor  # noqa\n")
    (user_package / "benchmarks").mkdir()
    (user_package / "benchmarks" / "sweep.sh").write_text("echo\n")
    return user_package


@pytest.mark.slow  # 21 s
def test_the_commands_run_from_a_directory_with_its_own_configs_and_envs(
        user_package, tmp_path):
    """From a directory holding its own ``configs/``, ``envs/``, ``runtime/`` and
    ``benchmarks/`` (first on ``sys.path``, as ``python -m`` puts it), both modes train the
    user's env by import path on a shipped config named as the docs name it, and evaluate;
    an import path into the user's ``envs`` package says why it cannot load, in one line
    (docs/design.md, "Installed package")."""
    import subprocess
    import sys

    cwd = _own_names_dir(user_package)
    env = dict(entry_env(), PYTHONPATH=REPO)

    def command(module, *args):
        return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)

    for module, config in (("anakin.main", "configs/cartpole_ppo.py"),
                           ("sebulba.main", "configs/cartpole_ppo_sebulba.py")):
        proc = command(module, f"--config={config}", "--config.env_id=userenvs:Corridor",
                       "--config.total_env_steps=4096", f"--workdir={tmp_path / module}")
        assert proc.returncode == 0, proc.stderr[-2000:]
    proc = command("anakin.evaluate", f"--workdir={tmp_path / 'anakin.main'}", "--episodes=2")
    assert proc.returncode == 0 and "return" in proc.stdout, proc.stderr[-2000:]
    proc = command("anakin.main", "--config=configs/cartpole_ppo.py",
                   "--config.env_id=envs.grid:Corridor", f"--workdir={tmp_path / 'bad'}")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert "'envs' is podracer-rl's own package" in proc.stderr


# ----------------------------------------------------------------------------- your network


def test_a_torso_by_import_path_is_the_torso_the_built_in_name_gives(user_package, tmp_path):
    """The built-in MLP torso named by a factory of the user's: a recurrent agent on it logs
    the same metrics as ``network=mlp`` (fixed seed): the import path goes the one way."""
    mesh = data_mesh(jax.devices()[:1])
    rows = {}
    for name in ("mlp", "usernets:mlp_torso"):
        config = masked_cartpole_ppo.get_config()
        config.network, config.total_env_steps, config.log_every = name, 8 * 64 * 4, 2
        config.num_envs, config.num_steps, config.updates_per_call = 8, 64, 2
        workdir = tmp_path / name.replace(":", "_")
        train(config, str(workdir), mesh=mesh)
        rows[name] = reproducible_part(read_metrics(workdir))
    assert rows["mlp"] == rows["usernets:mlp_torso"] and len(rows["mlp"]) == 2


def test_your_own_torso_trains_normalised_resumes_and_evaluates(user_package, tmp_path):
    """A torso of the user's with the heads added, observation normalisation on, both
    architectures: trains, extends exactly as one longer run, and evaluates."""
    mesh = data_mesh(jax.devices()[:1])
    config = _short("CartPole-v1", network="usernets:Wide", normalize_obs=True, anneal_lr=False)
    train(config, str(tmp_path / "whole"), mesh=mesh)
    half = _short("CartPole-v1", network="usernets:Wide", normalize_obs=True, anneal_lr=False,
                  total_env_steps=config.total_env_steps // 2)
    train(half, str(tmp_path / "halves"), mesh=mesh)
    train(config, str(tmp_path / "halves"), mesh=mesh)
    assert reproducible_part(read_metrics(tmp_path / "halves")) == reproducible_part(
        read_metrics(tmp_path / "whole"))
    env = _with(user_package)
    proc = run_entry("anakin.evaluate", [f"--workdir={tmp_path / 'whole'}", "--episodes=2"],
                     env=env)
    assert proc.returncode == 0 and "return" in proc.stdout, proc.stderr[-2000:]
    _sebulba_trains(env, tmp_path / "sebulba", "--config.network=usernets:Wide")


@pytest.mark.parametrize("network,message", [
    ("usernets:Flat", "network: 'usernets:Flat' gives float32 [2] for 2 observations; a "
     "torso gives float features [N, D]"),
    ("usernets:Raises", "network: 'usernets:Raises' does not trace on observations float32 "
     "[N, 4]: RuntimeError: not today"),
    ("usernets:needs_two", "network: 'usernets:needs_two' could not be built with the env's "
     "spec: TypeError:"),
    ("userenvs:not_an_env", "network: 'userenvs:not_an_env' gives an object of type int, "
     "not a flax module"),
    ("usernets:Missing", "network: module 'usernets' has no attribute 'Missing'"),
    ("resnet", "network: must be one of mlp, nature_cnn, impala_resnet, minatar_cnn, or an "
     "import path PACKAGE.MODULE:NAME, got 'resnet'"),
])
def test_a_bad_torso_is_one_line_before_compile(user_package, network, message):
    _refused_before_compile("network", network, message)


def _refused_before_compile(field: str, value: str, message: str) -> None:
    """``prepare`` of CartPole PPO with ``field=value`` raises one line starting ``message``."""
    config = cartpole_ppo.get_config()
    config[field] = value
    with pytest.raises(ConfigError) as e:
        prepare(config)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_your_env_and_torso_give_the_same_run_on_one_and_four_devices(user_package):
    """The corridor with a torso of the user's: the losses and returns of one device and of
    four agree (as ``tests/anakin/test_anakin_train.py::test_one_vs_four_devices``)."""
    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    config = _short("userenvs:Corridor", network="usernets:Wide", log_every=1,
                    updates_per_call=4, optimizer="rmsprop", learning_rate=0.5,
                    rmsprop_eps=10.0, max_grad_norm=0.0)
    one = train(config, None, mesh=data_mesh(jax.devices()[:1]))
    four = train(config, None, mesh=data_mesh(jax.devices()[:4]))
    assert len(one) == len(four) == 4
    assert_rows_close(one, four, tol=1e-4)


# ----------------------------------------------------------------------------- from Python


def test_python_entry_points_take_your_objects_and_report_each_row(user_package, tmp_path):
    """``anakin.run`` and ``sebulba.run`` with the user's env and torso as objects: the
    config records their import paths, ``on_row`` sees every row as the run logs it, and
    a second call on the same workdir extends the run (the lock was given back)."""
    import json

    import userenvs
    import usernets

    import anakin
    import sebulba

    seen = []
    config = _short("CartPole-v1")
    workdir = str(tmp_path / "anakin")
    rows = anakin.run(config, workdir, env=userenvs.short_corridor, network=usernets.Wide,
                      on_row=seen.append, mesh=data_mesh(jax.devices()[:1]))
    assert seen == list(rows.rows) and [r["update"] for r in rows] == [2, 4]
    saved = json.loads((tmp_path / "anakin" / "config.json").read_text())
    assert (saved["env_id"], saved["network"]) == ("userenvs:short_corridor", "usernets:Wide")
    assert config.env_id == "CartPole-v1"  # the caller's config is not changed
    longer = _short("CartPole-v1", total_env_steps=2 * config.total_env_steps)
    more = anakin.run(longer, workdir, env=userenvs.short_corridor, network=usernets.Wide,
                      mesh=data_mesh(jax.devices()[:1]))
    assert [r["update"] for r in more] == [6, 8]
    seen = []
    sebulba_config = _sebulba_short()
    rows = sebulba.run(sebulba_config, str(tmp_path / "sebulba"), env=userenvs.cartpole_object,
                       on_row=seen.append)
    assert seen == list(rows) and rows and rows[-1]["env_steps"] <= sebulba_config.total_env_steps
    with pytest.raises(ConfigError, match="^env_id: function object .* has no name at the top"):
        anakin.run(config, None, env=lambda: userenvs.Corridor())


def _sebulba_short():
    from configs import cartpole_ppo_sebulba

    config = cartpole_ppo_sebulba.get_config()
    config.total_env_steps = 4000
    return config


# ----------------------------------------------------------------------------- your algorithm


def test_your_algorithm_goes_the_built_in_way(user_package, tmp_path):
    """PPO subclassed outside the repository, at its own hyperparameters' defaults, logs
    what ``algorithm=ppo`` logs (fixed seed, two agents); the run's config records them."""
    import json

    import anakin

    mesh = data_mesh(jax.devices()[:1])
    config = _short("CartPole-v1", num_seeds=2)
    ppo = anakin.run(config, str(tmp_path / "ppo"), mesh=mesh)
    own = anakin.run(config, str(tmp_path / "own"), algorithm="useralgos:ScaledPPO", mesh=mesh)
    assert reproducible_part(own) == reproducible_part(ppo) and len(own) == 4
    saved = json.loads((tmp_path / "own" / "config.json").read_text())
    assert saved["algorithm"] == "useralgos:ScaledPPO"
    assert saved["algo"] == {"ent_scale": 1.0, "label": "plain", "extra_epochs": 0}
    assert saved["sweep"]["algo"] == {"ent_scale": []}


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_its_hyperparameters_are_set_swept_and_checked_from_the_command_line(user_package,
                                                                            tmp_path):
    """``--config.algo.NAME`` sets one, ``--config.sweep.algo.NAME`` sweeps a float one (each
    agent's metrics tagged ``algo.NAME``), a resume with another value is refused naming
    ``algo.NAME`` and its two values; Sebulba trains it too."""
    env = _with(user_package)
    workdir = str(tmp_path / "sweep")
    args = [f"--config={REPO}/configs/cartpole_ppo.py", "--config.algorithm=useralgos:ScaledPPO",
            "--config.total_env_steps=4096", "--config.log_every=4", f"--workdir={workdir}"]
    proc = run_entry("anakin.main", [*args, "--config.sweep.algo.ent_scale=0.0,4.0",
                                     "--config.algo.label=swept"], env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = read_metrics(workdir)
    assert sorted({r["algo.ent_scale"] for r in rows}) == [0.0, 4.0]
    by_scale = {r["algo.ent_scale"]: r["loss/total"] for r in rows if r["update"] == 4}
    assert by_scale[0.0] != by_scale[4.0]
    proc = run_entry("anakin.main", [*args, "--config.sweep.algo.ent_scale=0.0,4.0",
                                     "--config.algo.label=other",
                                     "--config.total_env_steps=8192"], env=env)
    assert proc.returncode == 2 and proc.stderr.startswith(
        "config error: algo.label: the checkpoint"), proc.stderr
    assert "was made with 'swept', not 'other';" in proc.stderr
    _sebulba_trains(env, tmp_path / "sebulba", "--config.algorithm=useralgos:ScaledPPO",
                    "--config.algo.ent_scale=0.5")


@pytest.mark.parametrize("flags,message", [
    (["--config.algo.temperature=1"], "config error: algo.temperature: useralgos:ScaledPPO has "
     "no hyperparameter 'temperature' of its own (its own: ent_scale, label, extra_epochs)"),
    (["--config.algo.ent_scale=high"], "config error: algo.ent_scale: must be a float, got "
     "'high'"),
    (["--config.sweep.algo.extra_epochs=1,2"], "config error: sweep.algo.extra_epochs: only "
     "float hyperparameters are swept (it is a int)"),
])
def test_a_bad_hyperparameter_is_one_line_before_compile(user_package, tmp_path, flags,
                                                         message):
    env = _with(user_package)
    proc = run_entry("anakin.main", [f"--config={REPO}/configs/cartpole_ppo.py",
                                     "--config.algorithm=useralgos:ScaledPPO", *flags,
                                     f"--workdir={tmp_path / 'run'}"], env=env)
    assert proc.returncode == 2 and proc.stderr.strip() == message, proc.stderr


@pytest.mark.parametrize("algorithm,message", [
    ("useralgos:NoLoss", "algorithm: 'useralgos:NoLoss' lacks "
     "minibatch_kinds, loss_reduction, staleness_corrections, from_hparams, "
     "prepare, split_ready, loss, heads, act, init_state, remember, schedule, after_update, "
     "check (the Algorithm protocol"),
    ("useralgos:NoDefault", "algorithm: 'useralgos:NoDefault' has hyperparameter temperature "
     "without a default of type float, int, bool or str"),
    ("userenvs:Corridor", "algorithm: 'userenvs:Corridor' gives type"),
    ("useralgos:Missing", "algorithm: module 'useralgos' has no attribute 'Missing'"),
])
def test_a_class_that_is_no_algorithm_is_one_line(user_package, algorithm, message):
    _refused_before_compile("algorithm", algorithm, message)
