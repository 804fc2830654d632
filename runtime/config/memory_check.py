"""The memory check (docs/design.md, "Memory plan"): once a program is compiled, and before
its first call, XLA's own figure for it (``CompiledMemory``: arguments, outputs and
temporaries per device; Anakin's update call, Sebulba's learner update) against the device's
``capacity`` (``compiled_refusal``); before anything compiles, a mode's host buffers
(Sebulba's rollout queues: exact sizes) against the host's available RAM
(``host_refusal``). A run fits in ``HEADROOM`` of either. The plan before compile is
``runtime.config.memory``'s.

A refusal is one line led by the field to change (``blamed_fields``, ``agents_message``,
``host_message``) that ends with ``OVERRIDE``: ``memory_check=False`` runs anyway
(``runtime.commands.train.check_memory`` acts on the line, every process alike).
"""

from __future__ import annotations

import dataclasses

import jax

from rlcore.networks import NO_CORE
from rlcore.types import EnvSpec
from runtime.config import memory
from runtime.config.agent import NetworkChoice
from runtime.config.memory import GIB, HEADROOM
from runtime.config.validation import HostMemory, ModeChecks, derive


def _gib(n: int) -> str:
    return f"{n / GIB:.1f}"


@dataclasses.dataclass(frozen=True)
class CompiledMemory:
    """XLA's memory analysis of one compiled program (``compiled.memory_analysis()``), bytes
    per device.

    Attributes:
      arguments: the program's inputs (the train state, the batch).
      outputs: its outputs.
      aliased: outputs written into donated arguments' buffers (counted once, as arguments).
      temporaries: XLA's scratch buffers while it runs.
      code: generated code (0 on CPU).
    """

    arguments: int
    outputs: int
    aliased: int
    temporaries: int
    code: int = 0

    @property
    def total(self) -> int:
        """What the program holds on a device while it runs."""
        return self.arguments + self.outputs - self.aliased + self.temporaries + self.code

    @classmethod
    def of(cls, compiled) -> CompiledMemory | None:
        """The analysis of ``compiled`` (a ``jax.stages.Compiled``); None where the backend
        gives none."""
        try:
            m = compiled.memory_analysis()
        except Exception:  # noqa: BLE001 - a backend without the analysis
            return None
        if m is None:
            return None
        return cls(arguments=int(m.argument_size_in_bytes), outputs=int(m.output_size_in_bytes),
                   aliased=int(m.alias_size_in_bytes), temporaries=int(m.temp_size_in_bytes),
                   code=int(m.generated_code_size_in_bytes))


def capacity(config, devices_used: int) -> tuple[int, str]:
    """``(bytes, name)`` a run's device may use: ``device_memory_gib`` where > 0, else
    ``device_capacity``'s."""
    limit = config.get("device_memory_gib", 0) or 0
    if limit > 0:
        device = jax.local_devices()[0]
        return int(limit * GIB), f"{device.platform}:{device.id} (device_memory_gib)"
    return memory.device_capacity(devices_used)


def agents_message(total: int, capacity: int, device: str, agents: int,
                   agent_fields: str, what: str) -> str:
    """The one line that refuses a run of ``agents`` agents of which one would fit: it
    names the fields that make the agents (``agent_fields``) first."""
    fit = int(HEADROOM * capacity // max(total // agents, 1))
    return (f"{agent_fields}: {agents} agents need about {_gib(total)} GiB per device ({what}; "
            f"{total / agents / GIB:.2g} GiB each) but {device} has {_gib(capacity)} GiB (a "
            f"run may use {HEADROOM:.0%}): at most about {fit} agents fit; sweep fewer values "
            "or seeds")


def blamed_fields(state_bytes: int, total: int, config) -> tuple[str, str]:
    """``(field, remedy)`` the device refusal leads with: where the network's params,
    optimizer state and core states (``state_bytes``) make more than half of ``total``,
    ``recurrent_hidden`` for a recurrent agent (a core's params grow with its square) or
    ``network``; else ``num_envs`` and the batch fields."""
    if 2 * state_bytes > total:
        if config.recurrent != NO_CORE:
            return "recurrent_hidden", (f"lower recurrent_hidden ({config.recurrent_hidden} "
                                        "units; the core's params grow with its square)")
        return "network", f"choose a smaller network than {config.network}"
    return "num_envs", ("lower num_envs or num_steps, or raise num_minibatches or microbatches "
                        "(-1: the fewest that fit)")


def device_message(used: CompiledMemory, capacity: int, device: str, config, *,
                   state_bytes: int, agents: int, live: int, what: str) -> str:
    """The one line that refuses a run whose compiled program (``what``) does not fit
    (``agents`` agents, ``live`` gradient steps live at once), led by ``blamed_fields``."""
    field, remedy = blamed_fields(state_bytes, used.total, config)
    unroll = (f"update_unroll, whose value keeps {live} gradient steps live at once on CPU; "
              "1 keeps one")
    also = [f for f, more in (("num_seeds or the sweep", agents > 1), (unroll, live > 1)) if more]
    return (f"{field}: {what} needs about {_gib(used.total)} GiB per device (XLA: arguments "
            f"{_gib(used.arguments)}, temporaries {_gib(used.temporaries)}, outputs "
            f"{_gib(used.outputs - used.aliased)} beyond the donated arguments) but {device} "
            f"has {_gib(capacity)} GiB (a run may use {HEADROOM:.0%}); {remedy}"
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
    return (f"num_envs: {host.what} need about {_gib(need)} GiB of host memory "
            f"({host.detail}) but the host has {_gib(available)} GiB available (a run may use "
            f"{HEADROOM:.0%}); lower {host.fields}")


# What a refusal adds: the field that runs the run anyway.
OVERRIDE = "; memory_check=False runs it anyway"


def compiled_refusal(config, compiled, spec: EnvSpec, mode: ModeChecks, num_shards: int,
                     num_processes: int, what: str, unroll: int) -> str | None:
    """The line that refuses a run whose compiled program ``compiled`` (``what``, e.g.
    "the update call") holds more than ``HEADROOM`` of the device's ``capacity`` by XLA's
    own figure (``CompiledMemory``); None where it fits, or where XLA gives no figure.
    ``unroll``: the program's resolved ``update_unroll``. The line names the fields that
    make the agents where one agent would fit, else ``blamed_fields``'s."""
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
    sizes = memory.network_sizes(NetworkChoice.of(config), spec, config.optimizer,
                          config.max_grad_norm > 0)
    b = derive(config, num_shards).envs_per_shard
    state = agents * (sizes.params + sizes.opt_state + 2 * b * sizes.core_per_env)
    platform = jax.local_devices()[0].platform
    return (device_message(used, cap, device, config, state_bytes=state, agents=agents,
                           live=memory.live_steps(config, platform, unroll), what=what)
            + cpu_atari_hint(config.env_id, platform) + OVERRIDE)


def host_refusal(config, mode: ModeChecks, num_processes: int) -> str | None:
    """The line that refuses a run whose host buffers (the mode's ``host_memory``:
    Sebulba's rollout queues, exact sizes) pass ``HEADROOM`` of the host's available RAM;
    None where they fit or the mode keeps none."""
    if mode.host_memory is None:
        return None
    need = mode.host_memory.bytes(config, mode.env_spec(config.env_id), num_processes)
    available = memory.host_available_bytes()
    if need <= HEADROOM * available:
        return None
    return host_message(need, available, mode.host_memory) + OVERRIDE


def agent_fields(config) -> str:
    """The fields that make a program's agents, sweep fields first: ``"sweep.learning_rate,
    sweep.gamma, num_seeds"`` (``num_seeds`` where it is more than 1)."""
    sweep = config.get("sweep") or {}
    names = [f"sweep.{k}" for k, v in sweep.items() if v]
    if config.get("num_seeds", 1) > 1:
        names.append("num_seeds")
    return ", ".join(names) or "num_seeds"
