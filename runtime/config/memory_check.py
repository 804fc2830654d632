"""The memory check (docs/design.md, "Memory plan"): once a program is compiled, and before
its first call, XLA's own figure for it (``CompiledMemory``: arguments, outputs and
temporaries per device; Anakin's update call, Sebulba's learner update) against the device's
``capacity`` (``compiled_refusal``); before anything compiles, a mode's host buffers
(Sebulba's rollout queues: exact sizes) against the host's available RAM
(``host_refusal``); and before that, what the state's shapes alone need (``shape_refusal``).
A run fits in ``HEADROOM`` of either. The plan before compile is ``runtime.config.plan``'s,
from XLA's figure too.

A refusal is one line led by the field to change (``blamed_fields``, ``agents_message``,
``host_message``) that ends with ``OVERRIDE``: ``memory_check=False`` runs anyway
(``runtime.commands.train.check_memory`` acts on the line, every process alike).
"""

from __future__ import annotations

import jax

from rlcore.hparams import HParams
from rlcore.networks import NO_CORE
from rlcore.types import EnvSpec
from runtime.config import memory, plan
from runtime.config.memory import GIB, HEADROOM, CompiledMemory, capacity
from runtime.config.validation import HostMemory, ModeChecks


def _size(n: int) -> str:
    """``n`` bytes as people read them: ``"1.5 GiB"``, ``"310.2 MiB"``, ``"96.0 KiB"``."""
    for unit, size in (("GiB", GIB), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 2**10:.1f} KiB"


def agents_message(total: int, capacity: int, device: str, agents: int,
                   agent_fields: str, what: str) -> str:
    """The one line that refuses a run of ``agents`` agents of which one would fit: it
    names the fields that make the agents (``agent_fields``) first."""
    fit = int(HEADROOM * capacity // max(total // agents, 1))
    return (f"{agent_fields}: {agents} agents need about {_size(total)} per device ({what}; "
            f"{_size(total // agents)} each) but {device} has {_size(capacity)} (a "
            f"run may use {HEADROOM:.0%}): at most about {fit} agents fit; sweep fewer values "
            "or seeds")


# A field is named in a refusal where its part is at least this share of the plan's figure.
SHARE_FLOOR = 0.1

# What each field of ``field_shares`` asks of a run that does not fit.
REMEDIES = {
    "policy_lag": lambda c: (f"lower policy_lag ({c.policy_lag}; each lag keeps one more copy "
                             "of the params)"),
    "recurrent_hidden": lambda c: (f"lower recurrent_hidden ({c.recurrent_hidden} units; the "
                                   "core's params grow with its square)"),
    "network": lambda c: f"choose a smaller network than {c.network}",
    "num_envs": lambda c: "lower num_envs or num_steps",
    "num_minibatches": lambda c: ("raise num_minibatches or microbatches (-1: the fewest that "
                                  "fit)"),
    "replay.capacity": lambda c: (f"lower replay.capacity ({c.replay.capacity} transitions: "
                                  "the buffer lives in the learner state)"),
}


def field_shares(figure: plan.PlanFigure, config) -> list[tuple[str, float]]:
    """``(field, share)`` of each field behind at least ``SHARE_FLOOR`` of the plan's
    figure (``runtime.config.plan.PlanFigure``: XLA's for the update, the state's exact
    sizes), largest first: ``policy_lag`` (the lagged copies of the params),
    ``recurrent_hidden`` for a recurrent agent, else ``network`` (the learner state and a
    gradient), ``num_envs`` (the trajectory), ``num_minibatches`` (the rest of XLA's figure
    for the update: its temporaries), ``replay.capacity`` (a replay buffer)."""
    core = "recurrent_hidden" if config.recurrent != NO_CORE else "network"
    parts = {"policy_lag": figure.lagged, core: figure.learner_state,
             "num_envs": figure.trajectory, "num_minibatches": figure.working,
             "replay.capacity": figure.buffer}
    total = max(sum(parts.values()), 1)
    named = [(field, part / total) for field, part in parts.items()
             if part / total >= SHARE_FLOOR]
    return sorted(named, key=lambda item: -item[1])


def device_message(used: CompiledMemory, capacity: int, device: str, config, *,
                   shares: list[tuple[str, float]], agents: int, unroll: int,
                   what: str) -> str:
    """The one line that refuses a run whose compiled program (``what``) does not fit
    (``agents`` agents, its gradient-step loop at ``unroll``): led by the field of the
    largest of ``shares`` (``field_shares``), every named field with its share, the
    leader's remedy."""
    field = shares[0][0]
    named = ", ".join(f"{f} {share:.0%}" for f, share in shares)
    rolled = (f"update_unroll {unroll} unrolls the gradient steps, whose buffers may then "
              "be live at once; 1 runs them in a rolled loop")
    also = [f for f, more in (("num_seeds or the sweep", agents > 1), (rolled, unroll != 1))
            if more]
    return (f"{field}: {what} needs about {_size(used.total)} per device (XLA: arguments "
            f"{_size(used.arguments)}, temporaries {_size(used.temporaries)}, outputs "
            f"{_size(used.outputs - used.aliased)} beyond the donated arguments) but {device} "
            f"has {_size(capacity)} (a run may use {HEADROOM:.0%}); by share of XLA's "
            f"figure for one update and the state's sizes: {named}; {REMEDIES[field](config)}"
            + (f" (also: {'; '.join(also)})" if also else ""))


# The Atari config sized for a small CPU host (its first update in about a minute on 2 cores).
CPU_ATARI_CONFIG = "configs/atari_ppo_2core.py"


def cpu_atari_hint(env_id: str, platform: str) -> str:
    """What to run instead when an Atari run (an EnvPool ``*-v5`` id) does not fit a CPU
    host; "" otherwise."""
    if platform != "cpu" or not env_id.endswith("-v5"):
        return ""
    return f"; on a CPU host, {CPU_ATARI_CONFIG} is sized for 2 cores and 24 GiB"


def host_message(need: int, available: int, host: HostMemory) -> str:
    """The one line that refuses a run whose host buffers (``host``, the mode's) do not
    fit."""
    return (f"num_envs: {host.what} need about {_size(need)} of host memory "
            f"({host.detail}) but the host has {_size(available)} available (a run may use "
            f"{HEADROOM:.0%}); lower {host.fields}")


# What a refusal adds: the field that runs the run anyway.
OVERRIDE = "; memory_check=False runs it anyway"


def compiled_refusal(config, compiled, spec: EnvSpec, mode: ModeChecks, num_shards: int,
                     num_processes: int, what: str, hparams: HParams) -> str | None:
    """The line that refuses a run whose compiled program ``compiled`` (``what``, e.g.
    "the update call") holds more than ``HEADROOM`` of the device's ``capacity`` by XLA's
    own figure (``CompiledMemory``); None where it fits, or where XLA gives no figure.
    ``hparams``: the program's, with ``update_unroll`` and ``microbatches`` resolved. The
    line names the fields that make the agents where one agent would fit, else every field
    behind a real share of the plan's figure, largest first (``field_shares``)."""
    used = CompiledMemory.of(compiled)
    if used is None:
        return None
    cap, device = capacity(config, mode.devices_used(config, num_shards, num_processes))
    if used.total <= HEADROOM * cap:
        return None
    agents = mode.num_agents(config)
    if agents > 1 and used.total // agents <= HEADROOM * cap:  # one agent would fit
        return agents_message(used.total, cap, device, agents, agent_fields(config),
                              f"XLA's figure for {what}") + OVERRIDE
    resolved = plan.UpdatePlan(hparams.update_unroll, hparams.microbatches)
    figure = plan.plan_figure(config, plan.UpdateProgram.of(config, spec, mode, num_shards),
                              resolved, mode) or plan.PlanFigure(0, 0, used.total)
    return (device_message(used, cap, device, config, shares=field_shares(figure, config),
                           agents=agents, unroll=resolved.unroll, what=what)
            + cpu_atari_hint(config.env_id, jax.local_devices()[0].platform) + OVERRIDE)


def host_refusal(config, mode: ModeChecks, num_processes: int) -> str | None:
    """The line that refuses a run whose host buffers (the mode's ``host_memory``:
    Sebulba's rollout queues, exact sizes) pass ``HEADROOM`` of the host's available RAM;
    None where they fit or the mode keeps none."""
    if mode.host_memory is None:
        return None
    need = mode.host_memory.bytes(config, mode.spec(config), num_processes)
    available = memory.host_available_bytes()
    if need <= HEADROOM * available:
        return None
    return host_message(need, available, mode.host_memory) + OVERRIDE


def shape_floor(config, mode: ModeChecks, num_shards: int) -> int:
    """Bytes per device that a run's state needs by its shapes alone, before anything
    compiles: every agent's params and optimizer state (``jax.eval_shape`` of the learner's
    init: exact) and its rollout's observations over ``num_shards`` devices (exact; the
    bootstrap step included). A floor under XLA's figure for the compiled program, which
    adds gradients, the trajectory's other fields and temporaries."""
    return sum(shape_floor_parts(config, mode, num_shards))


def shape_floor_parts(config, mode: ModeChecks, num_shards: int) -> tuple[int, int]:
    """``shape_floor`` in two parts: ``(buffer, rest)``, the algorithm's per-env store (a
    replay buffer, split with the envs) and everything else, every agent's."""
    spec = mode.spec(config)
    state, traj = plan.program_inputs(plan.UpdateProgram.of(config, spec, mode, 1))
    envs = -(-config.num_envs // max(num_shards, 1))
    obs = plan.tree_bytes((traj.obs, traj.bootstrap_obs)) // config.num_envs
    buffer = plan.buffer_bytes(state) // config.num_envs * envs
    rest = plan.tree_bytes((state.params, state.opt_state)) + envs * obs
    return mode.num_agents(config) * buffer, mode.num_agents(config) * rest


def shape_refusal(config, mode: ModeChecks, num_devices: int,
                  num_processes: int = 1) -> str | None:
    """The line that refuses, before anything compiles, a run whose ``shape_floor`` (spread
    over all ``num_devices`` of the runtime: never more shards than that) passes
    ``HEADROOM`` of a device (``capacity``, for the devices the mode uses, as
    ``compiled_refusal`` has it); None where it fits. An absurd ``num_seeds`` or sweep is
    refused in seconds this way, where XLA's figure would wait for a compile."""
    buffer, rest = shape_floor_parts(config, mode, num_devices)
    floor = buffer + rest
    cap, device = capacity(config, mode.devices_used(config, num_devices, num_processes))
    if floor <= HEADROOM * cap:
        return None
    agents = mode.num_agents(config)
    if buffer > rest and (agents == 1 or buffer // agents > HEADROOM * cap):
        return (f"replay.capacity: the replay buffer needs at least {_size(buffer)} per "
                f"device by its shapes alone but {device} has {_size(cap)} (a run may use "
                f"{HEADROOM:.0%}); {REMEDIES['replay.capacity'](config)}" + OVERRIDE)
    if agents > 1:
        return agents_message(floor, cap, device, agents, agent_fields(config),
                              "params, optimizer state and rollout observations, from their "
                              "shapes alone") + OVERRIDE
    return (f"num_envs: params, optimizer state and rollout observations need at least "
            f"{_size(floor)} per device by their shapes alone but {device} has {_size(cap)} "
            f"(a run may use {HEADROOM:.0%}); lower num_envs or num_steps, or choose a "
            f"smaller network than {config.network}" + OVERRIDE)


def agent_fields(config) -> str:
    """The fields that make a program's agents, sweep fields first: ``"sweep.learning_rate,
    sweep.gamma, num_seeds"`` (``num_seeds`` where it is more than 1)."""
    sweep = config.get("sweep") or {}
    names = [f"sweep.{k}" for k, v in sweep.items() if v]
    if config.get("num_seeds", 1) > 1:
        names.append("num_seeds")
    return ", ".join(names) or "num_seeds"
