"""Hyperparameter sweeps: variants of a run that train side by side in one program.

``config.sweep`` holds, for every scalar number field of the config, a tuple of values
(empty: not swept). The variants are the cross product of the non-empty tuples, in field
order; with ``num_seeds`` each variant trains ``num_seeds`` agents, seeds ``seed`` ..
``seed + num_seeds - 1`` (every variant sees the same seeds: common random numbers for
comparisons). Agent ``v * num_seeds + s`` is variant ``v`` with seed ``seed + s``.

Only fields that enter the compiled program as numbers can vary between agents of one
program (``SWEEPABLE``); a field that sets an array shape or the run's length (``num_envs``,
``num_steps``, ``num_minibatches``, ...) cannot and is refused by validation. Inside the
program an agent reads its values through ``AgentConfig``, a view of the config whose swept
fields are that agent's (traced) values.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

import jax.numpy as jnp
import ml_collections

# Loss and optimizer scalars: used only in arithmetic, so they may be traced values.
SWEEPABLE = ("learning_rate", "max_grad_norm", "adam_eps", "rmsprop_decay", "rmsprop_eps",
             "gamma", "gae_lambda", "clip_eps", "vf_coef", "ent_coef", "vtrace_lambda",
             "clip_rho", "clip_pg_rho")


def sweep_fields(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The ``sweep`` sub-config of ``config``: an empty tuple per scalar number field."""
    return ml_collections.ConfigDict({
        k: () for k, v in config.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)})


def swept(config) -> dict[str, tuple]:
    """``{field: values}`` of the swept fields, in field order (empty without a sweep)."""
    sweep = config.get("sweep")
    if not sweep:
        return {}
    return {k: tuple(v) for k, v in sweep.items() if v is not None and len(v) > 0}


def variants(config) -> list[dict[str, Any]]:
    """Every combination of the swept values, ``[{field: value}]``; ``[{}]`` without one."""
    fields = swept(config)
    return [dict(zip(fields, values)) for values in itertools.product(*fields.values())]


def agent_tags(config) -> list[dict[str, Any]]:
    """What tells each agent apart in the metrics: its swept values and its seed."""
    return [{**variant, "seed": config.seed + s}
            for variant in variants(config) for s in range(config.num_seeds)]


def num_agents(config) -> int:
    """Agents in one program: variants x seeds."""
    return len(variants(config)) * config.num_seeds


def agent_values(config) -> dict[str, jnp.ndarray]:
    """The swept values of every agent, ``{field: float32 [num_agents]}`` (agent order as
    in ``agent_tags``)."""
    tags = agent_tags(config)
    return {k: jnp.asarray([t[k] for t in tags], jnp.float32) for k in swept(config)}


def with_values(config, values: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """A copy of ``config`` with ``values`` set and no sweep (one variant as a plain run)."""
    out = ml_collections.ConfigDict(config.to_dict())
    for k, v in values.items():
        out[k] = type(config[k])(v)
    out.sweep = sweep_fields(out)
    return out


class AgentConfig:
    """A read-only view of ``config`` in which ``values`` (e.g. one agent's traced swept
    values) replace the fields of the same name. Supports ``c.field`` and ``c["field"]``."""

    def __init__(self, config, values: Mapping[str, Any]):
        self._config = config
        self._values = dict(values)

    def __getitem__(self, key):
        return self._values[key] if key in self._values else self._config[key]

    def __getattr__(self, key):
        if key.startswith("_"):
            raise AttributeError(key)
        return self[key]
