"""A trained agent back from Python: ``load_policy(workdir, agent=0, greedy=True) ->
(policy, params)`` (docs/evaluation.md, "From Python: load_policy"; docs/design.md,
"Evaluation").

The run is read as the evaluate commands read it (``runtime.commands.evaluation``): the
run directory checked (``check_workdir``), ``config.json`` rebuilt with ``configs/base.py``'s
defaults and an older run's fields upgraded (``load_config``), the agent checked against
the run's agents (``check_agent``), the latest finished checkpoint restored on one device
(local device 0) by the restore of the architecture that wrote it
(``anakin.evaluate.restore``, ``sebulba.evaluate.restore``). The architecture is told by
the checkpoint's train state (``saved_mode``): Anakin's holds the learner state under
``learner`` (``anakin.train.AnakinState``), Sebulba's is the learner state (``params`` at
its top). This is the one module of runtime that imports the modes (their evaluate
modules, inside ``mode_evaluate``); tests/test_layout.py (``MODE_DOORS``) allows it that
and no more.

``policy(params, obs, key) -> action`` (a ``Policy``, which calls one ``jax.jit``-ted
function, ``policy.act``) acts as the evaluations act (``rlcore.policy.policy_step``):
with ``greedy`` the distribution's mode (the argmax of a categorical, the mean of a
Gaussian), as ``--greedy`` does; otherwise one sample per row, row ``i`` drawn with
``per_env_keys(key, i, 0)``.

- ``obs``: one observation ``[*obs_shape]`` -> one action ``[]`` (int32) or ``[D]``
  (float32); a batch ``[B, *obs_shape]`` -> ``[B]`` or ``[B, D]``. One observation acts as
  row 0 of a batch of one.
- A recurrent agent: ``policy(params, obs, key, state) -> (action, state)``, the state a
  ``CoreState`` (leaves ``[H]`` for one observation, ``[B, H]`` for a batch). Each episode
  starts from ``policy.initial_state(batch)`` (zeros, the state the evaluations reset the
  core to where an episode starts).

Bad input raises ``EvalError`` in one line naming the argument (``workdir: ...``,
``agent: ...``; an agent the run lacks is told from config.json, before any restore); a
config this host cannot run raises ``ConfigError`` (one line).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rlcore.networks import initial_core
from rlcore.policy import policy_step
from runtime.commands import evaluation as ev
from runtime.commands.evaluation import EvalError
from runtime.process import failure


@dataclasses.dataclass(frozen=True)
class Policy:
    """A trained agent's actions: ``policy(params, obs, key)`` (feed-forward) or
    ``policy(params, obs, key, state)`` (recurrent); see the module docstring for shapes.

    Attributes:
      act: the jitted ``(params, obs, key, state) -> (action, state)``; ``state`` None for
        a feed-forward agent.
      obs_shape: one observation's shape.
      recurrent: the agent carries a core state.
      initial_core: ``n -> `` the zero core state of ``n`` envs, leaves ``[n, H]``
        (``rlcore.networks.initial_core``; it gives None for a feed-forward agent).
      greedy: the distribution's mode instead of samples.
    """

    act: Callable
    obs_shape: tuple[int, ...]
    recurrent: bool
    initial_core: Callable[[int], Any]
    greedy: bool

    def __call__(self, params, obs, key, state=None):
        """The action ``[*action_shape]`` of one observation or ``[B, *action_shape]`` of a
        batch; a recurrent agent's with its state after the step, ``(action, state)``.
        ``key``: a PRNG key (may be None when greedy)."""
        if self.recurrent and state is None:
            raise ValueError("policy: a recurrent agent takes its state: policy(params, obs, "
                             "key, state), the first from policy.initial_state(batch)")
        if not self.recurrent and state is not None:
            raise ValueError("policy: a feed-forward agent takes no state")
        if key is None and not self.greedy:
            raise ValueError("policy: sampling (greedy=False) needs a key")
        one_or_batch(self.obs_shape, np.shape(obs))  # its ValueError before jit's note
        action, state = self.act(params, obs, key, state)
        return (action, state) if self.recurrent else action

    def initial_state(self, batch: int | None = None):
        """The state an episode starts from: a ``CoreState`` of zeros, leaves ``[H]``
        (``batch`` None: one observation) or ``[batch, H]``; None for a feed-forward
        agent."""
        core = self.initial_core(1 if batch is None else batch)
        return jax.tree.map(lambda x: x[0], core) if batch is None else core


def one_or_batch(obs_shape: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """True for one observation (``shape == obs_shape``), False for a batch ``[B,
    *obs_shape]``; raises ValueError for any other shape."""
    if tuple(shape) == tuple(obs_shape):
        return True
    if len(shape) == len(obs_shape) + 1 and tuple(shape[1:]) == tuple(obs_shape):
        return False
    raise ValueError(f"policy: obs must be {list(obs_shape)} (one observation) or "
                     f"[B, {', '.join(map(str, obs_shape))}] (a batch), got {list(shape)}")


def act(apply_fn: Callable, obs_shape: tuple[int, ...], greedy: bool, params, obs, key,
        state):
    """``(action, state)`` of ``obs`` (one ``[*obs_shape]`` or ``[B, *obs_shape]``): one
    ``rlcore.policy.policy_step`` on a batch (of one, for one observation), step ``t = 0``,
    no episode start (``state`` is the caller's, ``[H]`` or ``[B, H]`` leaves, or None)."""
    one = one_or_batch(obs_shape, jnp.shape(obs))
    lead = (lambda x: jnp.asarray(x)[None]) if one else jnp.asarray
    batch, core = lead(obs), jax.tree.map(lead, state)
    first = None if core is None else jnp.zeros(batch.shape[0], bool)
    action, core = policy_step(apply_fn, params, batch, core, first, key, jnp.int32(0),
                               greedy)
    drop = (lambda x: x[0]) if one else (lambda x: x)
    return drop(action), jax.tree.map(drop, core)


def make_policy(network, obs_shape: tuple[int, ...], greedy: bool) -> Policy:
    """The ``Policy`` of ``network`` (an agent's network of ``runtime.config.agent``) on
    observations ``obs_shape``."""
    cores = functools.partial(initial_core, network)
    fn = jax.jit(functools.partial(act, network.apply, tuple(obs_shape), greedy))
    return Policy(act=fn, obs_shape=tuple(obs_shape), recurrent=cores(1) is not None,
                  initial_core=cores, greedy=greedy)


def saved_mode(workdir: str) -> str:
    """``"anakin"`` or ``"sebulba"``: the architecture whose train state ``workdir``'s latest
    finished checkpoint holds, read from its tree as written (no array is read).

    Raises:
      EvalError: the checkpoint's tree does not read, or is neither mode's train state.
    """
    from runtime.run import files as run_files
    from runtime.run.checkpoint import Checkpointer, short_reason, step_dir
    from runtime.run.older_state import saved_structure

    path = step_dir(run_files.checkpoints_dir(workdir), Checkpointer.finished_steps(workdir)[-1])
    try:
        tree = saved_structure(path)
    except Exception as e:  # noqa: BLE001 - orbax and tensorstore raise many types
        raise EvalError(f"--workdir: checkpoint {path} does not read "
                        f"({short_reason(e, path)})") from None
    if isinstance(tree, Mapping) and "learner" in tree:
        return "anakin"
    if isinstance(tree, Mapping) and "params" in tree:
        return "sebulba"
    raise EvalError(f"--workdir: checkpoint {path} holds neither an Anakin nor a Sebulba "
                    "train state")


def mode_evaluate(mode: str):
    """The evaluate module of ``mode`` (``saved_mode``'s answer): ``config_defaults()``,
    ``num_agents(config)`` and ``restore(config, workdir, agent) -> Restored``."""
    if mode == "anakin":
        import anakin.evaluate as evaluate
    else:
        import sebulba.evaluate as evaluate
    return evaluate


def restore_agent(workdir: str, agent: int) -> ev.Restored:
    """Agent ``agent`` of the run in ``workdir``, restored as its architecture's evaluate
    command restores it; raises ``EvalError("--flag: ...")`` for a bad argument."""
    ev.check_agent_index(agent)
    ev.check_workdir(workdir)
    mode = mode_evaluate(saved_mode(workdir))
    config = ev.load_config(workdir, mode.config_defaults())
    ev.check_agent(agent, mode.num_agents(config))
    return mode.restore(config, workdir, agent)


def load_policy(workdir: str, agent: int = 0, greedy: bool = True) -> tuple[Policy, Any]:
    """The policy and params of agent ``agent`` of the run in ``workdir`` (latest finished
    checkpoint, on local device 0).

    Args:
      workdir: a run directory of either architecture (config.json and checkpoints/); it
        may be training meanwhile: nothing is written there.
      agent: the agent of a ``num_seeds`` or sweep run, ``0 .. N-1`` (a Sebulba run: 0).
      greedy: the distribution's mode (as ``--greedy``) instead of samples.

    Returns:
      ``(policy, params)``: ``policy(params, obs, key) -> action``, or for a recurrent agent
      ``policy(params, obs, key, state) -> (action, state)`` (``Policy``; shapes in the
      module docstring); ``params`` the agent's, without an agent axis.

    Raises:
      EvalError: not a run directory, no checkpoint, a checkpoint that does not restore,
        or an agent the run does not have, in one line (``"workdir: ..."``,
        ``"agent: ..."``).
      ConfigError: a config this host cannot run (an env id it does not have), one line.
    """
    failure.route_late_io_errors(failure.Details(None))  # a torn read's late callbacks
    try:
        restored = restore_agent(workdir, agent)
    except EvalError as e:
        raise EvalError(str(e).removeprefix("--")) from None
    return make_policy(restored.network, restored.spec.obs_shape, greedy), restored.params
