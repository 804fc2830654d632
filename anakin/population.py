"""The agents' hyperparameters in Anakin's program (docs/design.md, "Population-based
training"): with more than one agent and values of their own (a sweep, or population-based
training) they live in the train state in one form, ``rlcore.pbt.Population`` (``values
[A, H]``, names ``runtime.config.pbt.names``). A sweep is a population that never exploits;
PBT is one optional step after the update (``population_step``).
"""

from __future__ import annotations

import jax
from jax.sharding import Mesh

from anakin.state import AnakinState, PopulationOutput, UpdateOutput
from rlcore import pbt
from rlcore.hparams import HParams
from rlcore.seeding import pbt_key, pbt_root
from runtime import distributed
from runtime.config import pbt as population
from runtime.config import sweep


def has_population(config) -> bool:
    """Whether the agents hold values of their own: PBT, or a sweep of several agents."""
    return population.enabled(config) or sweep.agent_hparams(config) is not None


def fresh_population(config, mesh: Mesh) -> pbt.Population | None:
    """The population of a fresh run (replicated over ``mesh``): every agent's starting
    values, an empty window; None where the agents hold no values of their own."""
    if not has_population(config):
        return None
    return jax.device_put(pbt.Population.fresh(population.initial_values(config)),
                          distributed.replicated(mesh))


def agent_values(config, pop: pbt.Population | None) -> HParams | None:
    """The agents' values as one record (``[A]`` per name, traced, from the state), None
    without a population: the agents then run the config's values as plain numbers."""
    return None if pop is None else population.agent_record(config, pop.values)


def population_step(config, explore: pbt.Explore, state: AnakinState,
                    out: UpdateOutput) -> tuple[AnakinState, UpdateOutput]:
    """After an update: the window takes its episodes (or evaluations), and every
    ``pbt.interval`` updates the agents exploit and explore (``rlcore.pbt``, key
    ``pbt_key(pbt_root(seed), u)``); outside the agents' vmap, on every device alike."""
    pop = state.population
    seen = out.evals if config.pbt.statistic == "eval" else out.episodes
    pop = pop.observe(seen.return_sum, seen.count)
    u = state.learner.update.reshape(-1)[0]

    def step(_):
        stat = pop.window_statistic()
        (learner, lagged), values, events = pbt.exploit_and_explore(
            pbt_key(pbt_root(config.seed), u), explore, stat, pop.values,
            (state.learner, state.lagged))
        return state.replace(learner=learner, lagged=lagged,
                             population=pop.restart(values, stat)), events

    def skip(_):
        return state.replace(population=pop), pbt.no_events(pop.statistic, pop.values)

    state, events = jax.lax.cond(u % config.pbt.interval == 0, step, skip, None)
    return state, out.replace(population=PopulationOutput(pop.values, events))
