"""Population-based training's side of a config: the ``pbt`` sub-config read as a plan.

The population is the program's agents (``num_seeds`` x sweep variants, in
``runtime.config.sweep.agent_tags`` order). Each agent holds its own values of the
population's hyperparameters (``names``: the swept fields, then the explored fields not
swept), traced ``[A]`` values of one ``rlcore.hparams.HParams`` record as a sweep's are; the
train state carries them, so an exploit can change them and a checkpoint keeps them. The
fields' records (defaults, meanings, rules) are ``runtime.config.fields``'; the rules that
read more than one field are ``check``. See docs/design.md, "Population-based training".
"""

from __future__ import annotations

import math
from typing import Callable

import jax.numpy as jnp
import ml_collections
import numpy as np

from rlcore.errors import ConfigError
from rlcore.hparams import SCALARS, HParams
from rlcore.pbt import METHODS, RESAMPLE, Explore
from runtime.config.algo import sweepable_names
from runtime.config.fields import ALGO, PBT_FIELDS, SWEEPABLE, hparams_of
from runtime.config.sweep import ENV, agent_tags, num_agents, swept_hparams, with_values

STATISTICS = ("return", "eval")
FLOAT32_MAX = 3.4028234663852886e38  # the programs hold the values as float32


def enabled(config) -> bool:
    """Whether the run trains its agents as a population (``pbt.interval > 0``)."""
    pbt = config.get("pbt")
    return bool(pbt) and bool(pbt.get("interval"))


def names(config) -> tuple[str, ...]:
    """The hyperparameters each agent holds: the swept fields (``sweep`` order, ``algo.NAME``
    for an algorithm's own), then, with PBT on, the explored fields that are not swept."""
    fields = tuple(swept_hparams(config))
    explored = config.pbt.explore if enabled(config) else ()
    return fields + tuple(k for k in explored if k not in fields)


def bounds(config) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(low, high)`` per name: an explored field's ``pbt.low``/``pbt.high`` or its sweep's
    smallest and largest value; an unexplored one's, unbounded."""
    fields, pbt = swept_hparams(config), config.pbt
    low, high = [], []
    for k in names(config):
        if k not in pbt.explore:
            low.append(-math.inf)
            high.append(math.inf)
            continue
        i = pbt.explore.index(k)
        low.append(float(pbt.low[i]) if pbt.low else float(min(fields[k])))
        high.append(float(pbt.high[i]) if pbt.high else float(max(fields[k])))
    return tuple(low), tuple(high)


def explore_settings(config) -> Explore:
    """The step's static settings (``rlcore.pbt.Explore``) for the config's population."""
    fields = swept_hparams(config)
    low, high = bounds(config)
    return Explore(
        num_exploited=exploited(config.pbt.fraction, num_agents(config)),
        explored=tuple(k in config.pbt.explore for k in names(config)),
        method=config.pbt.method, factors=tuple(float(f) for f in config.pbt.factors),
        low=low, high=high,
        choices=tuple(tuple(float(v) for v in fields.get(k, (0.0,))) for k in names(config)))


def exploited(fraction: float, agents: int) -> int:
    """Agents that copy per step: ``floor(fraction * agents)``."""
    return int(math.floor(fraction * agents + 1e-9))


def initial_values(config) -> np.ndarray:
    """Each agent's starting values ``float32 [A, H]``: its variant's, or the config's."""
    def value(tags, k):
        if k in tags:
            return tags[k]
        return config.algo[k[len(ALGO):]] if k.startswith(ALGO) else config[k]

    return np.asarray([[value(t, k) for k in names(config)] for t in agent_tags(config)],
                      np.float32).reshape(num_agents(config), len(names(config)))


def agent_record(config, values) -> HParams:
    """The agents' values ``[A, H]`` (traced) as one record: ``[A]`` per name, None for the
    other scalars (the program's constants), as ``runtime.config.sweep.agent_hparams``."""
    columns = {k: values[:, i] for i, k in enumerate(names(config))}
    own = {k[len(ALGO):]: v for k, v in columns.items() if k.startswith(ALGO)}
    return hparams_of(config).replace(algo=own, **{k: columns.get(k) for k in SCALARS})


def values_of(config, values) -> list[dict[str, float]]:
    """Each agent's ``{name: value}`` of ``values [A, H]`` (on the host)."""
    return [{k: float(v) for k, v in zip(names(config), row)} for row in np.asarray(values)]


def zeros(config) -> jnp.ndarray:
    """``float32 [A]`` zeros (the statistic's accumulators before a window)."""
    return jnp.zeros((num_agents(config),), jnp.float32)


# ----------------------------------------------------------------------------- validation


def _require(cond, field: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{field}: {msg}")


def check_structure(config) -> None:
    """The ``pbt`` sub-config holds every pbt field."""
    pbt = config.get("pbt")
    _require(isinstance(pbt, ml_collections.ConfigDict), "pbt",
             f"must be a sub-config of the pbt fields, got {pbt!r}")
    for field in PBT_FIELDS:
        _require(field in pbt, f"pbt.{field}", "is missing")


def check(config, agents: int, check_value: Callable[[object, str], None],
          num_updates: int) -> None:
    """The pbt fields' rules (each checked whether or not PBT is on), then, where it is
    on, the rules that read the population: ``agents`` (the mode's agents per program),
    ``num_updates`` (the run's, ``runtime.config.validation.derive``); ``check_value(config,
    name)`` is validation's check of a field by its rule."""
    pbt = config.pbt
    _check_numbers(pbt)
    _require(pbt.statistic in STATISTICS, "pbt.statistic",
             f"must be one of {', '.join(STATISTICS)}, got {pbt.statistic!r}")
    _require(pbt.method in METHODS, "pbt.method",
             f"must be one of {', '.join(METHODS)}, got {pbt.method!r}")
    _check_explore(config)
    for side in ("low", "high"):
        given = pbt[side]
        _require(isinstance(given, (tuple, list)) and all(_is_finite(v) for v in given),
                 f"pbt.{side}", f"must be a tuple of numbers, got {given!r}")
    if not pbt.interval:
        return
    n = exploited(pbt.fraction, agents)
    _require(agents >= 2 and n >= 1, "pbt.fraction",
             f"{pbt.fraction} of {agents} agent{'s' * (agents != 1)} copies none; "
             "population-based training needs agents (num_seeds x sweep variants, Anakin) "
             "of which at least one copies")
    _require(pbt.interval <= num_updates, "pbt.interval",
             f"{pbt.interval} is longer than the run ({num_updates} update"
             f"{'s' * (num_updates != 1)}), so no agent would ever copy: at most "
             f"{num_updates}, or a larger total_env_steps")
    if pbt.statistic == "eval":
        _require(config.eval_every and pbt.interval % config.eval_every == 0,
                 "pbt.statistic", f"eval needs an evaluation at every exploit: eval_every "
                 f"(now {config.eval_every}) > 0 dividing pbt.interval ({pbt.interval})")
    _check_bounds(config, check_value)


def _check_numbers(pbt) -> None:
    """``fraction`` in (0, 0.5]; ``factors`` a non-empty tuple of finite numbers > 0."""
    f = pbt.fraction
    _require(_is_number(f) and 0 < f <= 0.5, "pbt.fraction",
             f"must be a number in (0, 0.5] (the bottom copies the top), got {f!r}")
    factors = pbt.factors
    _require(isinstance(factors, (tuple, list)) and len(factors) > 0
             and all(_is_finite(x) and x > 0 for x in factors),
             "pbt.factors", f"must be a non-empty tuple of numbers > 0, got {factors!r}")


def _check_explore(config) -> None:
    """``explore``: a non-empty tuple of distinct sweepable fields, an algorithm's own float
    hyperparameters (``algo.NAME``) included, as a sweep takes them."""
    explore = config.pbt.explore
    _require(isinstance(explore, (tuple, list)) and len(explore) > 0
             and all(isinstance(k, str) for k in explore), "pbt.explore",
             f"must be a non-empty tuple of sweepable fields, got {explore!r}")
    takes = SWEEPABLE + sweepable_names(config)
    for k in explore:
        _require(not k.startswith(ENV), "pbt.explore",
                 f"{k!r} is an argument of the agent's env, which keeps its envs through an "
                 "exploit; sweep it (sweep.env_kwargs) and explore hyperparameters")
        _require(k in takes, "pbt.explore",
                 f"{k!r} is not a sweepable field; sweepable fields: {', '.join(takes)}")
    _require(len(set(explore)) == len(explore), "pbt.explore",
             f"names a field twice: {explore!r}")


def _check_bounds(config, check_value) -> None:
    """Per explored field: a range to stay in (given, or its sweep's), each bound a value
    the field takes, low <= high; resample needs each explored field swept."""
    pbt, fields = config.pbt, swept_hparams(config)
    for side in ("low", "high"):
        given = pbt[side]
        _require(len(given) in (0, len(pbt.explore)), f"pbt.{side}",
                 f"must be empty or one number per pbt.explore field "
                 f"({len(pbt.explore)}), got {given!r}")
    for k in pbt.explore:
        _require(k in fields or (pbt.low and pbt.high), "pbt.low",
                 f"{k} is not swept, so it has no sweep range to stay in: sweep it or give "
                 "pbt.low and pbt.high")
        _require(pbt.method != RESAMPLE or len(fields.get(k, ())) >= 2, "pbt.method",
                 f"resample draws from the sweep's values; {k} has fewer than 2")
    low, high = bounds(config)
    for k, lo, hi in zip(names(config), low, high):
        if k not in pbt.explore:
            continue
        # An own float takes any finite number (as a sweep's values); a field, its rule's.
        for side, v in (() if k.startswith(ALGO) else (("low", lo), ("high", hi))):
            try:
                check_value(with_values(config, {k: v}), k)
            except ConfigError as e:
                raise ConfigError(f"pbt.{side}: {e}") from None
        _require(lo <= hi, "pbt.low", f"{k}: {lo} is above the high bound {hi}")
    if "max_grad_norm" in pbt.explore:
        _require(bounds(config)[0][names(config).index("max_grad_norm")] > 0
                 and (config.max_grad_norm > 0 or "max_grad_norm" in fields), "pbt.low",
                 "max_grad_norm must stay > 0 (0, no clipping, changes the optimizer)")
    _require(not ("gamma" in pbt.explore and config.normalize_reward), "pbt.explore",
             "gamma cannot change per agent with normalize_reward (one running return per "
             "env uses one gamma)")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value) -> bool:
    """A number float32 holds (inf, NaN and huge ints refused, without overflowing)."""
    return _is_number(value) and (math.isfinite(value) if isinstance(value, float) else True) \
        and abs(value) <= FLOAT32_MAX
