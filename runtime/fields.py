"""What the code knows about each config field, in one table; and the learner's record.

``configs/base.py`` holds every field's default; ``FIELDS`` (parsed from the text table
``_TABLE``) has one row per field of it (tests/runtime/test_fields.py checks both ways, and
that each row's kind is the type of base's default). A row says:

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

import ast
import dataclasses
from typing import Any, Mapping

from rlcore.hparams import HParams

BOOL, INT, NUMBER, STR, TUPLE, CONFIG = KINDS = (
    "bool", "int", "number", "str", "tuple", "config")


@dataclasses.dataclass(frozen=True)
class Field:
    """One config field's facts (see the module docstring)."""

    name: str
    kind: str
    sweepable: bool
    resumable: bool
    one_device: Any


# One row per field: name, kind, sweepable, resumable, the one-device value (a Python
# literal; "-": not a layout field).
_TABLE = """
field                       kind    sweepable  resumable  one_device
seed                        int     -          -          -
env_id                      str     -          -          -
algorithm                   str     -          -          -
network                     str     -          -          -
recurrent                   str     -          -          -
recurrent_hidden            int     -          -          -
total_env_steps             int     -          -          -
num_envs                    int     -          -          -
num_steps                   int     -          -          -
learning_rate               number  yes        -          -
max_grad_norm               number  yes        -          -
anneal_lr                   bool    -          -          -
optimizer                   str     -          -          -
adam_eps                    number  yes        -          -
rmsprop_decay               number  yes        -          -
rmsprop_eps                 number  yes        -          -
num_epochs                  int     -          -          -
num_minibatches             int     -          -          -
minibatch                   str     -          -          -
update_unroll               int     -          -          -
microbatches                int     -          -          -
gamma                       number  yes        -          -
gae_lambda                  number  yes        -          -
clip_eps                    number  yes        -          -
clip_vloss                  bool    -          -          -
norm_adv                    bool    -          -          -
vf_coef                     number  yes        -          -
ent_coef                    number  yes        -          -
vtrace_lambda               number  yes        -          -
clip_rho                    number  yes        -          -
clip_pg_rho                 number  yes        -          -
bootstrap_time_limits       bool    -          -          -
normalize_obs               bool    -          -          -
normalize_obs_clip          number  -          -          -
normalize_reward            bool    -          -          -
normalize_reward_clip       number  -          -          -
log_every                   int     -          yes        -
checkpoint_every            int     -          yes        -
eval_every                  int     -          yes        -
eval_episodes               int     -          yes        -
eval_max_steps              int     -          yes        -
wandb_project               str     -          yes        -
wandb_mode                  str     -          yes        -
updates_per_call            int     -          yes        -
num_devices                 int     -          yes        1
num_seeds                   int     -          -          -
xla_cpu_multi_thread_eigen  bool    -          -          -
xla_cpu_concurrency_scheduler bool  -          yes        -
cpu_threads                 int     -          yes        -
deterministic               bool    -          -          -
actor_device_ids            tuple   -          yes        (0,)
learner_device_ids          tuple   -          yes        (0,)
num_actor_threads           int     -          yes        1
env_threads                 int     -          yes        -
pipeline                    str     -          -          -
queue_timeout_s             number  -          yes        -
coordinator_address         str     -          yes        ''
num_processes               int     -          -          1
process_id                  int     -          yes        0
heartbeat_timeout_s         int     -          yes        -
debug                       config  -          yes        -
debug.actor_jitter_ms       int     -          yes        -
debug.fail_actor_at_update  int     -          yes        -
debug.nan_at_update         int     -          yes        -
debug.learner_delay_ms      int     -          yes        -
sweep                       config  -          -          -
"""


def _parse(table: str) -> tuple[Field, ...]:
    """The rows of ``table`` (after its header line)."""
    rows = []
    for line in table.strip().splitlines()[1:]:
        name, kind, sweepable, resumable, one_device = line.split(maxsplit=4)
        assert kind in KINDS and {sweepable, resumable} <= {"yes", "-"}, line
        rows.append(Field(name, kind, sweepable == "yes", resumable == "yes",
                          None if one_device == "-" else ast.literal_eval(one_device)))
    return tuple(rows)


FIELDS = _parse(_TABLE)

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
