"""JaxEnv adapter over Brax envs (``brax:inverted_pendulum``, ``brax:hopper``, ...).

Brax's ``PipelineEnv`` has no time limit and no auto-reset of its own (its training wrappers
add them); this adapter counts the steps itself and leaves the auto-reset to
``envs.autoreset.AutoResetJaxEnv``::

    terminated = the env's ``done`` (e.g. the hopper fell, the pole tipped over)
    truncated  = step count reached ``episode_length`` (default 1000, Brax's) & ~terminated

Actions are clipped to the actuators' control range (``sys.actuator.ctrl_range``: [-3, 3] for
``inverted_pendulum``, [-1, 1] for the locomotion envs), which the spec gives as the bounds;
the policy samples unbounded Gaussian actions, as for every box env here.

Pipeline: ``spring`` by default, Brax's cheapest one on CPU. Measured on a 2-core host (64 envs
of ``inverted_pendulum``, one jitted, vmapped step, steps/s after the compile): spring 73.5k,
positional 39.3k, generalized 31.9k, mjx 26.4k; compiles 4.9, 9.1, 6.3 and 8.6 s. Another
pipeline is the adapter's ``backend`` argument, e.g.
``registry.make_jax_env("brax:hopper", backend="generalized")`` (no config field chooses it).

Brax is imported on first use (about 3.5 s), so resolving a ``brax:`` id never imports it;
its import-time notices (its maintenance warning, MJX's missing optional GPU kernels) are
kept off the console.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs.autoreset import AutoResetJaxEnv
from envs.kwargs import refused_call
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec

# Brax's envs (``brax.envs._envs``, brax 0.14), written out so that checking an id never
# imports Brax; ``tests/envs/test_brax_env.py`` compares the two. ("fast" is Brax's own test
# env, not listed.)
BRAX_IDS = ("ant", "halfcheetah", "hopper", "humanoid", "humanoidstandup",
            "inverted_double_pendulum", "inverted_pendulum", "pusher", "reacher", "swimmer",
            "walker2d")
DEFAULT_BACKEND = "spring"
EPISODE_LENGTH = 1000  # Brax's training default (its EpisodeWrapper's)


@contextlib.contextmanager
def quiet():
    """Brax's and MJX's notices at import and env construction (warnings, log records, MJX's
    prints about its optional GPU kernels), off the console (also MuJoCo Playground's:
    ``envs.playground``)."""
    loggers = [logging.getLogger(n) for n in ("", "absl", "jax", "mujoco", "brax")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with (warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()),
              contextlib.redirect_stderr(io.StringIO())):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _brax_numpy():
    """Brax's code broadcasts arrays of different rank, which
    ``jax_numpy_rank_promotion="raise"`` (our tests' setting, a user's choice) refuses: its
    calls run with it allowed."""
    return jax.numpy_rank_promotion("allow")


def _get_environment(name: str, **kwargs: Any):
    with quiet(), _brax_numpy():
        from brax import envs as brax_envs

        return brax_envs.get_environment(name, **kwargs)


def observation_size(env) -> int:
    """The length of a Brax env's observation vector, from a traced reset: Brax's own
    ``env.observation_size`` runs a reset eagerly, op by op, and its one-op compiles took
    about 3 s of a 5.5 s env build on a 2-core CPU (docs/design.md, "Compile time")."""
    with _brax_numpy():
        obs = jax.eval_shape(lambda: env.unwrapped.reset(jax.random.PRNGKey(0))).obs
    return int(obs.shape[-1])


def prefer_egl() -> None:
    """Asks MuJoCo for an EGL context (``MUJOCO_GL=egl``; read once, when MuJoCo loads, so
    call it before the first Brax env) where the user chose none and an EGL library is
    installed: it needs no display, and Mesa's software EGL draws on CPU. (With the variable
    naming a missing library, importing MuJoCo fails: hence the check.)"""
    import ctypes.util

    if "MUJOCO_GL" not in os.environ and ctypes.util.find_library("EGL"):
        os.environ["MUJOCO_GL"] = "egl"


def renderer_problem(model) -> str | None:
    """Why Brax's renderer (MuJoCo's, through ``brax.io.image``) cannot draw ``model`` on
    this host; None when it can. It needs an OpenGL context (``prefer_egl``)."""
    try:
        import mujoco

        mujoco.Renderer(model, height=8, width=8).close()
    except Exception as e:  # noqa: BLE001 - no EGL library, no context: bars instead
        return " ".join(f"{type(e).__name__}: {e}".split())[:200]
    return None


class BraxEnv(AutoResetJaxEnv):
    """One Brax env behind the JaxEnv protocol (pure, jittable; ``vmap`` for a batch).

    Args:
      name: a Brax env name (``BRAX_IDS``), e.g. ``"inverted_pendulum"``.
      episode_length: the time limit in steps (a truncation, not a termination).
      backend: Brax's physics pipeline (``"spring"``, ``"positional"``, ``"generalized"``,
        ``"mjx"``).
      **kwargs: the env's own constructor arguments (e.g. ``ctrl_cost_weight``).

    Attributes:
      spec: EnvSpec: float32 ``[observation_size]`` observations, ``action_size`` actions
        within the actuators' control range.
    """

    def __init__(self, name: str, episode_length: int = EPISODE_LENGTH,
                 backend: str = DEFAULT_BACKEND, **kwargs: Any):
        if name not in BRAX_IDS:
            raise ConfigError(f"env_id: Brax has no env {name!r}; its envs: "
                              f"{', '.join(BRAX_IDS)}")
        try:
            env = _get_environment(name, backend=backend, **kwargs)
        except TypeError as e:  # an argument the env does not take
            raise refused_call(f"brax:{name}", kwargs, e) from e
        ctrl = np.asarray(env.sys.actuator.ctrl_range, np.float32).reshape(-1, 2)
        low, high = ctrl[:, 0], ctrl[:, 1]
        self.env_id = f"brax:{name}"
        self.episode_length = int(episode_length)
        self._env = env
        self._bounds = (jnp.asarray(low), jnp.asarray(high))
        self.spec = EnvSpec(obs_shape=(observation_size(env),), obs_dtype="float32",
                            num_actions=int(env.action_size),
                            action_low=tuple(float(x) for x in low),
                            action_high=tuple(float(x) for x in high))

    def frame_state(self, state) -> tuple[jax.Array, jax.Array]:
        """``(q, qd)`` of one env's JaxEnvState: what ``render_frames`` draws (jittable)."""
        pipeline = state.inner[0].pipeline_state
        return pipeline.q, pipeline.qd

    def render_problem(self) -> str | None:
        """Why ``render_frames`` cannot draw on this host (None: it can)."""
        return renderer_problem(self._env.sys.mj_model)

    def render_frames(self, frame_states, size: tuple[int, int] = (240, 320)) -> list:
        """Brax's own pictures (``brax.io.image.render_array``, MuJoCo's renderer) of
        ``frame_states`` = ``(q [L, nq], qd [L, nv])``; uint8 ``[H, W, 3]`` each."""
        from types import SimpleNamespace

        from brax.io import image

        q, qd = (np.asarray(x) for x in frame_states)
        states = [SimpleNamespace(q=q[i], qd=qd[i]) for i in range(len(q))]
        with quiet():
            return [np.asarray(f, np.uint8) for f in image.render_array(
                self._env.sys, states, height=size[0], width=size[1])]

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        with _brax_numpy():
            state = self._env.reset(key)
        return jnp.asarray(state.obs, jnp.float32), (state, jnp.int32(0))

    def _step_inner(
        self, inner: Any, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        state, t = inner
        with _brax_numpy():
            state = self._env.step(state, jnp.clip(action, *self._bounds))
        t = t + 1
        terminated = state.done > 0.5
        truncated = (t >= self.episode_length) & ~terminated
        return jnp.asarray(state.obs, jnp.float32), (state, t), state.reward, terminated, truncated
