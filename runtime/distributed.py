"""Multi-controller runtime (``jax.distributed``), meshes and process-level helpers."""

from __future__ import annotations

import time

import jax
import numpy as np
import orbax.checkpoint  # noqa: F401 - defines the absl flag set in initialize()
from absl import flags
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from runtime.config.validation import DeviceCounts

DATA_AXIS = "data"


def initialize(config) -> None:
    """Joins the multi-process runtime, or stays single-process.

    With ``config.num_processes > 1``: from the config's ``coordinator_address``,
    ``num_processes`` and ``process_id``. With the defaults (one process): from what JAX
    detects by itself (``detected_cluster``: a SLURM step or Open MPI job of several tasks,
    a Cloud TPU pod slice), when that finds more than one process. On CPU the
    cross-process collectives use gloo. Must run before any other JAX call.

    A dead peer ends the run: JAX's coordination service aborts every process once a peer
    misses its heartbeats for ``config.heartbeat_timeout_s`` (the coordinator's own death at
    once), wherever they wait (a collective, a checkpoint save, a queue).
    """
    timeouts = {"heartbeat_timeout_seconds": int(config.heartbeat_timeout_s)}
    if config.num_processes > 1:
        _use_gloo()
        jax.distributed.initialize(
            coordinator_address=config.coordinator_address,
            num_processes=config.num_processes,
            process_id=config.process_id,
            **timeouts,
        )
        _orbax_barriers_outside_devices()
        return
    method = detected_cluster()
    if method is not None:
        _use_gloo()
        jax.distributed.initialize(cluster_detection_method=method, **timeouts)
        _orbax_barriers_outside_devices()


def _orbax_barriers_outside_devices() -> None:
    """Orbax's barriers between processes go through the coordination service instead of a
    device collective (its default): a checkpoint saved while an abandoned update still
    holds the devices (``StopBoard``) must not queue behind it. Orbax reads an absl flag; a
    run started in-process (tests) has not parsed absl flags, hence ``present``."""
    flag = flags.FLAGS["experimental_orbax_use_distributed_barrier"]
    flag.value, flag.present = True, 1


def _use_gloo() -> None:
    # Only affects CPU devices; must not query the backend before initialize().
    jax.config.update("jax_cpu_collectives_implementation", "gloo")


# The environments of JAX's auto-detection that a run joins by itself, in JAX's order. Left
# out: Kubernetes (it would check, and warn, in any pod) and the opt-in mpi4py.
AUTO_DETECTED = ("ompi", "slurm", "gketpu", "gcetpu")


def detected_cluster() -> str | None:
    """The first of ``AUTO_DETECTED`` that JAX's cluster detection finds, when it has more
    than one process; else ``None``.

    A one-process environment (``srun -n 1``, a single-host TPU VM) stays single-process,
    and so does a presence check that fails (a metadata query that cannot connect).
    """
    from jax._src import clusters  # jax 0.10: no public API for the detection alone

    for env in clusters.ClusterEnv._cluster_types:
        if env.name not in AUTO_DETECTED:
            continue
        try:
            present = env.is_env_present()
        except Exception:  # noqa: BLE001 - not this environment
            present = False
        if present:
            return env.name if env.get_process_count() > 1 else None
    return None


def data_mesh(devices=None) -> Mesh:
    """A 1-D mesh with axis ``data`` over ``devices`` (default: every device of every process)."""
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def is_main_process() -> bool:
    return jax.process_index() == 0


def to_host(tree):
    """Fully replicated arrays to numpy, read from this process's own copy."""
    return jax.tree.map(lambda x: np.asarray(x.addressable_data(0)), tree)


def device_counts() -> DeviceCounts:
    """The device and process counts of the running runtime (for validation)."""
    return DeviceCounts(devices=jax.device_count(), local_devices=jax.local_device_count(),
                        processes=jax.process_count())


def agree_after_call(code: int | None, clock_due: bool) -> tuple[int | None, bool]:
    """``(the largest signal exit code any process saw (None: none did), process 0's
    clock_due)``: whether the run stops on a signal, and whether a wall-clock checkpoint is
    due, every process alike (process 0's clock decides; see docs/design.md, "Signals and
    checkpoints").

    A collective in multi-process runs (every process calls it at the same point), so a
    signal that reaches the processes at different times still stops them together.
    """
    if jax.process_count() == 1:
        return code, clock_due
    from jax.experimental import multihost_utils

    both = np.asarray(multihost_utils.process_allgather(
        np.asarray([code or 0, int(clock_due)], np.int32)))  # [num_processes, 2]
    return int(np.max(both[:, 0])) or None, bool(both[0, 1])


def all_processes_agree(ok: bool) -> bool:
    """Whether ``ok`` holds on every process: a collective in multi-process runs (every
    process calls it at the same point), ``ok`` itself in one process."""
    if jax.process_count() == 1:
        return ok
    return bool(np.all(_gather_int(int(ok))))


def _gather_int(value: int) -> np.ndarray:
    """``[num_processes]`` int32: ``value`` of every process (a collective)."""
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(np.int32(value)))


class StopBoard:
    """Stopping a run together on a signal, agreed without device collectives.

    A signal may reach one process only, and a process may act on it while an update holds
    its devices (Sebulba abandons the update in flight): a collective would then wait behind
    that update, or for a peer that never joins it. So the processes agree through JAX's
    coordination service (its key-value store, ``podracer/stop/...``), which every process
    reaches at once. One process: the local signal only, no service.

    - ``requested(local)``: the run's stop code: ``local`` (a signal seen here), posted for
      the others first; else the largest one a peer posted (read at most every ``poll_s``).
    - ``agree_on_update(completed)``: the update every process checkpoints, the largest
      ``completed`` of any process. Processes are at most one update apart (each update's
      collectives need all of them), so a process behind has that update in flight and
      finishes it. Called once per stop (later calls return the same).
    """

    KEY = "podracer/stop"

    def __init__(self, poll_s: float = 0.25, timeout_s: float = 120.0):
        self._client = _coordination_client() if jax.process_count() > 1 else None
        self._poll_s, self._timeout_s = poll_s, timeout_s
        self._posted: int | None = None
        self._seen: int | None = None
        self._next_read = 0.0
        self._agreed: int | None = None

    def requested(self, local: int | None) -> int | None:
        if self._client is None:
            return local
        if local is not None and self._posted is None:
            self._client.key_value_set(f"{self.KEY}/code/{jax.process_index()}", str(local))
            self._posted = local
        now = time.monotonic()
        if self._seen is None and now >= self._next_read:
            self._next_read = now + self._poll_s
            posted = self._client.key_value_dir_get(f"{self.KEY}/code/")
            self._seen = max((int(v) for _, v in posted), default=None)
        codes = [c for c in (local, self._seen) if c is not None]
        return max(codes) if codes else None

    def agree_on_update(self, completed: int) -> int:
        if self._client is None:
            return completed
        if self._agreed is None:
            self._client.key_value_set(f"{self.KEY}/update/{jax.process_index()}",
                                       str(completed))
            self._agreed = max(
                int(self._client.blocking_key_value_get(f"{self.KEY}/update/{p}",
                                                        int(self._timeout_s * 1000)))
                for p in range(jax.process_count()))
        return self._agreed


class ClockBoard:
    """Wall-clock checkpoints taken together without device collectives (Sebulba).

    Process 0's clock decides: when it says a checkpoint is due after update ``u``, process
    0 posts ``u + 1`` to the coordination service (``podracer/clock/<u + 1>``) and every
    process checkpoints update ``u + 1``. A process reaches update ``u + 1``'s end only once
    that update completed, whose collectives needed process 0 to dispatch it, after it
    posted: every process reads the same answer. One process: its own clock, at once.
    """

    KEY = "podracer/clock"

    def __init__(self):
        self._client = _coordination_client() if jax.process_count() > 1 else None
        self._posted = -1

    def due(self, update: int, clock_due: bool) -> bool:
        """Whether the run checkpoints after ``update`` (1-based) for the clock;
        ``clock_due``: this process's clock says one is due."""
        if self._client is None:
            return clock_due
        if jax.process_index() == 0 and clock_due and self._posted < update:
            self._client.key_value_set(f"{self.KEY}/{update + 1}", "1")
            self._posted = update + 1
        try:
            self._client.key_value_try_get(f"{self.KEY}/{update}")
        except Exception as e:  # noqa: BLE001 - jaxlib's error for a key not posted
            if "NOT_FOUND" not in str(e).upper():
                raise
            return False
        return True


def _coordination_client():
    from jax._src import distributed  # jax 0.10: the coordination client has no public API

    return distributed.global_state.client
