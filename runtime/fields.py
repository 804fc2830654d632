"""What the code knows about each config field, in one table; and the learner's record.

``configs/base.py`` holds every field's default; ``FIELDS`` below has one row per field of
it (tests/runtime/test_fields.py checks both ways, and that each row's kind is the type of
base's default). A row says:

- ``kind``: ``bool``, ``int``, ``number`` (int or float), ``str``, ``tuple`` or ``config``
  (a sub-config; its fields are rows named ``<sub>.<field>``; the ``sweep`` sub-config
  mirrors the number fields and has no rows of its own);
- ``sweepable``: may vary between agents of one program (``config.sweep``): a loss or
  optimizer scalar, used only in arithmetic, so it may be a traced value;
- ``resumable``: a resumed run may change it (it alters neither the data nor the math);
- ``one_device``: for a device-layout field, its value in a plain restore in one process on
  local device 0 (``runtime.evaluation.one_device_config``); None for other fields.

Validation (bool and debug fields), sweeps (``SWEEPABLE``), the resume check
(``RESUMABLE_CHANGES``) and the one-device restore read the views at the end. Rows are in
base.py's order but for ``max_grad_norm``, which comes second among the sweepable fields
(the order validation's messages list them in).

``hparams_of`` builds the learner's ``rlcore.hparams.HParams`` from a config.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from rlcore.hparams import HParams

BOOL, INT, NUMBER, STR, TUPLE, CONFIG = "bool", "int", "number", "str", "tuple", "config"


@dataclasses.dataclass(frozen=True)
class Field:
    """One config field's facts (see the module docstring)."""

    name: str
    kind: str
    sweepable: bool = False
    resumable: bool = False
    one_device: Any = None


FIELDS = (
    Field("seed", INT),
    Field("env_id", STR),
    Field("algorithm", STR),
    Field("network", STR),
    Field("total_env_steps", INT),
    Field("num_envs", INT),
    Field("num_steps", INT),
    Field("learning_rate", NUMBER, sweepable=True),
    Field("max_grad_norm", NUMBER, sweepable=True),
    Field("anneal_lr", BOOL),
    Field("optimizer", STR),
    Field("adam_eps", NUMBER, sweepable=True),
    Field("rmsprop_decay", NUMBER, sweepable=True),
    Field("rmsprop_eps", NUMBER, sweepable=True),
    Field("num_epochs", INT),
    Field("num_minibatches", INT),
    Field("update_unroll", INT),
    Field("gamma", NUMBER, sweepable=True),
    Field("gae_lambda", NUMBER, sweepable=True),
    Field("clip_eps", NUMBER, sweepable=True),
    Field("clip_vloss", BOOL),
    Field("norm_adv", BOOL),
    Field("vf_coef", NUMBER, sweepable=True),
    Field("ent_coef", NUMBER, sweepable=True),
    Field("vtrace_lambda", NUMBER, sweepable=True),
    Field("clip_rho", NUMBER, sweepable=True),
    Field("clip_pg_rho", NUMBER, sweepable=True),
    Field("log_every", INT, resumable=True),
    Field("checkpoint_every", INT, resumable=True),
    Field("eval_every", INT, resumable=True),
    Field("eval_episodes", INT, resumable=True),
    Field("eval_max_steps", INT, resumable=True),
    Field("wandb_project", STR, resumable=True),
    Field("wandb_mode", STR, resumable=True),
    Field("updates_per_call", INT, resumable=True),
    Field("num_devices", INT, resumable=True, one_device=1),
    Field("num_seeds", INT),
    Field("xla_cpu_multi_thread_eigen", BOOL),
    Field("actor_device_ids", TUPLE, resumable=True, one_device=(0,)),
    Field("learner_device_ids", TUPLE, resumable=True, one_device=(0,)),
    Field("num_actor_threads", INT, resumable=True, one_device=1),
    Field("env_threads", INT, resumable=True),
    Field("pipeline", STR),
    Field("queue_timeout_s", NUMBER, resumable=True),
    Field("coordinator_address", STR, resumable=True, one_device=""),
    Field("num_processes", INT, one_device=1),
    Field("process_id", INT, resumable=True, one_device=0),
    Field("heartbeat_timeout_s", INT, resumable=True),
    Field("debug", CONFIG, resumable=True),
    Field("debug.actor_jitter_ms", INT, resumable=True),
    Field("debug.fail_actor_at_update", INT, resumable=True),
    Field("debug.nan_at_update", INT, resumable=True),
    Field("sweep", CONFIG),
)
ROWS = {f.name: f for f in FIELDS}

# Views of the table, in its order.
BOOL_FIELDS = tuple(f.name for f in FIELDS if f.kind == BOOL)
DEBUG_FIELDS = tuple(f.name.split(".", 1)[1] for f in FIELDS if f.name.startswith("debug."))
SWEEPABLE = tuple(f.name for f in FIELDS if f.sweepable)
# Top-level fields only: the resume check compares config.json's top-level values.
RESUMABLE_CHANGES = frozenset(f.name for f in FIELDS if f.resumable and "." not in f.name)
ONE_DEVICE = {f.name: f.one_device for f in FIELDS if f.one_device is not None}


def hparams_of(config, values: Mapping[str, Any] | None = None) -> HParams:
    """The ``HParams`` of ``config``, with ``values`` (e.g. one sweep variant's) replacing
    the fields of the same name; every value as given (Python numbers stay Python numbers,
    constants of the compiled program)."""
    values = values or {}
    return HParams(**{f.name: values[f.name] if f.name in values else config[f.name]
                      for f in dataclasses.fields(HParams)})
