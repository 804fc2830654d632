"""The suites that install as optional extras (envs.registry.SUITES): the refusal where one is
missing, and per suite a smoke test of its adapter in Anakin's compiled training step
(skipped, naming the extra, where the suite is not installed; CI installs them with ``dev``).
The long tier runs each in Sebulba, with ``num_seeds``, evaluation and video."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from anakin.train import prepare, train
from envs import registry
from envs.autoreset import keys_as_data
from envs.base import step_batch
from rlcore.errors import ConfigError
from runtime.distributed import data_mesh

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def needs(library: str):
    """Skips a test where ``library``'s extra is not installed, saying which to install."""
    missing = registry.missing_extra(library)
    return pytest.mark.skipif(missing is not None,
                              reason=f"the '{library}' extra is not installed: "
                                     f"pip install -e '.[{library}]'")


def test_a_missing_extra_is_refused_naming_it(monkeypatch):
    """Every spelling of a suite's id, in both modes, is refused with the one line that names
    the extra while the suite's module is missing."""
    module, *rest = registry.SUITES["craftax"]
    monkeypatch.setitem(registry.SUITES, "craftax", ("no_such_module_for_test", *rest))
    for mode in (registry.ANAKIN, registry.SEBULBA):
        with pytest.raises(ConfigError) as e:
            registry.resolve("craftax:Craftax-Classic-Symbolic-v1", mode)
        assert str(e.value) == ("env_id: 'craftax:Craftax-Classic-Symbolic-v1' needs the "
                                "'craftax' extra, which is not installed: "
                                "pip install -e '.[craftax]'")


def test_the_train_command_refuses_a_missing_extra_with_exit_2(tmp_path):
    """``anakin.main`` with a Craftax config where Craftax is not importable (hidden with
    ``sys.modules['craftax'] = None``): exit 2, one ``error:`` line naming the extra,
    before JAX compiles anything."""
    code = ("import runpy, sys; sys.modules['craftax'] = None; "
            "sys.argv = ['anakin.main', '--config=configs/craftax_classic_ppo_rnn.py', "
            f"'--workdir={tmp_path}']; runpy.run_module('anakin.main', run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": REPO}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["config error: env_id: 'craftax:Craftax-Classic-Symbolic-v1' needs the "
                     "'craftax' extra, which is not installed: pip install -e '.[craftax]'"]


def test_suite_ids_are_prefixed_only():
    for library in registry.SUITES:
        for name in registry.library_ids(library):
            assert registry.split_prefix(f"{library}:{name}") == (library, name)
            with pytest.raises(ConfigError, match="unknown env"):
                registry.resolve(name, registry.ANAKIN)


def _limit_episodes(monkeypatch, **env_overrides) -> None:
    """Every env the registry makes from here on gets ``env_overrides`` (a short time limit,
    so that episodes end), in both modes; an override passed by the caller wins."""
    make = registry._make_jittable
    monkeypatch.setattr(registry, "_make_jittable", lambda library, name, **overrides: make(
        library, name, **{**env_overrides, **overrides}))


def _tiny(config, num_envs: int = 4):
    """``config`` at a tiny size: ``num_envs`` envs x 16 steps, two updates, one epoch."""
    config.num_envs, config.num_steps, config.num_epochs = num_envs, 16, 1
    config.num_minibatches, config.log_every, config.updates_per_call = 2, 1, 2
    config.total_env_steps = num_envs * 16 * 2
    return config


def _check_rows(rows: list[dict]) -> None:
    assert [r["update"] for r in rows] == [1, 2]
    for r in rows:
        losses = [v for k, v in r.items() if k.startswith("loss/")]
        assert losses and np.all(np.isfinite(losses)), r


def _train_tiny(config, monkeypatch, **env_overrides) -> list[dict]:
    """Trains ``config`` (``_tiny``) in Anakin on one device, the env made with
    ``env_overrides``; checks the losses are finite; returns the rows."""
    _limit_episodes(monkeypatch, **env_overrides)
    prepare(_tiny(config))
    rows = train(config, None, mesh=data_mesh(jax.devices()[:1]))
    _check_rows(rows)
    return rows


# ----------------------------------------------------------------------------- Craftax


@needs("craftax")
def test_craftax_episode_values_are_the_papers_measures():
    """``achievement/<name>``: 100 where unlocked; ``score_percent``: the achievements'
    reward over the most they pay (Classic 22 x 1; Craftax 226 over 67 weighted 1/3/5/8)."""
    from envs.craftax import CLASSIC, FULL, SCORE, achievement_weights, episode_values

    names, w = achievement_weights(CLASSIC)
    assert len(names) == 22 and names[0] == "collect_wood" and (w == 1).all()
    got = np.zeros(22, bool)
    got[[0, 1, 5]] = True
    values = episode_values(jnp.asarray(got), jnp.asarray(w), names)
    assert float(values[SCORE]) == pytest.approx(300 / 22)
    assert float(values["achievement/collect_wood"]) == 100.0
    assert float(values["achievement/eat_cow"]) == 0.0
    names, w = achievement_weights(FULL)
    assert len(names) == 67 and w.sum() == 226
    got = np.zeros(67, bool)
    got[np.argmax(w)] = True  # one achievement of reward 8
    values = episode_values(jnp.asarray(got), jnp.asarray(w), names)
    assert float(values[SCORE]) == pytest.approx(800 / 226)


@needs("craftax")
@pytest.mark.slow
def test_craftax_lazy_reset_draws_each_envs_own_world():
    """Craftax's lazy reset (``lazy_reset_chunk`` 1) in a batch of 6 whose episodes all end
    at step 2 (six passes): every env's next world, state and obs, is the one its own
    single ``step`` draws, and the statistics match too."""
    from envs.craftax import CLASSIC, CraftaxEnv

    env, n = CraftaxEnv(CLASSIC, max_timesteps=2), 6
    assert env.lazy_reset_chunk == 1
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), n))
    action = jnp.zeros(n, jnp.int32)
    step_one, batch = jax.jit(env.step), jax.jit(lambda s, a, k: step_batch(env, s, a, k))
    for t in range(2):
        keys = jax.random.split(jax.random.key(t + 1), n)
        state_b, ts_b = batch(state, action, keys)
        for i in range(n):
            take = functools.partial(lambda i, x: x[i], i)
            want = step_one(jax.tree.map(take, state), action[i], keys[i])
            got = jax.tree.map(take, (state_b, ts_b))
            jax.tree.map(np.testing.assert_array_equal, keys_as_data(want), keys_as_data(got))
        state = state_b
    assert bool(np.all(ts_b.terminated | ts_b.truncated))


@needs("craftax")
@pytest.mark.slow  # 20-30 s (the default tier's last 12 minutes)
def test_craftax_classic_in_anakin_logs_achievements(monkeypatch):
    """configs/craftax_classic_ppo_rnn.py (GRU agent) at a tiny size with a 10-step time
    limit: every env's episodes are cut at 10 steps (truncated, reset in the same step), and
    the metrics lines hold the score and every achievement, in [0, 100]."""
    from configs import craftax_classic_ppo_rnn

    rows = _train_tiny(craftax_classic_ppo_rnn.get_config(), monkeypatch, max_timesteps=10)
    spec = registry.jax_env_spec("craftax:Craftax-Classic-Symbolic-v1")
    assert spec.obs_shape == (1345,) and spec.num_actions == 17
    for r in rows:
        assert r["episode_length"] == 10.0, r
        for name in spec.episode_info:
            assert 0.0 <= r[f"episode/{name}"] <= 100.0, (name, r)
        assert r["episode/score_percent"] == pytest.approx(np.mean(
            [r[f"episode/{n}"] for n in spec.episode_info[:-1]]))


def test_extras_named_in_pyproject():
    """Every suite, and Brax, is an optional extra of pyproject.toml, under its library's
    name; the core dependencies hold none of them, nor the video, bench or developer
    tools."""
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    extras = project["optional-dependencies"]
    for library in (*registry.SUITES, *registry.OTHER_EXTRAS, "video", "bench"):
        assert library in extras, library
    core = " ".join(project["dependencies"])
    for name in ("brax", "imageio", "rliable", "pytest", "mkdocs", "wandb", "craftax"):
        assert name not in core, name


def test_a_missing_brax_is_refused_naming_its_extra(monkeypatch):
    real = registry.importlib.util.find_spec
    monkeypatch.setattr(registry.importlib.util, "find_spec",
                        lambda name, *a: None if name == "brax" else real(name, *a))
    with pytest.raises(ConfigError) as e:
        registry.resolve("brax:inverted_pendulum", registry.ANAKIN)
    assert str(e.value) == ("env_id: 'brax:inverted_pendulum' needs the 'brax' extra, which "
                            "is not installed: pip install -e '.[brax]'")


# ----------------------------------------------------------------------------- XLand-MiniGrid


@needs("xminigrid")
def test_xminigrid_ids_are_its_minigrid_tasks():
    import xminigrid

    from envs.xminigrid import XMINIGRID_IDS

    tasks = {n for n in xminigrid.registered_environments() if n.startswith("MiniGrid-")}
    assert set(XMINIGRID_IDS) == tasks


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
@needs("xminigrid")
def test_xminigrid_doorkey_in_anakin(monkeypatch):
    """configs/doorkey_ppo_rnn.py (GRU agent) at a tiny size with a 10-step time limit: the
    7x7x2 view, 6 actions; episodes end by the limit (or the goal) within 10 steps."""
    from configs import doorkey_ppo_rnn

    rows = _train_tiny(doorkey_ppo_rnn.get_config(), monkeypatch, max_steps=10)
    spec = registry.jax_env_spec("xminigrid:MiniGrid-DoorKey-5x5")
    assert spec.obs_shape == (7, 7, 2) and spec.num_actions == 6
    for r in rows:
        assert r["episode_length"] is not None and r["episode_length"] <= 10.0, r
        assert 0.0 <= r["episode_return"] <= 1.0, r


# ----------------------------------------------------------------------------- Jumanji


@needs("jumanji")
def test_jumanji_ids_are_its_one_discrete_action_envs():
    import jumanji

    from envs.jumanji import JUMANJI_IDS

    assert set(JUMANJI_IDS) <= set(jumanji.registered_environments())
    assert "Snake-v1" in JUMANJI_IDS and "BinPack-v2" not in JUMANJI_IDS


@needs("jumanji")
def test_jumanji_snake_in_anakin(monkeypatch):
    """configs/snake_ppo.py at a tiny size with a 10-step time limit: a 725-vector
    observation, 4 actions; episodes end by the limit or a crash within 10 steps, with at
    most one fruit a step."""
    from configs import snake_ppo

    rows = _train_tiny(snake_ppo.get_config(), monkeypatch, time_limit=10)
    spec = registry.jax_env_spec("jumanji:Snake-v1")
    assert spec.obs_shape == (725,) and spec.num_actions == 4
    for r in rows:
        assert r["episode_length"] is not None and r["episode_length"] <= 10.0, r
        assert 0.0 <= r["episode_return"] <= r["episode_length"], r


# ----------------------------------------------------------------------------- MuJoCo Playground


@needs("playground")
def test_playground_ids_are_its_dm_control_tasks():
    from mujoco_playground import dm_control_suite

    from envs.playground import PLAYGROUND_IDS

    assert PLAYGROUND_IDS == tuple(dm_control_suite.ALL_ENVS)


@needs("playground")
@pytest.mark.slow  # 20-40 s (the default tier's last 12 minutes)
def test_playground_cartpole_balance_in_anakin(monkeypatch):
    """configs/playground_cartpole_balance_ppo.py at a tiny size with a 10-step limit: 5
    observations, one action in [-1, 1]; every episode is cut at 10 steps (the cart does
    not fall: DMC tasks end by the limit only), its return within [0, 10] (at most 1 a
    step)."""
    from configs import playground_cartpole_balance_ppo

    rows = _train_tiny(playground_cartpole_balance_ppo.get_config(), monkeypatch,
                       episode_length=10)
    spec = registry.jax_env_spec("playground:CartpoleBalance")
    assert spec.obs_shape == (5,) and (spec.action_low, spec.action_high) == ((-1.0,), (1.0,))
    for r in rows:
        assert r["episode_length"] == 10.0, r
        assert 0.0 <= r["episode_return"] <= 10.0, r


# ----------------------------------------------------------------------------- every suite

SUITE_CONFIGS = [
    pytest.param("craftax_classic_ppo_rnn", {"max_timesteps": 10}, "craftax", id="craftax"),
    pytest.param("doorkey_ppo_rnn", {"max_steps": 10}, "xminigrid", id="xminigrid"),
    pytest.param("snake_ppo", {"time_limit": 10}, "jumanji", id="jumanji"),
    pytest.param("playground_cartpole_balance_ppo", {"episode_length": 10}, "playground",
                 id="playground"),
]


def _config(module: str):
    import importlib

    return importlib.import_module(f"configs.{module}").get_config()


@pytest.mark.slow
@pytest.mark.parametrize("module, limit, library", SUITE_CONFIGS)
def test_suite_in_sebulba_and_evaluated_with_its_renderer(module, limit, library, tmp_path,
                                                          monkeypatch):
    """The suite's config in Sebulba (the jittable env on a host CPU device, a recurrent
    agent): two updates, finite losses, episodes cut by the time limit, the env's
    per-episode values logged; then greedy evaluation with a video drawn by the suite's own
    renderer."""
    import sebulba.train as sebulba_train
    from runtime.commands.evaluation import EvalArgs
    from sebulba.evaluate import evaluate

    if registry.missing_extra(library):
        pytest.skip(f"the '{library}' extra is not installed: pip install -e '.[{library}]'")
    _limit_episodes(monkeypatch, **limit)
    config = _tiny(_config(module))
    sebulba_train.prepare(config)
    rows = sebulba_train.train(config, str(tmp_path / "run"))
    _check_rows(rows)
    spec = registry.host_env_spec(config.env_id)
    for r in rows:
        assert r["episode_length"] is not None and r["episode_length"] <= 10.0, r
        assert all(f"episode/{n}" in r for n in spec.episode_info), r
    evaluation = evaluate(config, EvalArgs(workdir=str(tmp_path / "run"), episodes=2,
                                           greedy=True, video=str(tmp_path / "v.mp4")))
    assert (evaluation.results.lengths <= 10).all()
    assert evaluation.frames and evaluation.frames[0].ndim == 3


@pytest.mark.slow
@pytest.mark.parametrize("module, limit, library", SUITE_CONFIGS)
def test_suite_in_anakin_with_seeds_and_video(module, limit, library, tmp_path, monkeypatch):
    """Two agents (``num_seeds=2``) of the suite's config in one Anakin program, then the
    evaluate command's episodes of agent 1 with a video of the suite's own pictures."""
    from anakin.evaluate import evaluate
    from runtime.commands.evaluation import EvalArgs

    if registry.missing_extra(library):
        pytest.skip(f"the '{library}' extra is not installed: pip install -e '.[{library}]'")
    _limit_episodes(monkeypatch, **limit)
    config = _tiny(_config(module))
    config.num_seeds = 2
    prepare(config)
    rows = train(config, str(tmp_path / "run"), mesh=data_mesh(jax.devices()[:1]))
    assert sorted({r["seed"] for r in rows}) == [0, 1]
    evaluation = evaluate(config, EvalArgs(workdir=str(tmp_path / "run"), episodes=2,
                                           greedy=True, video=str(tmp_path / "v.mp4"),
                                           agent=1))
    assert (evaluation.results.lengths <= 10).all()
    assert evaluation.frames and evaluation.frames[0].ndim == 3
    env = registry.make_jax_env(config.env_id, **limit)
    if hasattr(env, "render_frames"):  # the suite's own pictures, under the caption strip
        state, _ = env.reset(jax.random.key(0))
        one = jax.tree.map(lambda x: x[None], env.frame_state(state))
        assert evaluation.frames[0].shape[1:] == env.render_frames(one)[0].shape[1:]


@pytest.mark.parametrize("module, limit, library", [
    SUITE_CONFIGS[1], SUITE_CONFIGS[2],
    pytest.param(*SUITE_CONFIGS[3].values, marks=pytest.mark.slow, id="playground"),  # 24 s
    pytest.param(*SUITE_CONFIGS[0].values, marks=pytest.mark.slow, id="craftax")])
def test_suite_steps_in_shard_map_equal_plain_jit(module, limit, library):
    """The suite's steps inside ``shard_map`` (Anakin's, where envs/vma.py's stand-ins act)
    equal those of a plain jitted vmap (Sebulba's host adapter), bit for bit, over 12
    steps of 4 envs with random actions and a time limit that resets in between."""
    if registry.missing_extra(library):
        pytest.skip(f"the '{library}' extra is not installed: pip install -e '.[{library}]'")
    plain = _steps_in_shard_map_equal_plain_jit(
        registry.make_jax_env(_config(module).env_id, **limit))
    assert plain[0].truncated.any() or plain[0].terminated.any()


@pytest.mark.parametrize("env_id", [
    "Asterix-MinAtar",
    *(pytest.param(g, marks=pytest.mark.slow)  # 3-6 s each
      for g in ("Breakout-MinAtar", "Freeway-MinAtar", "Seaquest-MinAtar",
                "SpaceInvaders-MinAtar"))])
def test_minatar_steps_in_shard_map_equal_plain_jit(env_id):
    """Every MinAtar game steps inside Anakin's ``shard_map`` as in a plain jitted vmap, bit
    for bit (Asterix's slot loop through envs/vma.py's stand-ins: before, it did not
    compile there, for any algorithm)."""
    _steps_in_shard_map_equal_plain_jit(registry.make_jax_env(env_id))


def _steps_in_shard_map_equal_plain_jit(env):
    """12 steps of 4 envs of ``env`` with random actions, inside ``shard_map`` (the state
    varying over the data axis, as Anakin's enters its call) and in a plain jitted vmap:
    asserts them equal, bit for bit; returns the plain ``(TimeStep, stats) [12, 4]``."""
    from jax.sharding import PartitionSpec as P

    from anakin.episodes import varying

    n, steps = 4, 12
    keys = jax.random.split(jax.random.key(0), n)
    actions = jax.random.randint(jax.random.key(1), (steps, n), 0, env.spec.num_actions)
    step_keys = jax.random.split(jax.random.key(2), (steps, n))

    def run(keys, actions, step_keys, axis=None):
        state, _ = jax.vmap(env.reset)(keys)
        if axis:
            state = varying(state, axis)

        def one(state, x):
            state, ts = jax.vmap(env.step)(state, *x)
            return state, (ts, state.stats)

        return jax.lax.scan(one, state, (actions, step_keys))[1]

    mesh = data_mesh(jax.devices()[:1])
    sharded = jax.jit(jax.shard_map(
        functools.partial(run, axis="data"), mesh=mesh,
        in_specs=(P("data"), P(None, "data"), P(None, "data")), out_specs=P(None, "data")))
    plain = jax.tree.map(np.asarray, jax.jit(run)(keys, actions, step_keys))
    inside = jax.tree.map(np.asarray, sharded(keys, actions, step_keys))
    jax.tree.map(np.testing.assert_array_equal, inside, plain)
    return plain
