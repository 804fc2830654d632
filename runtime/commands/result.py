"""What a training run called from Python hands back: ``RunResult(rows, params, policy)``
(docs/design.md, "From Python").

``anakin.run`` and ``sebulba.run`` return one, so that a run without a workdir still gives
something to act with: the trained params of every agent and agent 0's ``Policy``, the
jitted function ``runtime.load_policy`` gives (``runtime.commands.policy``). A run that
``on_row`` stopped (it returned ``False``) holds the params of the update that stopped it,
which the run directory also holds as a checkpoint. A ``RunResult`` is also the sequence of
its rows (``len``, indexing, iteration), as the list of rows these calls returned before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax

from runtime import distributed


@dataclasses.dataclass(frozen=True)
class RunResult(Sequence):
    """The outcome of a training run called from Python.

    Attributes:
      rows: every ``metrics.jsonl`` row this call logged, oldest first (dicts).
      params: agent 0's params after the last update, on the host, without an agent axis:
        ``policy(params, obs, key)`` acts with them.
      policy: agent 0's greedy ``runtime.commands.policy.Policy`` (the distribution's mode,
        as ``runtime.load_policy(workdir)`` gives it): one observation ``[*obs_shape]`` or a
        batch ``[B, *obs_shape]`` -> an action ``[]`` / ``[B]`` (``[D]`` / ``[B, D]`` for a
        box); a recurrent agent's takes and returns its state.
      agent_params: every agent's params, agent order as its metrics' (``num_seeds`` x the
        sweep's variants; one for a Sebulba run); ``agent_params[0]`` is ``params``.
      update: the update the params are from (the run's last, or the one ``on_row``
        stopped it at).
    """

    rows: tuple[dict, ...]
    params: Any
    policy: Any
    agent_params: tuple[Any, ...]
    update: int

    def __getitem__(self, index):
        return self.rows[index]

    def __len__(self) -> int:
        return len(self.rows)


def run_result(rows: Sequence[dict], params, network, obs_shape: tuple[int, ...],
               num_agents: int, update: int) -> RunResult:
    """The ``RunResult`` of a run whose train state holds ``params`` (leaves ``[A, ...]``
    for ``num_agents`` A > 1, replicated over the run's devices) of ``network`` on
    observations ``obs_shape``, after ``update`` updates; ``rows`` as logged."""
    from runtime.commands.policy import make_policy

    host = distributed.to_host(params)
    agents = (host,) if num_agents == 1 else tuple(
        jax.tree.map(lambda x, a=a: x[a], host) for a in range(num_agents))
    return RunResult(rows=tuple(rows), params=agents[0],
                     policy=make_policy(network, obs_shape, greedy=True),
                     agent_params=agents, update=int(update))
