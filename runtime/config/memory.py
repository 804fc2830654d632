"""What a run's memory is measured against (docs/design.md, "Memory plan"): the bytes a
device may use (``capacity``, ``plan_capacity``), the host's RAM, and XLA's own figure for
a compiled program (``CompiledMemory``). Nothing here estimates a program's bytes: the plan
(``runtime.config.plan``) and the check (``runtime.config.memory_check``) read XLA's figure
and the state's exact sizes.
"""

from __future__ import annotations

import dataclasses
import os

import jax

GIB = 2**30
# A run must fit in this share of the capacity: XLA's own buffers, fragmentation and what
# its figure for the program leaves out (the runtime's own buffers, transfers in flight).
HEADROOM = 0.8


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


def memory_limit(config) -> int | None:
    """The bytes ``device_memory_gib`` lets a device use; None for 0 (the device's own)."""
    limit = config.get("device_memory_gib", 0) or 0
    return int(limit * GIB) if limit > 0 else None


def plan_capacity(config, platform: str, devices: int) -> int:
    """The bytes ``runtime.config.plan.update_plan`` fits a plan into: ``memory_limit``
    where set, else the device's ``bytes_limit`` (GPU/TPU) or, on CPU, the host's *total*
    RAM over the ``devices`` the run uses (total, not available: the plan, and with it the
    compiled program, is the same every time the run starts on one machine)."""
    limit = memory_limit(config)
    if limit is not None:
        return limit
    return host_total_bytes() // devices if platform == "cpu" else device_capacity(devices)[0]


def capacity(config, devices_used: int) -> tuple[int, str]:
    """``(bytes, name)`` a run's device may use, as the checks read it: ``memory_limit``
    where set, else ``device_capacity``'s."""
    limit = memory_limit(config)
    if limit is not None:
        device = jax.local_devices()[0]
        return limit, f"{device.platform}:{device.id} (device_memory_gib)"
    return device_capacity(devices_used)


def _meminfo_bytes(field: str) -> int | None:
    """``field`` (e.g. ``MemTotal``) of /proc/meminfo in bytes; None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def host_total_bytes() -> int:
    """The host's total RAM: ``MemTotal`` of /proc/meminfo where there is one, else
    ``SC_PHYS_PAGES * SC_PAGE_SIZE``."""
    total = _meminfo_bytes("MemTotal")
    return total if total is not None else os.sysconf("SC_PHYS_PAGES") * os.sysconf(
        "SC_PAGE_SIZE")


def host_available_bytes() -> int:
    """The host's available RAM: ``MemAvailable`` of /proc/meminfo (free memory plus the
    page cache the kernel can drop) where there is one, else ``SC_AVPHYS_PAGES *
    SC_PAGE_SIZE`` (free pages only, so lower)."""
    available = _meminfo_bytes("MemAvailable")
    return available if available is not None else os.sysconf(
        "SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def device_capacity(devices_used: int) -> tuple[int, str]:
    """``(bytes, name)`` of the first local device: its ``bytes_limit`` where the platform
    keeps memory stats (GPU/TPU), else the host's available RAM over ``devices_used`` (CPU
    devices share the host's RAM)."""
    device = jax.local_devices()[0]
    name = f"{device.platform}:{device.id}"
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a platform without stats
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), name
    return host_available_bytes() // max(devices_used, 1), name
