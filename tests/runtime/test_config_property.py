"""Property test of config validation (docs/design.md, "Validation"): random values, of the
wrong type or out of range, in one to three fields of a small Anakin or Sebulba CartPole config.

Every draw ends in one of two ways: ``prepare`` raises ``ConfigError("<field>: ...")``
naming a field of the config (``sweep.<field>``, ``debug.<field>`` for the sub-configs),
or the config, its budget set to one update, trains that update without an exception (the
debug knobs that inject a failure at update 0 fail as designed). Any other exception is a
validation bug; the ``@example`` rows are the ones this test found, fixed in
``runtime.config.validation`` and the modes' ``check_fields``.

Values are drawn to be refused: wrong types (str, list, dict, None, bool where a number is
expected), NaN, +-inf, huge ints (2**63, 10**30, 10**400), negatives, values past float32,
empty or bad tuples. The few that pass (fields the mode does not read, values that are
fine) train one update of a tiny config; most of them share a compile through the test
session's persistent compilation cache (tests/conftest.py), so the file stays short.

Values are stored as given (``set_field``): the command-line parser refuses a value of the
wrong type before validation (``runtime.commands.train_flags.parse_flags``, exit 2), so wrong types
reach ``validate`` only from Python (a config built from a dict, or with ``ignore_type``), which
is what this tests.
"""

from __future__ import annotations

import math
import re
import time

import jax
import ml_collections
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from anakin import train as anakin_train
from configs import cartpole_ppo, cartpole_ppo_sebulba
from rlcore.errors import ConfigError
from sebulba import train as sebulba_train

TRAINERS = {"anakin": anakin_train, "sebulba": sebulba_train}


def anakin_config() -> ml_collections.ConfigDict:
    """configs/cartpole_ppo.py at its smallest: 2 envs x 4 steps, one update per call."""
    c = cartpole_ppo.get_config()
    c.num_envs, c.num_steps, c.num_minibatches, c.num_epochs = 2, 4, 1, 1
    c.updates_per_call, c.log_every, c.num_devices = 1, 1, 1
    c.total_env_steps = c.num_envs * c.num_steps
    return c


def sebulba_config() -> ml_collections.ConfigDict:
    """configs/cartpole_ppo_sebulba.py at its smallest: 2 threads x 2 envs x 4 steps."""
    c = cartpole_ppo_sebulba.get_config()
    c.num_envs, c.num_steps, c.num_minibatches, c.num_epochs = 4, 4, 1, 1
    c.log_every = 1
    c.total_env_steps = c.num_envs * c.num_steps
    return c


BASE = {"anakin": anakin_config, "sebulba": sebulba_config}
_DEFAULTS = anakin_config()
SUBCONFIGS = ("debug", "sweep", "algo", "pbt", "env_kwargs", "replay")


def _kind(value) -> str:
    """The kind of a field, from its default value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, tuple):
        return "tuple"
    raise AssertionError(f"no kind for {value!r}")


# Every field, dotted, with its kind: top level, the debug knobs, the pbt fields, the sweep
# entries, and the sub-configs as a whole.
FIELDS = {
    **{k: _kind(v) for k, v in _DEFAULTS.items() if k not in SUBCONFIGS},
    **{f"debug.{k}": _kind(v) for k, v in _DEFAULTS.debug.items()},
    **{f"pbt.{k}": _kind(v) for k, v in _DEFAULTS.pbt.items()},
    **{f"sweep.{k}": "sweep_entry" for k in _DEFAULTS.sweep},
    "debug": "subconfig", "sweep": "subconfig", "algo": "subconfig", "pbt": "subconfig",
}
# Names a ConfigError may start with.
FIELD_NAMES = set(FIELDS)
FLOAT32_MAX = 3.4028234663852886e38

# --- values --------------------------------------------------------------------------

JUNK = [None, "", "abc", "nan", "1", [1], [], {"a": 1}, {}, (), True, False]
HUGE = [2**31, 2**63, -(2**63), 10**30, 10**400]
FLOATS = [math.nan, math.inf, -math.inf, 1e39, -1e39, -1.0, -0.5, -1e-300]
INTS = [-1, 0, *HUGE]
STRINGS = ["", "abc", "a2c", "CartPole-v2", "Breakout-v5", "envpool:Breakout-MinAtar",
           "gymnax:", ":", "own:", "sebulba", "x" * 300]
TUPLES = [(), (10**30,), (2**63,), (-1,), (4,), (0, 0), (0.0,), (True,), ("0",), (None,),
          (0, 2**63), [0], "0"]
SUBCONFIG_VALUES = [None, 5, "x", [], {}, {"a": 5}, {"gamma": (0.5, "a")},
                    {"actor_jitter_ms": 1.5}]

# Out of range for every number field (0 and small ints are in range for some int fields).
numbers = st.one_of(
    st.sampled_from(HUGE + FLOATS),
    st.integers(max_value=-1),
    st.integers(min_value=2**31),
    st.floats(max_value=-1e-300),               # negative: no float field takes one
    st.floats(min_value=3.5e38),                # past float32 (or inf)
)
int_numbers = st.one_of(numbers, st.sampled_from(INTS))
wrong_type = st.sampled_from(JUNK)


def values_for(field: str) -> st.SearchStrategy:
    """Values to try in ``field``: of the wrong type, or numbers out of range."""
    kind = FIELDS[field]
    if kind == "int":
        return st.one_of(int_numbers, wrong_type)
    if kind == "float":
        return st.one_of(numbers, wrong_type)
    if kind == "bool":
        return st.one_of(st.sampled_from([0, 1, "true", "False", "", None, [], 1.0]), numbers)
    if kind == "str":
        strings = STRINGS
        if field == "wandb_project":  # a project would start wandb: only ''
            strings = [""]
        if field == "coordinator_address":  # host:port could join a runtime: never one
            strings = [s for s in STRINGS if ":" not in s]
        not_strings = st.sampled_from([v for v in JUNK if not isinstance(v, str)])
        return st.one_of(st.sampled_from(strings), numbers, not_strings)
    if kind == "tuple":
        return st.one_of(st.sampled_from(TUPLES), numbers, wrong_type)
    if kind == "sweep_entry":
        bad = st.one_of(numbers, st.sampled_from(["a", None, True, [0.5]]))
        return st.one_of(st.tuples(bad), st.tuples(st.just(0.5), bad), numbers, wrong_type)
    return st.sampled_from(SUBCONFIG_VALUES)


@st.composite
def draws(draw):
    """``(mode, {dotted field: value})`` with one to three fields."""
    mode = draw(st.sampled_from(sorted(BASE)))
    fields = draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=3,
                           unique=True))
    return mode, {f: draw(values_for(f)) for f in fields}


def set_field(config, path: str, value) -> None:
    """Sets dotted ``path`` to ``value`` as it is, whatever the field's declared type.

    ``ignore_type`` alone still casts (an int or bool into a float field becomes a float,
    10**400 overflows, a list in a tuple field becomes a tuple); through None first the
    value is stored as given, as in a ConfigDict built from a dict.
    """
    *parents, leaf = path.split(".")
    for key in parents:
        config = config[key]
        if not isinstance(config, ml_collections.ConfigDict):  # replaced by an earlier draw
            return
    with config.ignore_type():
        config[leaf] = None
        config[leaf] = value


def make(mode: str, values: dict):
    """The mode's small config with ``values`` set (sub-configs first)."""
    config = BASE[mode]()
    for path in sorted(values, key=lambda p: "." in p):
        set_field(config, path, values[path])
    return config


def designed_failure(mode: str, config):
    """The exception a debug knob injects into update 0 of this config, or None."""
    debug = config.debug
    if debug.nan_at_update == 0:
        return FloatingPointError  # poisoned rewards: non-finite loss in update 1
    if mode == "sebulba" and debug.fail_actor_at_update == 0:
        return RuntimeError  # the actor thread raises; the learner re-raises
    return None


def check(mode: str, values: dict) -> None:
    """The property: a ConfigError that names a field, or one update without error."""
    config = make(mode, values)
    trainer = TRAINERS[mode]
    try:
        trainer.prepare(config)
    except ConfigError as e:
        found = re.match(r"^([\w.]+): \S", str(e))
        named = found and (found.group(1) in FIELD_NAMES  # or an own hyperparameter's
                           or found.group(1).startswith(("algo.", "sweep.algo.")))
        assert named, f"names no field: {e}"
        return
    # Valid: train exactly one update.
    config.total_env_steps = config.num_envs * config.num_steps
    failure = designed_failure(mode, config)
    if failure is not None:
        with pytest.raises(failure):
            trainer.train(config, None)
        return
    rows = trainer.train(config, None)
    assert [r["update"] for r in rows] == [1]


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(draws())
# The bugs this test found: what each did before the fix.
@example(("anakin", {"algorithm": [1]}))                  # unhashable: TypeError
@example(("sebulba", {"pipeline": {"a": 1}}))             # unhashable: TypeError
@example(("anakin", {"env_id": 5}))                       # not a str: AttributeError
@example(("anakin", {"learning_rate": 10**400}))          # isfinite: OverflowError
@example(("anakin", {"adam_eps": 2**31}))                 # int32 argument: OverflowError
@example(("anakin", {"vf_coef": 1e39}))                   # inf in float32: NaN loss
@example(("anakin", {"updates_per_call": 2**63}))         # int32 scan: OverflowError
@example(("anakin", {"debug.nan_at_update": 10**30}))     # int32 compare: OverflowError
@example(("anakin", {"eval_every": 2**63}))               # int32 modulo: OverflowError
@example(("anakin", {"seed": None, "num_seeds": 2}))      # None + 2: TypeError
@example(("anakin", {"sweep.gamma": 5}))                  # len(5): TypeError
@example(("sebulba", {"sweep": 5}))                       # 5.items(): AttributeError
@example(("sebulba", {"debug": None}))                    # None[...]: TypeError
@example(("anakin", {"sweep.vf_coef": (10**400,)}))       # float(10**400): OverflowError
@example(("anakin", {"sweep.clip_eps": (2**31,)}))        # int32 argument: OverflowError
@example(("anakin", {"anneal_lr": "no"}))                 # trained silently ("no" is true)
@example(("sebulba", {"env_threads": 10**30}))            # EnvPool num_threads: TypeError
@example(("sebulba", {"debug.actor_jitter_ms": 10**30}))  # sleep(1e27): OverflowError
@example(("sebulba", {"num_envs": ""}))                   # "num_envs:  envs do not split"
@example(("sebulba", {"eval_every": 1, "eval_episodes": 2**40}))  # EnvPool: TypeError
@example(("anakin", {"eval_every": 1, "eval_max_steps": 2**63}))  # int32: OverflowError
def test_random_values_are_refused_naming_a_field_or_train(draw):
    mode, values = draw
    check(mode, values)


def test_budget_of_more_updates_than_int32_is_refused():
    """The property trains one update, whatever ``total_env_steps`` was drawn; a budget the
    trainers could not count (their update counters are int32) is refused up front."""
    for mode in BASE:
        config = make(mode, {"total_env_steps": 2**62})
        with pytest.raises(ConfigError, match=r"^total_env_steps: .* updates; at most 2\*\*31"):
            TRAINERS[mode].prepare(config)


# --- refusal is cheap ------------------------------------------------------------------

REFUSED = [
    ("anakin", {"learning_rate": math.nan}),
    ("anakin", {"num_envs": 10**30}),
    ("anakin", {"network": "nature_cnn"}),  # refused after the env's spec is built
    ("sebulba", {"actor_device_ids": ()}),
    ("sebulba", {"sweep.gamma": (0.9, 0.99)}),
    ("sebulba", {"queue_timeout_s": "soon"}),
]


@pytest.mark.parametrize("mode, values", REFUSED)
def test_prepare_refuses_quickly_without_compiling(mode, values):
    """A refused config costs no XLA compile and well under a second."""
    compiles = []

    def listener(event, duration, **kwargs):
        if event.startswith("/jax/core/compile/backend_compile"):
            compiles.append(event)

    TRAINERS[mode].prepare(BASE[mode]())  # warm: env registries and specs loaded once
    config = make(mode, values)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        t0 = time.perf_counter()
        with pytest.raises(ConfigError):
            TRAINERS[mode].prepare(config)
        seconds = time.perf_counter() - t0
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiles == []
    assert seconds < 1.0
