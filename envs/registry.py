"""Env ids to env adapters, for both architectures.

Libraries: ``gymnax`` (every discrete-action id of ``gymnax.registered_envs``:
``CartPole-v1``, ``Breakout-MinAtar``, ``Catch-bsuite``, ...), ``own`` (our jittable envs,
``OWN_ENVS``: ``Catch``) and ``envpool`` (EnvPool's Atari ``-v5`` ids and ``CartPole-v1``,
``Acrobot-v1``) and ``brax`` (Brax's envs, ``envs.brax.BRAX_IDS``: ``inverted_pendulum``,
``hopper``, ...; prefixed ids only). gymnax, own and Brax envs are jittable; EnvPool envs run
on host threads. The suites of ``SUITES`` (``craftax``: ``Craftax-Classic-Symbolic-v1``,
``Craftax-Symbolic-v1``; ``xminigrid``: XLand-MiniGrid's MiniGrid tasks,
``MiniGrid-DoorKey-5x5``, ``MiniGrid-MemoryS8``, ...; ``jumanji``: its envs with one
discrete action, ``Snake-v1``, ``Game2048-v1``, ...; ``playground``: MuJoCo Playground's DM
Control Suite tasks, ``CartpoleBalance``, ...; prefixed ids only) are jittable too, and
each installs as the optional extra of its name, as Brax does (``brax``): an id of a suite
or of Brax that is not installed is refused with one line naming the extra
(``check_extra``).

An ``env_id`` is ``library:name`` or a bare name. ``resolve(env_id, mode)`` is the one rule:

- ``gymnax:NAME``, ``own:NAME``, ``brax:NAME``, ``envpool:NAME``, ``craftax:NAME``, ...:
  that library's env ``NAME``. Anakin refuses ``envpool:`` (it runs jittable envs only);
  Sebulba runs them all (a Brax or suite env on a host CPU device, as a gymnax one).
- A bare id resolves to the mode's native library. Own envs also have the bare id
  ``NAME-own`` (``Catch-own`` is ``own:Catch``).
  - Anakin: own, else gymnax. A bare EnvPool-only id (``Breakout-v5``) is refused.
  - Sebulba: EnvPool where EnvPool has the id (bare ``CartPole-v1`` is EnvPool's
    CartPole), else own or gymnax (``Breakout-MinAtar``, ``Catch-own``), served on a host
    CPU device through ``envs.jax_host.JaxHostEnv``. Where EnvPool is not installed every
    bare id resolves as in Anakin.
- ``PACKAGE.MODULE:NAME`` (a prefix that is no library's): an env of the user's own package,
  imported and checked when the id is checked (``envs.imported``); jittable, so it runs in
  both modes (in Sebulba on a host CPU device, as a gymnax env).

An id that resolves nowhere raises ``rlcore.errors.ConfigError`` listing close matches over
every spelling the mode accepts, bare and prefixed. The env libraries are imported on first
use, so resolving a jittable id never imports EnvPool and vice versa.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any, NamedTuple

from envs.base import HostEnv, JaxEnv
from envs.kwargs import check_signature
from rlcore.errors import ConfigError
from rlcore.imports import colon_hint, is_import_path, load_object
from rlcore.types import EnvSpec

ANAKIN, SEBULBA = "anakin", "sebulba"
GYMNAX, OWN, BRAX, ENVPOOL = "gymnax", "own", "brax", "envpool"
IMPORTED = "import"  # an env of the user's own package: ``PACKAGE.MODULE:NAME``
CRAFTAX, XMINIGRID, JUMANJI, PLAYGROUND = "craftax", "xminigrid", "jumanji", "playground"
# The suites that install as an optional extra of the same name (``pip install -e
# '.[craftax]'``): library -> (the module that is there once it is installed, the adapter
# module, its JaxEnv class, its tuple of env names). Prefixed ids only.
SUITES = {CRAFTAX: ("craftax", "envs.craftax", "CraftaxEnv", "CRAFTAX_IDS"),
          XMINIGRID: ("xminigrid", "envs.xminigrid", "XMiniGridEnv", "XMINIGRID_IDS"),
          JUMANJI: ("jumanji", "envs.jumanji", "JumanjiEnv", "JUMANJI_IDS"),
          PLAYGROUND: ("mujoco_playground", "envs.playground", "PlaygroundEnv",
                       "PLAYGROUND_IDS")}
LIBRARIES = (GYMNAX, OWN, BRAX, ENVPOOL, *SUITES)
JITTABLE = (GYMNAX, OWN, BRAX, *SUITES, IMPORTED)
OWN_SUFFIX = "-own"  # bare id of own env NAME: NAME-own
# The time-limit argument of each env library (the evaluate commands' ``--max_episode_steps``).
TIME_LIMIT_FIELD = {GYMNAX: "max_steps_in_episode", OWN: "max_steps",
                    BRAX: "episode_length", ENVPOOL: "max_episode_steps",
                    CRAFTAX: "max_timesteps", XMINIGRID: "max_steps", JUMANJI: "time_limit",
                    PLAYGROUND: "episode_length", IMPORTED: "max_steps_in_episode"}
# The libraries whose host envs render RGB frames themselves, and the option that asks them to.
RENDER_OVERRIDES = {ENVPOOL: {"render_mode": "rgb_array"}}


# Our own jittable envs: name -> the import path of its class or factory (imported on first
# use; called with the overrides its signature takes); ids ``own:NAME`` and ``NAME-own``.
OWN_ENVS: dict[str, str] = {"Catch": "envs.catch:CatchEnv", "Recall": "envs.recall:RecallEnv",
                            "MaskedCartPole": "envs.masked:masked_cartpole"}


class Resolved(NamedTuple):
    """Where an env id leads: ``library`` (``gymnax``, ``own`` or ``envpool``) and the env's
    ``name`` in that library (own envs without the ``-own`` suffix)."""

    library: str
    name: str


@functools.cache
def library_ids(library: str) -> tuple[str, ...]:
    """The names ``library`` has (EnvPool's: empty where EnvPool is not installed)."""
    if library == GYMNAX:
        from envs.gymnax_ids import jax_gymnax_ids

        return tuple(jax_gymnax_ids())
    if library == OWN:
        return tuple(OWN_ENVS)
    if library == IMPORTED:  # any import path: none to list
        return ()
    if library == BRAX:
        from envs.brax import BRAX_IDS

        return BRAX_IDS
    if library in SUITES:
        _, module, _, ids = SUITES[library]
        return tuple(getattr(importlib.import_module(module), ids))
    try:
        from envs import envpool as envpool_adapter
    except ImportError:
        return ()
    return tuple(envpool_adapter.host_env_ids())


def jax_env_ids() -> tuple[str, ...]:
    """Bare ids of the jittable envs: gymnax ids, then own ones (``Catch-own``)."""
    return (*library_ids(GYMNAX), *(n + OWN_SUFFIX for n in library_ids(OWN)))


def host_env_ids() -> tuple[str, ...]:
    """EnvPool's ids (empty where EnvPool is not installed)."""
    return library_ids(ENVPOOL)


def split_prefix(env_id: str) -> tuple[str | None, str]:
    """``"gymnax:CartPole-v1" -> ("gymnax", "CartPole-v1")``; a bare id has prefix None."""
    prefix, sep, name = env_id.partition(":")
    return (prefix, name) if sep else (None, env_id)


def _bare(env_id: str, mode: str) -> Resolved | None:
    """Where a bare id leads in ``mode``, refused or not (None: no library has it).

    Sebulba looks in EnvPool first; Anakin looks in EnvPool last (and ``resolve`` refuses it).
    """
    if mode == SEBULBA and env_id in library_ids(ENVPOOL):
        return Resolved(ENVPOOL, env_id)
    if env_id.endswith(OWN_SUFFIX) and env_id[: -len(OWN_SUFFIX)] in library_ids(OWN):
        return Resolved(OWN, env_id[: -len(OWN_SUFFIX)])
    if env_id in library_ids(GYMNAX):
        return Resolved(GYMNAX, env_id)
    if env_id in library_ids(ENVPOOL):
        return Resolved(ENVPOOL, env_id)
    return None


def _parse(env_id: str, mode: str) -> Resolved | None:
    """Where ``env_id`` leads in ``mode``, refused or not (None: unknown). A prefix that is
    no library's and an id of the form ``PACKAGE.MODULE:NAME`` is an import path."""
    prefix, name = split_prefix(env_id)
    if prefix is None:
        return _bare(env_id, mode)
    if prefix in LIBRARIES:
        return Resolved(prefix, name) if name in library_ids(prefix) else None
    return Resolved(IMPORTED, env_id) if is_import_path(env_id) else None


def resolve(env_id: str, mode: str) -> Resolved:
    """The library and name ``env_id`` resolves to in ``mode`` (the module docstring's rule).

    Args:
      env_id: ``library:name`` or a bare id.
      mode: ``"anakin"`` or ``"sebulba"``.

    Returns:
      ``Resolved(library, name)``, e.g. ``("envpool", "CartPole-v1")`` for bare
      ``CartPole-v1`` in Sebulba, ``("gymnax", "CartPole-v1")`` in Anakin.

    Raises:
      ConfigError: ``env_id`` is unknown, is a gymnax box env not run here, or names an EnvPool env
        in Anakin; the message lists close matches.
    """
    if mode not in (ANAKIN, SEBULBA):
        raise ValueError(f"mode: must be {ANAKIN!r} or {SEBULBA!r}, got {mode!r}")
    resolved = _parse(env_id, mode)
    if resolved is None:
        raise _unknown(env_id, mode)
    check_extra(env_id, resolved.library)
    if mode == ANAKIN and resolved.library == ENVPOOL:
        matches = ", ".join(_close(env_id, accepted_ids(ANAKIN))) or "none"
        raise ConfigError(f"env_id: '{env_id}' is not a jittable (Anakin) env: it is "
                          f"EnvPool's (Sebulba); close matches: {matches}")
    return resolved


# Libraries besides the suites that install as an optional extra of their own name: library
# -> the module that is there once it is installed.
OTHER_EXTRAS = {BRAX: "brax"}


def missing_extra(library: str) -> str | None:
    """The optional extra that ``library`` needs and this install lacks (None: installed, or
    in the core install)."""
    module = SUITES[library][0] if library in SUITES else OTHER_EXTRAS.get(library)
    if module is None:
        return None
    return None if importlib.util.find_spec(module) else library


def check_extra(env_id: str, library: str) -> None:
    """Raises ``ConfigError`` (one line naming the extra to install) where ``env_id``'s suite
    is not installed; checked when the id resolves, so before anything compiles."""
    extra = missing_extra(library)
    if extra is not None:
        raise ConfigError(f"env_id: '{env_id}' needs the '{extra}' extra, which is not "
                          f"installed: pip install -e '.[{extra}]'")


def _unknown(env_id: str, mode: str) -> ConfigError:
    """ConfigError for an id that leads nowhere in ``mode``, with close matches."""
    from envs.gymnax_ids import CONTINUOUS_GYMNAX_IDS

    prefix, name = split_prefix(env_id)
    if prefix in (None, GYMNAX) and name in CONTINUOUS_GYMNAX_IDS:
        return ConfigError(f"env_id: '{env_id}' is a continuous gymnax env not supported; "
                           f"continuous gymnax ids: Pendulum-v1, MountainCarContinuous-v0")
    if colon_hint(env_id):
        return ConfigError(f"env_id: unknown env '{env_id}'{colon_hint(env_id)}")
    matches = ", ".join(_close(env_id, accepted_ids(mode))) or "none"
    return ConfigError(f"env_id: unknown env '{env_id}'; close matches: {matches}")


@functools.cache
def accepted_ids(mode: str) -> tuple[str, ...]:
    """Every spelling ``mode`` runs: bare ids, then ``library:name`` ones."""
    libraries = JITTABLE if mode == ANAKIN else LIBRARIES
    bare = (*library_ids(ENVPOOL), *jax_env_ids()) if mode == SEBULBA else jax_env_ids()
    prefixed = (f"{lib}:{n}" for lib in libraries for n in library_ids(lib))
    return tuple(dict.fromkeys((*bare, *prefixed)))


def _close(env_id: str, ids: tuple[str, ...]) -> list[str]:
    return difflib.get_close_matches(env_id, list(ids), n=5, cutoff=0.6)


EXAMPLE_ID = "CartPole-v1"  # the id an error message shows as an example


def _check_is_id(env_id) -> None:
    """Raises ``ConfigError("env_id: must be a string ...")`` for a value that is no id."""
    if isinstance(env_id, str):
        return
    if isinstance(env_id, int) and not isinstance(env_id, bool) and env_id.bit_length() > 64:
        text = f"{'-' if env_id < 0 else ''}an integer of {env_id.bit_length()} bits"
    else:
        text = repr(env_id)
        text = text if len(text) <= 80 else text[:77] + "..."
    raise ConfigError(f"env_id: must be a string such as {EXAMPLE_ID}, got {text}")


def check_jax_env_id(env_id: str, **env_kwargs: Any) -> None:
    """Raises ConfigError (with close matches) unless Anakin runs ``env_id`` with
    ``env_kwargs``; an import path is imported and its env checked (``envs.imported``)."""
    _check_is_id(env_id)
    _check_built(*resolve(env_id, ANAKIN), env_kwargs)


def check_host_env_id(env_id: str, **env_kwargs: Any) -> None:
    """Raises ConfigError (with close matches) unless Sebulba runs ``env_id`` with
    ``env_kwargs``; an import path is imported and its env checked."""
    _check_is_id(env_id)
    _check_built(*resolve(env_id, SEBULBA), env_kwargs)


def _check_built(library: str, name: str, env_kwargs: dict[str, Any]) -> None:
    """Builds the env of an import path, or of any library given ``env_kwargs`` (their
    names checked first, ``envs.kwargs``); EnvPool's take its options by name
    (``envs.envpool.check_options``: those Sebulba sets itself refused)."""
    if library == ENVPOOL and env_kwargs:
        from envs.envpool import check_options

        check_options(name, env_kwargs)
        return
    if library == IMPORTED or (env_kwargs and library in JITTABLE):
        _make_jittable(library, name, **env_kwargs)


def jax_env_spec(env_id: str, **env_kwargs: Any) -> EnvSpec:
    """The EnvSpec of ``env_id`` (built with ``env_kwargs``) in Anakin; compiles nothing."""
    return make_jax_env(env_id, **env_kwargs).spec


def host_env_spec(env_id: str, **env_kwargs: Any) -> EnvSpec:
    """The EnvSpec of ``env_id`` (built with ``env_kwargs``) in Sebulba (EnvPool: from a
    1-env probe)."""
    library, name = resolve(env_id, SEBULBA)
    if library in JITTABLE:
        return _make_jittable(library, name, **env_kwargs).spec
    env = make_host_env(env_id, 1, seed=0, **env_kwargs)
    try:
        return env.spec
    finally:
        env.close()


def env_spec(env_id: str, architecture: str, **env_kwargs: Any) -> EnvSpec:
    """The EnvSpec of ``env_id`` in ``architecture`` (``ANAKIN``: ``jax_env_spec``;
    ``SEBULBA``: ``host_env_spec``): the spec a run of it built its network for."""
    spec = jax_env_spec if architecture == ANAKIN else host_env_spec
    return spec(env_id, **env_kwargs)


def _make_jittable(library: str, name: str, **overrides: Any) -> JaxEnv:
    """The jittable env ``name`` of ``library`` (``gymnax``, ``own`` or ``brax``)."""
    if library == OWN:
        builder = load_object(OWN_ENVS[name], "env_id")
        check_signature(f"own:{name}", builder, overrides)
        return builder(**overrides)
    if library == IMPORTED:
        from envs.imported import make_imported_env

        return make_imported_env(name, **overrides)
    if library == BRAX:
        from envs.brax import BraxEnv

        return BraxEnv(name, **overrides)
    if library in SUITES:
        _, module, cls, _ = SUITES[library]
        return getattr(importlib.import_module(module), cls)(name, **overrides)
    from envs.gymnax import GymnaxEnv

    return GymnaxEnv(name, **overrides)


def make_jax_env(env_id: str, **overrides: Any) -> JaxEnv:
    """Makes a jittable single env (``vmap`` it for a batch), resolved as in Anakin.

    Args:
      env_id: e.g. ``"CartPole-v1"``, ``"gymnax:CartPole-v1"``, ``"own:Catch"``,
        ``"Catch-own"``.
      **overrides: gymnax ``EnvParams`` fields (e.g. ``max_steps_in_episode``), or the own
        env's constructor arguments (e.g. ``max_steps`` for ``Catch-own``).

    Returns:
      A JaxEnv.

    Raises:
      ConfigError: Anakin does not run ``env_id`` (see ``resolve``).
    """
    return _make_jittable(*resolve(env_id, ANAKIN), **overrides)


def make_host_env(
    env_id: str,
    num_envs: int,
    *,
    seed: int,
    first_env_index: int = 0,
    num_threads: int = 0,
    key_root: Any = None,
    **overrides: Any,
) -> HostEnv:
    """Makes a synchronous batch of host envs, resolved as in Sebulba.

    Env ``i`` is seeded from its global index ``first_env_index + i``: EnvPool seed
    ``seed + first_env_index + i``; a jittable env by the key rule of ``envs.jax_host``,
    from ``key_root``.

    Args:
      env_id: e.g. ``"CartPole-v1"`` (EnvPool), ``"Breakout-MinAtar"``,
        ``"gymnax:CartPole-v1"``, ``"Catch-own"``.
      num_envs: envs in this pool.
      seed: the pool's integer seed (EnvPool).
      first_env_index: global index of this pool's env 0.
      num_threads: EnvPool worker threads (0: EnvPool's default); ignored by jittable envs.
      key_root: ``[]`` PRNG key a jittable env's keys derive from (``envs.jax_host``; the
        caller derives it from ``seed``, e.g. ``rlcore.seeding.host_env_root(seed)``);
        required for jittable envs, ignored by EnvPool.
      **overrides: EnvPool options (replace the Atari defaults), or ``make_jax_env``'s
        overrides for a jittable env.

    Returns:
      A HostEnv: ``envs.envpool.EnvPoolEnv`` or ``envs.jax_host.JaxHostEnv``.

    Raises:
      ConfigError: Sebulba does not run ``env_id`` (see ``resolve``).
    """
    library, name = resolve(env_id, SEBULBA)
    if library in JITTABLE:
        from envs.jax_host import JaxHostEnv

        if key_root is None:
            raise ValueError(f"make_host_env: {env_id} is served from a jittable env; pass "
                             "key_root (e.g. rlcore.seeding.host_env_root(seed))")
        return JaxHostEnv(_make_jittable(library, name, **overrides), num_envs, root=key_root,
                          first_env_index=first_env_index)
    from envs.envpool import EnvPoolEnv

    return EnvPoolEnv(name, num_envs, seed=seed, first_env_index=first_env_index,
                      num_threads=num_threads, **overrides)


# What an episode's return can be, where the env bounds it: (lowest, highest), None for no
# bound. CartPole pays 1 a step for at most 500 steps; Acrobot -1 a step for at most 500;
# MinAtar games and Catch as their rewards allow. Other envs are unbounded here.
RETURN_RANGES: dict[str, tuple[float | None, float | None]] = {
    "CartPole-v1": (0.0, 500.0),
    "Acrobot-v1": (-500.0, 0.0),
    "Catch": (-1.0, 1.0),
    "Catch-bsuite": (-1.0, 1.0),
    "Recall": (-1.0, 1.0),
    "MaskedCartPole": (0.0, 500.0),
    "Pendulum-v1": (None, 0.0),  # 200 steps of a reward in [-16.3, 0]
    "inverted_pendulum": (0.0, 1000.0),  # Brax: 1 a step, 1000 steps
    "Breakout-MinAtar": (0.0, None),
    "Asterix-MinAtar": (0.0, None),
    "Freeway-MinAtar": (0.0, None),
    "SpaceInvaders-MinAtar": (0.0, None),
}


def return_range(env_id: str) -> tuple[float | None, float | None]:
    """``(lowest, highest)`` episode return of ``env_id`` (any spelling; bare ids resolve as
    in Anakin), None where unbounded or unknown; for plots whose intervals must stay inside
    what a return can be."""
    _, name = split_prefix(env_id)
    name = name[:-len(OWN_SUFFIX)] if name.endswith(OWN_SUFFIX) else name
    return RETURN_RANGES.get(name, (None, None))


def return_axis_label(env_id: str) -> str:
    """The y-axis label of a plot of ``env_id``'s returns: Atari's (EnvPool ``-v5`` ids) are
    unclipped game scores, every other env's a sum of rewards."""
    prefix, name = split_prefix(env_id)
    if prefix in (None, ENVPOOL) and name.endswith("-v5"):
        return "mean episode return (game score, unclipped)"
    return "mean episode return (sum of rewards)"


def time_limit_overrides(library: str, max_episode_steps: int) -> dict[str, int]:
    """The env constructor's time-limit argument for ``library`` (``{}`` when 0).

    Args:
      library: ``gymnax``, ``own``, ``brax`` or ``envpool`` (``resolve(env_id,
        mode).library``).
      max_episode_steps: the limit; 0 keeps the env's own.

    Returns:
      Overrides for ``make_jax_env`` / ``make_host_env``.
    """
    if not max_episode_steps:
        return {}
    return {TIME_LIMIT_FIELD[library]: int(max_episode_steps)}


def render_overrides(env_id: str, mode: str) -> dict[str, Any]:
    """The ``make_host_env`` options that make the env of ``env_id`` render RGB frames
    itself (EnvPool: ``render_mode="rgb_array"``); ``{}`` for envs that do not render (their
    frames are drawn from the observations, ``obs_frame_fn``). EnvPool's MuJoCo envs are
    not asked to render: that needs an OpenGL context, and without one (this project's CPU
    host) EnvPool aborts the process; their videos show the observation as bars."""
    library, name = resolve(env_id, mode)
    if library == ENVPOOL:
        from envs import envpool as envpool_adapter

        if name in envpool_adapter.MUJOCO_IDS:
            return {}
    return dict(RENDER_OVERRIDES.get(library, {}))


def obs_frame_fn(env_id: str, mode: str, env) -> Callable:
    """How one observation of ``env`` (made for ``env_id`` in ``mode``) becomes an RGB frame:
    the env's own ``obs_frame`` where it has one (Craftax), else ``envs.render.obs_frame_fn``
    with the env's spec, its name (CartPole gets its drawing) and, for a board env (``rows``
    and ``cols`` attributes, e.g. Catch), its grid.

    Returns:
      ``obs [*obs_shape] -> uint8 [H, W, 3]``.
    """
    from envs.render import obs_frame_fn as frame_fn

    if hasattr(env, "obs_frame"):  # the env draws its observations itself (Craftax's map)
        return env.obs_frame
    name = resolve(env_id, mode).name
    grid = (env.rows, env.cols) if hasattr(env, "rows") and hasattr(env, "cols") else None
    return frame_fn(env.spec.obs_shape, env.spec.obs_dtype, name, grid)
