"""Hyperparameter sweeps: variants of a run that train side by side in one program.

``config.sweep`` holds, for every scalar number field of the config, a tuple of values
(empty: not swept), in ``sweep.algo`` one for each float hyperparameter of the
algorithm's own (``runtime.config.algo``; a variant names it ``algo.NAME``), and in
``sweep.env_kwargs`` one for each numeric argument of the env's own (a variant names it
``env_kwargs.NAME``; the env is built per agent with its value traced, see
``runtime.config.env_args``). The variants
are the cross product of the non-empty tuples, in field order; with ``num_seeds`` each
variant trains ``num_seeds`` agents, seeds ``seed`` .. ``seed + num_seeds - 1`` (every
variant sees the same seeds: common random numbers for comparisons). Agent ``v * num_seeds +
s`` is variant ``v`` with seed ``seed + s``.

Only fields that enter the compiled program as numbers can vary between agents of one
program (``SWEEPABLE``, the sweepable rows of ``runtime.config.fields``); a field that sets
an array shape or the run's length (``num_envs``, ``num_steps``, ``num_minibatches``, ...)
cannot and is refused by validation. The program takes the agents' swept values as one
``rlcore.hparams.HParams`` of ``[A]`` arrays (``agent_hparams``), which the agent axis
vmaps; inside, an agent's record is the run's record with its traced values over it
(``HParams.override``), the other scalars staying Python numbers. The env's swept arguments
are not hyperparameters (``swept_hparams`` leaves them out): each agent's values are the
``[A]`` arrays of ``agent_env_values``, constants of the program.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Mapping

import jax.numpy as jnp
import ml_collections

from rlcore.hparams import SCALARS, HParams
from runtime.config.env_args import env_kwargs_of
from runtime.config.fields import ALGO, default_config, hparams_of

ENV = "env_kwargs."  # a swept env argument's name among the swept fields


def base_config(env_id: str) -> ml_collections.ConfigDict:
    """Every field at its default (``runtime.config.fields.default_config``) with
    ``env_id`` and the ``sweep`` sub-config (``sweep_fields``): what ``configs/base.py``
    gives, and the fields an older run's ``config.json`` lacks are read from
    (docs/design.md, "Runs outlive upgrades")."""
    c = default_config(env_id=env_id)
    c.sweep = sweep_fields(c)  # Anakin: values per number field, one agent each (x seeds)
    return c


def sweep_fields(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The ``sweep`` sub-config of ``config``: an empty tuple per scalar number field."""
    return ml_collections.ConfigDict({k: () for k, v in config.items() if is_number(v)})


def is_number(value: Any) -> bool:
    """Whether a field of this value is a number field (one key of ``sweep``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def swept(config) -> dict[str, tuple]:
    """``{field: values}`` of the swept fields, in field order, then the algorithm's own
    swept hyperparameters as ``algo.NAME`` (``sweep.algo``), then the env's own arguments as
    ``env_kwargs.NAME`` (``sweep.env_kwargs``); empty without a sweep."""
    sweep = config.get("sweep")
    if not sweep:
        return {}
    fields = {k: v for k, v in sweep.items() if k not in ("algo", "env_kwargs")}
    fields.update({ALGO + k: v for k, v in (sweep.get("algo") or {}).items()})
    fields.update({ENV + k: v for k, v in (sweep.get("env_kwargs") or {}).items()})
    return {k: tuple(v) for k, v in fields.items() if v is not None and len(v) > 0}


def swept_hparams(config) -> dict[str, tuple]:
    """``swept`` without the env's arguments: the hyperparameters the agents hold."""
    return {k: v for k, v in swept(config).items() if not k.startswith(ENV)}


def agent_env_values(config) -> dict[str, jnp.ndarray]:
    """Each swept env argument's value per agent, ``{NAME: [A]}`` (``int32`` where every
    value is an int, else ``float32``; agent order as in ``agent_tags``); empty where no env
    argument is swept."""
    names = [k for k in swept(config) if k.startswith(ENV)]
    tags = agent_tags(config) if names else []
    return {k[len(ENV):]: jnp.asarray(column, env_value_dtype(column))
            for k in names for column in ([t[k] for t in tags],)}


def env_value_dtype(values) -> Any:
    """The dtype a swept env argument's values are traced with: ``int32`` where every one
    is an int, else ``float32``."""
    return jnp.int32 if all(isinstance(v, int) for v in values) else jnp.float32


def variants(config) -> list[dict[str, Any]]:
    """Every combination of the swept values, ``[{field: value}]``; ``[{}]`` without one."""
    fields = swept(config)
    return [dict(zip(fields, values)) for values in itertools.product(*fields.values())]


def agent_tags(config) -> list[dict[str, Any]]:
    """What tells each agent apart in the metrics: its swept values and its seed."""
    return [{**variant, "seed": config.seed + s}
            for variant in variants(config) for s in range(config.num_seeds)]


def num_variants(config) -> int:
    """Combinations of the swept values (1 without a sweep), counted, not listed."""
    return math.prod(len(v) for v in swept(config).values())


def num_agents(config) -> int:
    """Agents in one program: variants x seeds."""
    return num_variants(config) * config.num_seeds


def agent_env_kwargs(config, agent: int) -> dict[str, Any]:
    """The env arguments agent ``agent`` trained with: the config's ``env_kwargs`` with its
    variant's swept ones over them (what the evaluate command builds its env with)."""
    given = env_kwargs_of(config)
    tags = agent_tags(config)[agent] if any(k.startswith(ENV) for k in swept(config)) else {}
    return {**given, **{k[len(ENV):]: v for k, v in tags.items() if k.startswith(ENV)}}


def agent_hparams(config) -> HParams | None:
    """The swept values of every agent as one record: ``float32 [num_agents]`` for each swept
    field (agent order as in ``agent_tags``), None for the other scalars (the program's
    constants). None where the program has one agent or nothing is swept: then the agents
    run their values as plain numbers."""
    fields = swept_hparams(config)
    if num_agents(config) == 1 or not fields:
        return None
    tags = agent_tags(config)
    values = {k: jnp.asarray([t[k] for t in tags], jnp.float32) for k in fields}
    own = {k[len(ALGO):]: v for k, v in values.items() if k.startswith(ALGO)}
    return hparams_of(config).replace(algo=own, **{k: values.get(k) for k in SCALARS})


def with_values(config, values: Mapping[str, Any]) -> ml_collections.ConfigDict:
    """A copy of ``config`` with ``values`` set and no sweep (one variant as a plain run)."""
    out = ml_collections.ConfigDict(config.to_dict())
    for k, v in values.items():
        if k.startswith(ALGO):  # an own hyperparameter (a float: only those are swept)
            out.algo[k[len(ALGO):]] = float(v)
        elif k.startswith(ENV):  # an env argument, as given (an int stays an int)
            out.env_kwargs[k[len(ENV):]] = v
        else:
            out[k] = type(config[k])(v)
    out.sweep = sweep_fields(out)
    return out
