"""A trained agent back from Python: ``load_policy(workdir, agent=0, greedy=True) ->
(policy, params)`` (docs/evaluation.md, "From Python: load_policy"; docs/design.md,
"Evaluation").

The run is read as the evaluate commands read it (``runtime.commands.evaluation``): the
run directory checked (``check_workdir``), ``config.json`` rebuilt over the fields'
defaults (``runtime.config.sweep.base_config``) and an older run's fields upgraded
(``load_config``), the agent checked against the run's agents (``check_agent``), then the
agent's params alone restored from the latest finished checkpoint on one device (local
device 0) by ``restore_agent``, which both architectures' evaluate commands call too. A
policy is the network's and the params': restoring one needs the run's config, the env's
spec and where the train state keeps its params (``PARAMS_AT``), told by the checkpoint's
tree (``saved_mode``): Anakin's holds the learner state under ``learner``, Sebulba's is
the learner state (``params`` at its top). No module of the modes is imported: the spec
comes from ``envs.registry.env_spec`` (docs/design.md, "Rooms" and "Evaluation").

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

from rlcore.algorithms import make_algorithm
from rlcore.networks import initial_core
from rlcore.policy import acting_apply, policy_step
from runtime.commands import evaluation as ev
from runtime.commands.evaluation import EvalError


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


def make_policy(network, obs_shape: tuple[int, ...], greedy: bool,
                apply_fn: Callable | None = None) -> Policy:
    """The ``Policy`` of ``network`` (an agent's network of ``runtime.config.agent``) on
    observations ``obs_shape``, acting with ``apply_fn`` (``Restored.apply``; None: the
    network's own apply)."""
    cores = functools.partial(initial_core, network)
    apply_fn = network.apply if apply_fn is None else apply_fn
    fn = jax.jit(functools.partial(act, apply_fn, tuple(obs_shape), greedy))
    return Policy(act=fn, obs_shape=tuple(obs_shape), recurrent=cores(1) is not None,
                  initial_core=cores, greedy=greedy)


def saved_mode(workdir: str) -> str:
    """``"anakin"`` or ``"sebulba"``: the architecture whose train state ``workdir``'s latest
    finished checkpoint holds, read from its tree as written (no array is read).

    Raises:
      EvalError: the checkpoint's tree does not read, or is neither mode's train state.
    """
    from runtime.run import files as run_files
    from runtime.run.checkpoint import Checkpointer, drop_late_read_errors, short_reason, step_dir
    from runtime.run.older_state import saved_structure

    path = step_dir(run_files.checkpoints_dir(workdir), Checkpointer.finished_steps(workdir)[-1])
    drop_late_read_errors()  # a torn file's metadata read leaves late callbacks too
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


# Where a train state keeps its params, by the architecture that wrote it (``saved_mode``):
# Anakin's (``anakin.train.AnakinState``) under its learner state, Sebulba's at its top.
PARAMS_AT = {"anakin": ("learner", "params"), "sebulba": ("params",)}


def saved_defaults():
    """The config an older run's ``config.json`` is read over: every field at its default
    (``env_id`` empty: every run's ``config.json`` names its env)."""
    from runtime.config.sweep import base_config

    return base_config(env_id="")


def params_like(network, spec, num_agents: int, device):
    """Abstract params of ``network`` on ``spec`` (``rlcore.networks.init_params``), leaves
    ``[A, ...]`` for ``num_agents`` A > 1 (a ``num_seeds`` or sweep run's), on ``device``."""
    from rlcore.networks import init_params

    shapes = jax.eval_shape(functools.partial(init_params, network, spec=spec),
                            jax.random.key(0))
    lead = (num_agents,) if num_agents > 1 else ()
    sharding = jax.sharding.SingleDeviceSharding(device)
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(lead + x.shape, x.dtype,
                                                       sharding=sharding), shapes)


def described(tags: list[dict], agent: int) -> tuple[int, str]:
    """``(seed, "agent 1 of 2 (seed=1)")`` of agent ``agent`` of a run whose agents have
    ``tags`` (``runtime.config.sweep.agent_tags``)."""
    if len(tags) == 1:
        return tags[0]["seed"], "agent 0 of 1"
    values = ", ".join(f"{k}={v}" for k, v in tags[agent].items())
    return tags[agent]["seed"], f"agent {agent} of {len(tags)} ({values})"


def restore_agent(config, workdir: str, agent: int, spec, mode: str) -> ev.Restored:
    """Agent ``agent``'s params of the ``mode`` run (``"anakin"`` or ``"sebulba"``) in
    ``workdir``, restored alone (``PARAMS_AT``; ``Checkpointer.restore_part``) from the
    latest finished checkpoint on local device 0, with its network on ``spec`` (the env's
    spec in ``mode``); ``config``: the run's. What both evaluate commands and
    ``load_policy`` act with.

    Raises:
      EvalError: ``agent`` is not one of the run's agents, or the checkpoint holds no
        params of this config's network, in one line.
    """
    from runtime.config.agent import network as agent_network
    from runtime.config.fields import hparams_of
    from runtime.config.sweep import agent_tags
    from runtime.run.checkpoint import own_code

    tags = agent_tags(config)
    ev.check_agent(agent, len(tags))
    network = agent_network(config, spec)
    like = params_like(network, spec, len(tags), jax.local_devices()[0])
    params, step = ev.restore_latest(workdir, like, mode, PARAMS_AT[mode], own_code(config))
    if len(tags) > 1:
        params = jax.tree.map(lambda x: x[agent], params)
    seed, agent_text = described(tags, agent)
    behaviour = make_algorithm(hparams_of(config)).act
    return ev.Restored(network=network, apply=acting_apply(network.apply, behaviour, step),
                       params=params, spec=spec, step=step, seed=seed, agent=agent_text)


def restore_saved(workdir: str, agent: int) -> ev.Restored:
    """Agent ``agent`` of the run in ``workdir``, of the architecture its checkpoint tells,
    restored as its evaluate command restores it; raises ``EvalError("--flag: ...")`` for
    a bad argument."""
    from envs.registry import env_spec  # the env's spec: envs, below both modes
    from runtime.config.env_args import env_kwargs_of
    from runtime.config.sweep import num_agents

    ev.check_agent_index(agent)
    ev.check_workdir(workdir)
    mode = saved_mode(workdir)
    config = ev.load_config(workdir, saved_defaults())
    ev.check_agent(agent, num_agents(config))
    spec = env_spec(config.env_id, mode, **env_kwargs_of(config))
    return restore_agent(config, workdir, agent, spec, mode)


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
    try:
        restored = restore_saved(workdir, agent)
    except EvalError as e:
        raise EvalError(str(e).removeprefix("--")) from None
    return (make_policy(restored.network, restored.spec.obs_shape, greedy, restored.apply),
            restored.params)
