"""Every config field's facts, one record each (``Field``), and the learner's record.

``FIELDS`` holds one ``Field`` per field of a config: its name (``<sub>.<field>`` for the
fields of the ``debug`` and ``pbt`` sub-configs), default, meaning, the rule its values follow
(``rule``, one of the ``Rule`` records below), whether it is sweepable, whether a resumed
run may change it, its one-device value, and which check reads its rule (``checked_in``).
Everything else reads them:

- ``configs/base.py`` builds its defaults from them (``default_config``);
- validation (``runtime.config.validation``) checks each ``COMMON`` field by its rule (and each
  ``DISTRIBUTED`` one before ``jax.distributed`` starts), then the cross-field rules; an
  ``ANAKIN`` or ``SEBULBA`` field is checked by that mode's ``check_fields``, in the words of
  its rule (tests/runtime/test_fields.py compares them);
- sweeps read ``SWEEPABLE``: a loss or optimizer scalar, used only in arithmetic, so an
  agent's value may be a traced one;
- the resume check reads ``RESUMABLE_CHANGES``: fields that alter neither the data nor the
  math;
- the one-device restore (``runtime.commands.evaluation.one_device_config``) reads ``ONE_DEVICE``;
- ``docs/configuration.md`` is this module's page (``python -m runtime.config.fields``).

Records are in base.py's groups and order but for ``max_grad_norm``, which comes second
among the sweepable fields (the order validation's messages list them in). See
docs/design.md, "Config fields"; docs/design.md, "Validation".

``hparams_of`` builds the learner's ``rlcore.hparams.HParams`` from a config.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Mapping

import ml_collections

from rlcore.algorithms import REGISTRY as ALGORITHMS
from rlcore.hparams import HParams
from rlcore.networks import CORES, NETWORKS
from rlcore.optim import OPTIMIZERS
from rlcore.replay import ReplaySettings
from rlcore.seeding import MAX_EVAL_ENVS

BOOL, INT, NUMBER, STR, TUPLE, CONFIG = KINDS = (
    "bool", "int", "number", "str", "tuple", "config")
# Which check reads a field's rule: the one both modes share, the multi-process one (before
# ``jax.distributed`` starts), or one architecture's own (``ModeChecks.check_fields``).
COMMON, DISTRIBUTED, ANAKIN, SEBULBA = "common", "distributed", "anakin", "sebulba"

# policy_lag's bound: a Sebulba actor device holds lag + 2 params versions, an Anakin train
# state lag copies of the params (docs/design.md, "Pipelines and staleness").
MAX_POLICY_LAG = 8
MAX_SEED = 2**30  # EnvPool seeds are int32: seed + global env index must fit
# Counts, sizes and update indices enter the compiled programs (and EnvPool) as int32.
MAX_INT32 = 2**31 - 1
# The env-step budget is counted in Python; int64 keeps it printable and comparable.
MAX_INT64 = 2**63 - 1
_BOUNDS = {MAX_INT32: "2**31 - 1", MAX_INT64: "2**63 - 1"}  # as the docs page writes them


@dataclasses.dataclass(frozen=True)
class Ints:
    """Integers in ``[lo, hi]`` but ``excluded``: refused with ``"must be <phrase>, got x"``;
    above ``hi`` with ``"must be at most <hi>"`` unless ``phrase`` states ``hi``
    (``hi_in_phrase``); above ``cap`` with ``"must be at most <cap> (<cap_reason>)"``."""

    lo: int
    phrase: str
    hi: int = MAX_INT32
    hi_in_phrase: bool = False
    excluded: tuple[int, ...] = ()
    cap: int | None = None
    cap_reason: str = ""

    def text(self) -> str:
        """What values the rule accepts, for the docs page (as every ``text``)."""
        if self.cap is not None:
            return f"{self.phrase}, at most {self.cap}"
        if self.hi_in_phrase:
            return self.phrase
        return f"{self.phrase}, at most {_BOUNDS.get(self.hi, self.hi)}"


POSITIVE = Ints(1, "a positive integer")
NATURAL = Ints(0, "an integer >= 0")


class _Phrase:
    """A rule whose page text is one fixed phrase, ``PHRASE``."""

    PHRASE = ""

    def text(self) -> str:
        return self.PHRASE


@dataclasses.dataclass(frozen=True)
class Int32(_Phrase):
    """Any int32 integer."""

    PHRASE = "an integer within +-(2**31 - 1)"


@dataclasses.dataclass(frozen=True)
class Number:
    """A finite int or float that float32 holds, in ``[lo, hi]`` where given; with
    ``above_zero`` (a message, ``{value}`` filled in) also above 0."""

    lo: float | None = None
    hi: float | None = None
    above_zero: str = ""

    def text(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"a number in [{self.lo:g}, {self.hi:g}]"
        if self.above_zero:
            return "a number > 0"
        return "a number" + (f" >= {self.lo:g}" if self.lo is not None else "")


ABOVE_ZERO = Number(above_zero="must be > 0, got {value}")


@dataclasses.dataclass(frozen=True)
class Choice:
    """One of the keys of ``options`` (a registry, read when checked: a name added to it is
    a choice); with ``imports``, or an import path ``PACKAGE.MODULE:NAME`` to the user's own
    (``rlcore.imports``, docs/extending.md)."""

    options: Mapping[str, Any] | tuple[str, ...]
    imports: bool = False

    def text(self) -> str:
        own = ", or an import path PACKAGE.MODULE:NAME" if self.imports else ""
        return "one of " + ", ".join(self.options) + own


@dataclasses.dataclass(frozen=True)
class Flag(_Phrase):
    """True or false."""

    PHRASE = "true or false"


@dataclasses.dataclass(frozen=True)
class Text(_Phrase):
    """A string."""

    PHRASE = "a string"


@dataclasses.dataclass(frozen=True)
class Checked:
    """A rule that reads more than the field (another field, the mode, the devices): a
    cross-field rule of ``runtime.config.validation`` or the mode's check states it; ``says`` is its
    summary."""

    says: str

    def text(self) -> str:
        return self.says


Rule = Ints | Int32 | Number | Choice | Flag | Text | Checked


class _SubConfig:
    """The default of a sub-config's row (its fields have rows of their own)."""

    def __repr__(self) -> str:
        return "a sub-config"


SUBCONFIG = _SubConfig()


@dataclasses.dataclass(frozen=True)
class Given:
    """The default of a row whose value ``configs/base.py`` gives ``default_config`` (the
    default env: env ids belong to envs/ and configs/, not runtime/)."""

    kind: str

    def __repr__(self) -> str:
        return "given by configs/base.py"


@dataclasses.dataclass(frozen=True)
class Field:
    """One config field's facts.

    Attributes:
      name: the field, ``<sub>.<field>`` for a sub-config's.
      default: its value in ``configs/base.py`` (``SUBCONFIG`` for a sub-config, ``Given``
        for one that base.py gives).
      meaning: one sentence.
      rule: the values it takes (its validation rule).
      sweepable: may vary between agents of one program (``config.sweep``).
      resumable: a resumed run may change it.
      one_device: for a device-layout field, its value in a plain restore in one process on
        local device 0; None for other fields.
      checked_in: which check reads ``rule`` (``COMMON``, ``DISTRIBUTED``, ``ANAKIN``,
        ``SEBULBA``).
      group: the heading it is listed under (base.py's groups).
    """

    name: str
    default: Any
    meaning: str
    rule: Rule
    sweepable: bool = False
    resumable: bool = False
    one_device: Any = None
    checked_in: str = COMMON
    group: str = ""

    @property
    def kind(self) -> str:
        """``bool``, ``int``, ``number`` (int or float; the default is a float), ``str``,
        ``tuple`` or ``config`` (a sub-config)."""
        if self.default is SUBCONFIG:
            return CONFIG
        if isinstance(self.default, Given):
            return self.default.kind
        return {bool: BOOL, int: INT, float: NUMBER, str: STR, tuple: TUPLE}[type(self.default)]


def _group(heading: str, *fields: Field) -> tuple[Field, ...]:
    """``fields`` listed under ``heading``."""
    return tuple(dataclasses.replace(f, group=heading) for f in fields)


F = Field
UNIT = Number(0.0, 1.0)
NON_NEGATIVE = Number(lo=0.0)
SWEEP_NUMBER = dict(rule=NON_NEGATIVE, sweepable=True)

FIELDS: tuple[Field, ...] = (
    *_group(
        "Run, network and update",
        F("seed", 0, "Every key and env seed derives from this.",
          Ints(0, f"an integer in [0, {MAX_SEED})", hi=MAX_SEED - 1, hi_in_phrase=True)),
        F("env_id", Given(STR), "The env: a bare id (Anakin: gymnax's or our own; Sebulba: "
          "EnvPool's where it has it), or one that names its library (`gymnax:<id>`, "
          "`envpool:<id>`, `own:<name>`).",
          Checked("an env id the mode runs (close matches are suggested)")),
        F("env_kwargs", SUBCONFIG, "The env's own arguments, `env_kwargs.NAME`, passed to its "
          "class or factory, or to its suite's constructor (gymnax's env params, ...); empty: "
          "none (docs/extending.md, \"Your own env\").",
          Checked("arguments the env's builder takes, by name; a numeric one sweepable "
                  "(`sweep.env_kwargs.NAME`) where the env builds with it traced")),
        F("algorithm", "ppo", "The learning algorithm: a built-in one, or your own "
          "(docs/extending.md).", Choice(ALGORITHMS, imports=True)),
        F("algo", SUBCONFIG, "The algorithm's own hyperparameters, `algo.NAME` (PPO and "
          "IMPALA have none: theirs are the fields below; PQN's: docs/algorithms.md); an "
          "unset one is its default.",
          Checked("the algorithm's own hyperparameters, each of its default's type")),
        F("network", "mlp", "The network's torso: a built-in one, or your own flax module "
          "(docs/extending.md).", Choice(NETWORKS, imports=True)),
        F("recurrent", "none", "A recurrent core after the torso, reset to zeros at every "
          "episode's first step (none: feed-forward).", Choice(CORES)),
        F("recurrent_hidden", 128, "Units of the recurrent core.", POSITIVE),
        F("layer_norm", False, "LayerNorm before each hidden activation of a built-in "
          "network's torso (PQN's networks; impala_resnet: its dense layer only).", Flag()),
        F("total_env_steps", 500_000, "Env-step budget over all envs of all processes.",
          Ints(1, "a positive integer", hi=MAX_INT64)),
        F("num_envs", 4, "Envs in all, over all processes, threads and devices.", POSITIVE),
        F("num_steps", 128, "Rollout length T.", POSITIVE),
        F("learning_rate", 2.5e-4, "Initial learning rate.",
          Number(lo=0.0, above_zero="must be > 0"), sweepable=True),
        F("max_grad_norm", 0.5, "Global-norm gradient clip; 0 disables it.", **SWEEP_NUMBER),
        F("anneal_lr", True, "Decay the learning rate linearly to 0 over the run.", Flag()),
        F("optimizer", "adam", "The optimizer (radam: rectified Adam, PQN's; rmsprop: torch's "
          "definition).",
          Choice(OPTIMIZERS)),
        F("adam_eps", 1e-5, "Adam's and RAdam's epsilon.", **SWEEP_NUMBER),
        F("rmsprop_decay", 0.99, "Torch RMSProp alpha.", UNIT, sweepable=True),
        F("rmsprop_eps", 0.01, "RMSProp epsilon, outside the square root (torch).",
          **SWEEP_NUMBER),
        F("num_epochs", 4, "Passes over each rollout.", POSITIVE),
        F("num_minibatches", 4, "Minibatches per epoch.", POSITIVE),
        F("minibatch_kind", "auto", "What a minibatch holds: auto (the algorithm's own: PPO "
          "and PQN samples, IMPALA sequences), samples (single (step, env) samples) or sequences "
          "(whole envs).", Checked("auto, or one of the algorithm's kinds (ppo, pqn: "
                                   "samples, sequences; impala: sequences; a recurrent "
                                   "agent: sequences)")),
        F("update_unroll", 1, "Scan unroll of the gradient steps; 0 = fully unrolled; -1 = "
          "auto: fully unrolled on GPU/TPU, on CPU the most unroll whose compiled update fits "
          "the host's RAM by XLA's figure (runtime.config.plan.update_plan).",
          Ints(-1, "an integer >= -1 (-1: auto, 0: fully unrolled)")),
        F("microbatches", 1, "Chunks each minibatch's gradient is accumulated over (a rolled "
          "loop: 1/k of the activations live); -1 = auto: the fewest whose compiled update "
          "fits the device by XLA's figure (runtime.config.plan.update_plan).",
          Ints(-1, "an integer >= 1, or -1 (auto)", excluded=(0,))),
        F("policy_lag", -1, "Updates the acting params trail the learner's: rollout r acts "
          "with the params after update max(r - lag, start); -1 = the architecture's own "
          "(Anakin 0; Sebulba its pipeline's: sync 0, cleanba 1, async none).",
          Ints(-1, f"an integer in [-1, {MAX_POLICY_LAG}] (-1: the architecture's own)",
               hi=MAX_POLICY_LAG, hi_in_phrase=True)),
    ),
    *_group(
        "Losses",
        F("gamma", 0.99, "Discount.", UNIT, sweepable=True),
        F("gae_lambda", 0.95, "PPO's GAE lambda; PQN's Q(lambda) lambda.", UNIT, sweepable=True),
        F("clip_eps", 0.2, "PPO's ratio clip.", **SWEEP_NUMBER),
        F("clip_vloss", False, "PPO value clipping.", Flag()),
        F("norm_adv", True, "PPO's per-minibatch advantage normalisation.", Flag()),
        F("vf_coef", 0.5, "Value-loss coefficient.", **SWEEP_NUMBER),
        F("ent_coef", 0.01, "Entropy bonus.", **SWEEP_NUMBER),
        F("vtrace_lambda", 1.0, "IMPALA's V-trace lambda.", UNIT, sweepable=True),
        F("clip_rho", 1.0, "V-trace's importance-weight clip of the value targets (IMPALA; "
          "PPO with staleness_correction=vtrace).",
          **SWEEP_NUMBER),
        F("clip_pg_rho", 1.0, "IMPALA's importance-weight clip of the policy gradient.",
          **SWEEP_NUMBER),
        F("staleness_correction", "none", "A correction for rollouts collected by params "
          "older than the learner's (docs/algorithms.md, \"Corrections for stale rollouts\"): "
          "decoupled (PPO's ratio clipped against the update's starting params, a truncated "
          "importance weight), vtrace (PPO's advantages from V-trace), lr_scale (learning "
          "rate / (1 + policy lag)), filter (samples far from the behaviour policy dropped "
          "from PPO's policy term); impala takes none and lr_scale.",
          Checked("one of none, decoupled, vtrace, lr_scale, filter (impala: none, "
                  "lr_scale)")),
        F("decoupled_max_weight", 1.0, "staleness_correction=decoupled: truncation of the "
          "importance weight pi_prox / pi_behaviour.",
          ABOVE_ZERO),
        F("filter_threshold", 0.2, "staleness_correction=filter: a sample is dropped where "
          "|pi_prox / pi_behaviour - 1| exceeds this (0.2: PPO's default clip range).",
          ABOVE_ZERO),
        F("bootstrap_time_limits", True, "A time-limit cut's value target bootstraps on the "
          "value of the episode's final observation (false: on the cut step's own value).",
          Flag()),
    ),
    *_group(
        "Normalisation (CleanRL's; statistics in the train state, rlcore/normalize.py)",
        F("normalize_obs", False, "Normalise observations by their running mean and "
          "variance.", Flag()),
        F("normalize_obs_clip", 10.0, "Bound of a normalised observation.",
          ABOVE_ZERO),
        F("normalize_reward", False, "Scale rewards by the running std of a discounted "
          "return.", Flag()),
        F("normalize_reward_clip", 10.0, "Bound of a scaled reward.",
          ABOVE_ZERO),
    ),
    *_group(
        "Logging and checkpoints (in updates, or minutes where named)",
        F("log_every", 10, "A metrics line every this many updates.", POSITIVE,
          resumable=True),
        F("checkpoint_every", 0, "Checkpoint every this many updates; 0: only at the end and "
          "on signals.", NATURAL, resumable=True),
        F("checkpoint_every_minutes", 10.0, "Also checkpoint after the first update (Anakin: "
          "call) that ends this many minutes after the last checkpoint; 0: off.",
          NON_NEGATIVE, resumable=True),
    ),
    *_group(
        "Evaluation during training: greedy episodes on envs with seeds of their own",
        F("eval_every", 0, "Evaluate every this many updates; 0: off.",
          Ints(0, "an integer >= 0 (0: off)"), resumable=True),
        F("eval_episodes", 8, "Episodes per evaluation, over all devices.",
          Ints(1, "a positive integer", cap=MAX_EVAL_ENVS,
               cap_reason="host eval seeds stay int32"), resumable=True),
        F("eval_max_steps", 100_000, "Cap on an evaluation's env steps (episodes end "
          "sooner).", POSITIVE, resumable=True),
    ),
    *_group(
        "Weights & Biases (optional; metrics.jsonl and TensorBoard are always written)",
        F("wandb_project", "", "W&B project to log to; empty: off (wandb is not imported).",
          Text(), resumable=True),
        F("wandb_mode", "online", "online, or offline (no network; `wandb sync` later).",
          Choice(("online", "offline")), resumable=True),
    ),
    *_group(
        "Anakin",
        F("updates_per_call", 10, "Updates per compiled call (no Python per update).",
          POSITIVE, resumable=True, checked_in=ANAKIN),
        F("num_devices", 0, "Devices of the data mesh; 0 = every device of every process.",
          Checked("0, or 1 .. the devices of the run (0 in a multi-process run)"),
          resumable=True, one_device=1, checked_in=ANAKIN),
        F("num_seeds", 1, "Agents in one program, seeds seed .. seed + num_seeds - 1.",
          POSITIVE, checked_in=ANAKIN),
    ),
    *_group(
        "Host CPU runtime (read once, before JAX starts; no effect on GPU/TPU computations)",
        F("xla_cpu_multi_thread_eigen", True, "XLA CPU GEMMs on the intra-op pool (XLA's "
          "default).", Flag()),
        F("xla_cpu_concurrency_scheduler", True, "XLA CPU's concurrency-optimized scheduler "
          "(XLA's default); on, an unrolled update keeps every gradient step's buffers live "
          "at once (XLA's figure: runtime/config/plan.py).", Flag(), resumable=True),
        F("cpu_threads", 0, "XLA CPU intra-op threads (PJRT_NPROC); 0 = auto: 1 for an "
          "Anakin run on one device with <= 1024 env steps per update (all agents), else "
          "XLA's (one per core).", Ints(0, "an integer >= 0 (0: auto)"), resumable=True),
        F("deterministic", False, "GPU: XLA's deterministic ops (slower scatters, "
          "reductions).", Flag()),
    ),
    *_group(
        "Compilation (read before the first compile, on every platform)",
        F("compile_cache_dir", "", "JAX's persistent compilation cache, so a rerun, resume "
          "or evaluation of the same program loads it instead of compiling; empty: "
          "$JAX_COMPILATION_CACHE_DIR where set, else $XDG_CACHE_HOME/podracer-rl/jax "
          "(~/.cache/podracer-rl/jax); `off`: no cache. Trimmed to 2 GiB at each start (least "
          "recently used first); changes no result. A directory that cannot be used is "
          "refused where this field names it; else one line says so and the run goes on "
          "without a cache.", Text(), resumable=True),
    ),
    *_group(
        "Memory (docs/design.md, \"Memory plan\")",
        F("memory_check", True, "Refuse, in one line naming the field to change, a run whose "
          "compiled program needs more than 80% of a device's memory by XLA's own figure (or "
          "whose params, optimizer state and rollout observations do by their shapes alone, "
          "before compiling), or whose host buffers need more than 80% of the host's "
          "available RAM; false: say so and run anyway.", Flag(), resumable=True),
        F("device_memory_gib", 0.0, "Memory a device may use, GiB: the automatic "
          "update_unroll and microbatches fit it and memory_check checks against it; 0 = the "
          "device's own (GPU/TPU: its bytes_limit; CPU: the host's RAM over the devices the "
          "run uses).", NON_NEGATIVE),
    ),
    *_group(
        "Sebulba",
        F("actor_device_ids", (0,), "Local device indices the actors run on.",
          Checked("a non-empty tuple of distinct local device indices"), resumable=True,
          one_device=(0,), checked_in=SEBULBA),
        F("learner_device_ids", (0,), "Local devices that train (data-parallel).",
          Checked("a non-empty tuple of distinct local device indices"), resumable=True,
          one_device=(0,), checked_in=SEBULBA),
        F("num_actor_threads", 1, "Actor threads per actor device, each with its own "
          "EnvPool; 0 = from the machine, one process only (one per 4 host cores on a GPU or "
          "TPU, at most 4; one on a CPU device).",
          Ints(0, "an integer >= 0 (0: from the machine)"), resumable=True, one_device=1,
          checked_in=SEBULBA),
        F("env_threads", 0, "EnvPool worker threads per pool; 0 = EnvPool's default.",
          Ints(0, "an integer >= 0 (0: EnvPool's default)"), resumable=True,
          checked_in=SEBULBA),
        F("pipeline", "cleanba", "How actors and learner overlap.",
          Checked("one of sync, cleanba, async (sebulba.pipeline.PIPELINES)"),
          checked_in=SEBULBA),
        F("queue_timeout_s", 300.0, "Longest wait on a rollout or params hand-off (an "
          "actor's clock stops while the learner is busy).",
          Number(above_zero="must be > 0"), resumable=True, checked_in=SEBULBA),
    ),
    *_group(
        "Multi-process (jax.distributed); num_processes 1 = single process",
        F("coordinator_address", "", "host:port of process 0.",
          Checked("host:port (a port in 1..65535) when num_processes > 1"), resumable=True,
          one_device="", checked_in=DISTRIBUTED),
        F("num_processes", 1, "Processes of the run.", POSITIVE, one_device=1,
          checked_in=DISTRIBUTED),
        F("process_id", 0, "This process, 0 .. num_processes - 1.",
          Checked("an integer in [0, num_processes)"), resumable=True, one_device=0,
          checked_in=DISTRIBUTED),
        F("heartbeat_timeout_s", 20, "A peer silent this long aborts the run (dead host).",
          POSITIVE, resumable=True, checked_in=DISTRIBUTED),
    ),
    *_group(
        "Test knobs, off by default",
        F("debug", SUBCONFIG, "Fault injection for the tests.",
          Checked("a sub-config with every debug knob"), resumable=True),
        F("debug.actor_jitter_ms", 0, "Random extra sleep per actor step (own RNG; Sebulba: "
          ">= 0).", Int32(), resumable=True),
        F("debug.fail_actor_at_update", -1, "Raise in actor thread 0 before rollout k "
          "(0-based).", Int32(), resumable=True),
        F("debug.nan_at_update", -1, "Poison the rewards of rollout k (0-based; update k+1 "
          "fails).", Int32(), resumable=True),
        F("debug.learner_delay_ms", 0, "Updates (Anakin: calls) but the first (compiling) "
          "last longer by this.", Ints(0, "an integer >= 0"), resumable=True),
        F("debug.call_delay_ms", 0, "Anakin: every compiled call sleeps this long inside "
          "(a host callback: the loop cannot act meanwhile).", Ints(0, "an integer >= 0"),
          resumable=True),
    ),
    *_group(
        "Population-based training (Anakin): the agents tune their own hyperparameters",
        F("pbt", SUBCONFIG, "Population-based training over the agents of the program "
          "(num_seeds x sweep variants): docs/pbt.md.",
          Checked("a sub-config with every pbt field")),
        F("pbt.interval", 0, "Every this many updates the worst agents copy the best; 0: off.",
          Ints(0, "an integer >= 0 (0: off)")),
        F("pbt.fraction", 0.25, "The bottom fraction of the agents by `pbt.statistic` "
          "copies an agent of the top fraction (truncation selection).",
          Checked("a number in (0, 0.5] that leaves at least one agent to copy")),
        F("pbt.statistic", "return", "What ranks the agents: return (mean episode return "
          "since the previous exploit) or eval (the evaluation at that update).",
          Checked("return, or eval when eval_every divides pbt.interval")),
        F("pbt.explore", ("learning_rate",), "The hyperparameters an agent that copied "
          "changes (sweepable fields, or the algorithm's own floats as `algo.NAME`; "
          "`--config.pbt.explore=a,b`); the other swept ones it copies as they are.",
          Checked("a tuple of distinct sweepable fields or algo.NAME floats")),
        F("pbt.method", "perturb", "perturb (times one of `pbt.factors`) or resample (one of "
          "the field's sweep values, drawn uniformly).",
          Checked("perturb, or resample when every explored field is swept")),
        F("pbt.factors", (0.8, 1.25), "perturb: the factors, one drawn uniformly per field.",
          Checked("a non-empty tuple of numbers > 0")),
        F("pbt.low", (), "Lower bounds, one per `pbt.explore` field; empty: each field's "
          "smallest sweep value.", Checked("empty, or a number per explored field that the "
                                           "field takes")),
        F("pbt.high", (), "Upper bounds, one per `pbt.explore` field; empty: each field's "
          "largest sweep value.", Checked("empty, or a number per explored field that the "
                                          "field takes, >= its low bound")),
    ),
    *_group(
        "Replay (dqn): the buffer in the learner state",
        F("replay", SUBCONFIG, "The replay buffer of an algorithm that learns from one "
          "(dqn): a ring of each env's last transitions in the learner state, split over "
          "the devices with the envs and checkpointed with the run (docs/algorithms.md, "
          "\"DQN\"); the other algorithms ignore it.",
          Checked("a sub-config with every replay field")),
        F("replay.capacity", 10_000, "Transitions the buffer holds over all envs (each env "
          "keeps `capacity / num_envs` rows; dqn: a multiple of num_envs x num_steps).",
          POSITIVE),
        F("replay.warmup", 10_000, "Env steps collected before the first gradient step "
          "(CleanRL's `learning_starts`).", NATURAL),
        F("replay.ratio", 0.1, "Gradient steps per env step (CleanRL's 1 / "
          "`train_frequency`; dqn: whole gradient steps per update of num_envs x num_steps "
          "env steps).", Number(lo=0.0, above_zero="must be > 0")),
        F("replay.batch_size", 128, "Transitions per gradient step, an equal share from "
          "every env (dqn: a multiple of num_envs).", POSITIVE),
    ),
    *_group(
        "Sweeps",
        F("sweep", SUBCONFIG, "Anakin: values per number field, one agent each (x seeds); "
          "an empty tuple per number field by default.",
          Checked("a tuple of values per sweepable field")),
    ),
)

# Views of the records, in their order.
BY_NAME = {f.name: f for f in FIELDS}
BOOL_FIELDS = tuple(f.name for f in FIELDS if f.kind == BOOL)
DEBUG_FIELDS = tuple(f.name.split(".", 1)[1] for f in FIELDS if f.name.startswith("debug."))
PBT_FIELDS = tuple(f.name.split(".", 1)[1] for f in FIELDS if f.name.startswith("pbt."))
REPLAY_FIELDS = tuple(f.name.split(".", 1)[1] for f in FIELDS if f.name.startswith("replay."))
SWEEPABLE = tuple(f.name for f in FIELDS if f.sweepable)
# Tuples of names (``pbt.explore``): the command line's comma form splits there
# (``runtime.commands.train_flags``; docs/design.md, "Config fields").
NAME_TUPLES = tuple(f.name for f in FIELDS if f.kind == TUPLE and f.default
                    and all(isinstance(v, str) for v in f.default))
# Top-level fields only: the resume check compares config.json's top-level values.
RESUMABLE_CHANGES = frozenset(f.name for f in FIELDS if f.resumable and "." not in f.name)
ONE_DEVICE = {f.name: f.one_device for f in FIELDS if f.one_device is not None}

# Former names of fields: a config or a command line that sets one is refused in one line
# naming the new name (``renamed``); a saved run's config.json is read under the new names
# (``runtime.config.saved``), so an older run still resumes and evaluates.
RENAMED = {"minibatch": "minibatch_kind"}


def renamed(name: str) -> str:
    """The refusal of the former field name ``name`` (after ``field: `` in a config error)."""
    return f"renamed to {RENAMED[name]}"


def default_config(**given) -> ml_collections.ConfigDict:
    """Every field at its default (sub-configs as ``ConfigDict``s that their fields' rows
    fill), the ``Given`` ones at their ``given`` values; ``configs/base.py`` adds the
    ``sweep`` sub-config's values."""
    wanted = {f.name for f in FIELDS if isinstance(f.default, Given)}
    if set(given) != wanted:
        raise TypeError(f"default_config: give exactly {sorted(wanted)}, got {sorted(given)}")
    c = ml_collections.ConfigDict()
    for f in FIELDS:
        *parents, name = f.name.split(".")
        node = c
        for parent in parents:
            node = node[parent]
        value = given.get(f.name, f.default)
        node[name] = ml_collections.ConfigDict() if value is SUBCONFIG else value
    return c


ALGO = "algo."  # an own hyperparameter's name in a sweep variant and a metrics line
ENV_KWARGS = "env_kwargs."  # an env argument's name in a resume's refusal


def is_swept_key(key: str) -> bool:
    """Whether a key of a metrics line is a swept field's (what tells variants apart): a
    ``SWEEPABLE`` field or an algorithm's own hyperparameter (``algo.NAME``)."""
    return key in SWEEPABLE or key.startswith(ALGO)


def hparams_of(config, values: Mapping[str, Any] | None = None) -> HParams:
    """The ``HParams`` of ``config``, with ``values`` (e.g. one sweep variant's; an own
    hyperparameter's as ``algo.NAME``) replacing the fields of the same name; every value as
    given (Python numbers stay Python numbers, constants of the compiled program)."""
    values = values or {}
    algo = dict(config.get("algo") or {})
    algo.update({k[len(ALGO):]: v for k, v in values.items() if k.startswith(ALGO)})
    replay = config.get("replay") or {}
    own = {"algo": algo, "replay": ReplaySettings(**{k: replay[k] for k in REPLAY_FIELDS
                                                     if k in replay})}
    return HParams(**{f.name: own[f.name] if f.name in own else
                      values[f.name] if f.name in values else config[f.name]
                      for f in dataclasses.fields(HParams)})



# ----------------------------------------------------------------------------- the docs page

DOCS_PAGE = "docs/configuration.md"
_NOTES = {ANAKIN: "Anakin only", SEBULBA: "Sebulba only", DISTRIBUTED: "before the processes join"}


def _cell(text: str) -> str:
    """``text`` as a Markdown table cell."""
    return text.replace("|", "\\|")


def _default_text(field: Field, config) -> str:
    """The field's default in ``config`` (base.py's), as code."""
    value = config
    for part in field.name.split("."):
        value = value[part]
    if field.kind == CONFIG:
        return "a sub-config"
    return f"`{value!r}`" if not isinstance(value, str) else f'`"{value}"`'


def _notes(field: Field) -> str:
    """Sweepable, resumable, one-device value and which check reads the rule."""
    notes = ["sweepable"] * field.sweepable + ["resumable"] * field.resumable
    if field.one_device is not None:
        notes.append(f"one device: `{field.one_device!r}`")
    if field.checked_in in _NOTES:
        notes.append(_NOTES[field.checked_in])
    return ", ".join(notes)


_INTRO = f"""# Configuration fields

Generated by `python -m runtime.config.fields > {DOCS_PAGE}` from the field records of
`runtime/config/fields.py` (one `Field` per field: each default lives there, and
`configs/base.py` builds its config from them); do not edit it by hand
(tests/runtime/test_fields.py checks that it is the generator's output).

Every config starts from `configs/base.py`; a config file overrides some fields, the command
line any (`--config.<field>=<value>`, tuples as `--config.learner_device_ids=1,2,3`). A value
outside its field's values is refused before anything compiles, in one
`config error: <field>: ...` line with exit code 2 (docs/design.md, "Validation"); so is an
override of a field that no config has, and a former name ({{renamed}}; an older run's
`config.json` is read under the new names). Notes: *sweepable*: agents of one Anakin
program may differ in it (`--config.sweep.<field>=a,b`); *resumable*: a resumed run may
change it (docs/design.md, "Run directory"); *one device*: its value when a run is restored
on one device for evaluation; *Anakin only*, *Sebulba only*: checked by that architecture's
own checks (the other does not use it); *before the processes join*: checked before
`jax.distributed` starts.
"""


def page(config) -> str:
    """The Markdown page of every field, grouped as ``FIELDS`` is; ``config`` is
    ``configs/base.py``'s (this room imports no config)."""
    renamed_text = ", ".join(f"`{old}`, now `{new}`" for old, new in RENAMED.items())
    lines = [_INTRO.replace("{renamed}", renamed_text)]
    for group in dict.fromkeys(f.group for f in FIELDS):
        lines += [f"## {group}", "", "| field | type | default | values | meaning | notes |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| `{f.name}` | {f.kind} | {_cell(_default_text(f, config))} | "
                  f"{_cell(f.rule.text())} | {_cell(f.meaning)} | {_notes(f)} |"
                  for f in FIELDS if f.group == group]
        lines.append("")
    return "\n".join(lines)


def _load_config(path: str):
    """``get_config()`` of the config file at ``path``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


def main(argv: list[str] | None = None) -> None:
    """``python -m runtime.config.fields [--config=PATH]``: print the page
    (``docs/configuration.md``
    is this output for ``configs/base.py``)."""
    from runtime.process.arguments import OneLineParser

    p = OneLineParser(prog="python -m runtime.config.fields", description=(
        "Print the configuration page (docs/configuration.md): every config field with its "
        "type, default, values and meaning."))
    p.add_argument("--config", default="configs/base.py",
                   help="the config file whose defaults the page shows")
    args = p.parse_args(argv)
    if not os.path.isfile(args.config):
        p.error(f"--config: no such file: {args.config}")
    sys.stdout.write(page(_load_config(args.config)))


if __name__ == "__main__":
    main()
