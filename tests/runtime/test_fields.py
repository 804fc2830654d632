"""The field records (runtime/config/fields.py) against configs/base.py and the docs page, the
views read from them, and former field names."""

import dataclasses
import json

import jax
import ml_collections
import pytest

from configs import base
from rlcore.hparams import SCALARS, HParams
from rlcore.replay import ReplaySettings
from runtime.config import fields

ROWS = {f.name: f for f in fields.FIELDS}


def base_fields(config, prefix=""):
    """``{dotted name: default}`` of ``config``: every field, the fields of sub-configs too,
    but not the ``sweep`` sub-config's (they mirror the number fields)."""
    out = {}
    for name, value in config.items():
        out[prefix + name] = value
        if isinstance(value, ml_collections.ConfigDict) and name != "sweep":
            out.update(base_fields(value, prefix + name + "."))
    return out


KIND_CHECKS = {
    fields.BOOL: lambda v: isinstance(v, bool),
    fields.INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
    fields.NUMBER: lambda v: isinstance(v, float),
    fields.STR: lambda v: isinstance(v, str),
    fields.TUPLE: lambda v: isinstance(v, tuple),
    fields.CONFIG: lambda v: isinstance(v, ml_collections.ConfigDict),
}


def test_every_field_of_base_has_a_row_and_every_row_a_field():
    defaults = base_fields(base.get_config())
    assert sorted(defaults) == sorted(ROWS)
    assert len(ROWS) == len(fields.FIELDS)  # no row twice


@pytest.mark.parametrize("row", fields.FIELDS, ids=lambda r: r.name)
def test_kind_agrees_with_the_default(row):
    default = base_fields(base.get_config())[row.name]
    assert KIND_CHECKS[row.kind](default), (row.name, row.kind, default)


def test_views():
    assert fields.BOOL_FIELDS == ("layer_norm", "anneal_lr", "clip_vloss", "norm_adv",
                                  "bootstrap_time_limits", "normalize_obs", "normalize_reward",
                                  "xla_cpu_multi_thread_eigen", "xla_cpu_concurrency_scheduler",
                                  "deterministic", "memory_check")
    assert fields.DEBUG_FIELDS == ("actor_jitter_ms", "fail_actor_at_update", "nan_at_update",
                                   "learner_delay_ms", "call_delay_ms")
    # The sweepable fields are exactly the scalars of the learner's record, in its order.
    assert fields.SWEEPABLE == SCALARS
    assert all(ROWS[k].kind == fields.NUMBER for k in fields.SWEEPABLE)
    assert "debug" in fields.RESUMABLE_CHANGES and "sweep" not in fields.RESUMABLE_CHANGES
    assert not any("." in k for k in fields.RESUMABLE_CHANGES)
    assert fields.ONE_DEVICE == {
        "num_devices": 1, "actor_device_ids": (0,), "learner_device_ids": (0,),
        "num_actor_threads": 1, "coordinator_address": "", "num_processes": 1,
        "process_id": 0}


def test_hparams_of_reads_every_record_field_from_the_config():
    config = base.get_config()
    config.gamma, config.num_epochs = 0.9, 3
    hp = fields.hparams_of(config, {"learning_rate": 1e-3})
    for f in dataclasses.fields(HParams):
        assert f.name in ROWS
        want = 1e-3 if f.name == "learning_rate" else config[f.name]
        if f.name == "algo":  # the sub-config as a dict of the own hyperparameters
            want = dict(config.algo)
        if f.name == "replay":  # the sub-config as its record
            want = ReplaySettings(**config.replay)
        assert getattr(hp, f.name) == want and type(getattr(hp, f.name)) is type(want)


def test_agent_hparams_holds_the_swept_values_and_none_elsewhere():
    from runtime.config import sweep

    config = base.get_config()
    config.num_seeds = 2
    assert sweep.agent_hparams(config) is None  # nothing swept: plain numbers
    config.sweep.learning_rate, config.sweep.ent_coef = (1e-3, 2.5e-4), (0.0,)
    swept = sweep.agent_hparams(config)
    assert swept.learning_rate.dtype.name == "float32"
    assert swept.learning_rate.tolist() == pytest.approx([1e-3, 1e-3, 2.5e-4, 2.5e-4])
    assert swept.ent_coef.tolist() == [0.0] * 4
    assert all(getattr(swept, k) is None for k in SCALARS if k not in ("learning_rate",
                                                                      "ent_coef"))
    plain = fields.hparams_of(config)
    agent = plain.override(jax.tree.map(lambda x: x[2], swept))
    assert float(agent.learning_rate) == pytest.approx(2.5e-4)
    assert agent.gamma == plain.gamma and type(agent.gamma) is float  # still a constant
    config.num_seeds, config.sweep.learning_rate = 1, (1e-3,)
    assert sweep.agent_hparams(config) is None  # one agent: plain numbers


# ----------------------------------------------------------------------------- renamed fields


def test_a_former_field_name_is_refused_in_one_line_naming_the_new_one():
    from anakin import train as anakin_train
    from rlcore.errors import ConfigError
    from runtime.config.problems import unknown_field
    from runtime.config.validation import DeviceCounts, validate
    from sebulba import train as sebulba_train

    config = base.get_config()
    assert unknown_field(config, "minibatch") == "minibatch: renamed to minibatch_kind"
    config.minibatch = "samples"  # a config file that sets the former name
    for mode in (anakin_train.MODE, sebulba_train.MODE):
        with pytest.raises(ConfigError, match="^minibatch: renamed to minibatch_kind$"):
            validate(config, mode, DeviceCounts(devices=1, local_devices=1, processes=1))


def test_a_saved_config_is_read_under_the_current_names(tmp_path):
    """An older run's config.json (``minibatch``) evaluates as ``minibatch_kind``."""
    import json

    from runtime.commands.evaluation import load_config

    saved = base.get_config().to_dict()
    saved["minibatch"] = "sequences"
    del saved["minibatch_kind"]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    config = load_config(str(tmp_path), base.get_config())
    assert config.minibatch_kind == "sequences" and "minibatch" not in config
    from runtime.config.saved import FORMAT_VERSION, upgrade_saved

    assert upgrade_saved({"minibatch": "auto", "seed": 1, "format_version": FORMAT_VERSION}) == {
        "minibatch_kind": "auto", "seed": 1}


def test_a_run_saved_before_policy_lag_resumes_at_its_lag(tmp_path):
    """config.json of a run from before the field: it ran at the architecture's own lag
    (-1), so the resume check finds nothing changed; a lag set now is a change."""
    from rlcore.errors import ConfigError
    from runtime.run.resume import check_same_config

    saved = base.get_config().to_dict()
    del saved["policy_lag"]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert check_same_config(str(tmp_path), base.get_config(), 10, 1, 0) is None
    lagged = base.get_config()
    lagged.policy_lag = 2
    with pytest.raises(ConfigError, match="^policy_lag: the checkpoint .* made with -1, not 2"):
        check_same_config(str(tmp_path), lagged, 10, 1, 0)


@pytest.mark.parametrize("field, value, line", [
    ("pbt.interval", 7, "pbt.interval: the checkpoint in {w} was made with 0, not 7; "),
    ("algo.dpo_alpha", 3.0, "algo.dpo_alpha: the checkpoint in {w} was made with 2.0, not "
                            "3.0; "),
    ("sweep.learning_rate", tuple(float(i) for i in range(40)),
     "sweep.learning_rate: the checkpoint in {w} was made with [], not [0.0, 1.0, 2.0, 3.0, "
     "4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, ...; "),
])
def test_a_refused_resume_names_the_dotted_field_and_its_two_values(tmp_path, field, value,
                                                                    line):
    """A field of a sub-config that changed is named by its dotted path with its two
    values (long ones cut), in one short line, not as the whole sub-config."""
    from rlcore.errors import ConfigError
    from runtime.run.resume import check_same_config

    saved = base.get_config()
    with saved.unlocked():
        saved.algo = {"dpo_alpha": 2.0, "dpo_beta": 0.6}
    (tmp_path / "config.json").write_text(saved.to_json())
    now = ml_collections.ConfigDict(saved.to_dict())
    parent, _, key = field.rpartition(".")
    now[parent][key] = value
    with pytest.raises(ConfigError) as e:
        check_same_config(str(tmp_path), now, 10, 1, 0)
    message = str(e.value)
    assert message.startswith(line.format(w=tmp_path)) and "\n" not in message
    assert len(message) < 300 + len(str(tmp_path))


@pytest.mark.parametrize("edit, line", [
    (lambda saved: saved.update(frame_skip=4), "frame_skip: {w} was written by another "
     "podracer-rl (run format 1) with a field this version does not have (frame_skip=4), so "
     "this version cannot continue it; "),
    (lambda saved: saved.pop("num_minibatches"), "num_minibatches: {w} was written by an "
     "older podracer-rl (run format 1) without this field, and this version has no value "
     "that continues it; "),
])
def test_a_run_an_older_version_wrote_that_cannot_be_continued_says_so(tmp_path, edit, line):
    """A saved field today's fields lack, or one of today's the file lacks (with no
    ``ADDED`` value): one line saying that the version is why, not a value to give."""
    from rlcore.errors import ConfigError
    from runtime.run.resume import check_same_config

    saved = base.get_config().to_dict()
    edit(saved)
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ConfigError) as e:
        check_same_config(str(tmp_path), base.get_config(), 10, 1, 0)
    assert str(e.value).startswith(line.format(w=tmp_path)) and "\n" not in str(e.value)
    assert len(str(e.value)) < 300 + len(str(tmp_path))


# ----------------------------------------------------------------------------- records and page


@pytest.mark.parametrize("row", fields.FIELDS, ids=lambda r: r.name)
def test_base_holds_each_records_default(row):
    """configs/base.py's defaults are the records' (same value, same type), but for the
    sub-configs and the ones base.py gives (the env id)."""
    default = base_fields(base.get_config())[row.name]
    if row.kind == fields.CONFIG:
        assert row.default is fields.SUBCONFIG
    elif isinstance(row.default, fields.Given):
        assert row.name == "env_id" and isinstance(default, str)
    else:
        assert default == row.default and type(default) is type(row.default)


def test_every_record_has_a_meaning_and_a_rule():
    for row in fields.FIELDS:
        assert row.meaning.endswith(".") and row.group, row.name
        assert row.rule.text(), row.name
        assert row.checked_in in (fields.COMMON, fields.DISTRIBUTED, fields.ANAKIN,
                                  fields.SEBULBA), row.name


def test_the_pipeline_rule_names_every_pipeline():
    from sebulba.pipeline import PIPELINES

    assert ROWS["pipeline"].rule.text().startswith(
        f"one of {', '.join(PIPELINES)} ")


def test_the_committed_docs_page_is_the_generators_output():
    """docs/configuration.md is ``python -m runtime.config.fields``' output; regenerate it with
    ``python -m runtime.config.fields > docs/configuration.md``."""
    from pathlib import Path

    committed = Path(__file__).resolve().parents[2] / fields.DOCS_PAGE
    assert committed.read_text() == fields.page(base.get_config())
    for row in fields.FIELDS:
        assert f"| `{row.name}` |" in committed.read_text()


def _bad_values(rule):
    """Values ``rule`` refuses (each refused by its first failing check)."""
    if isinstance(rule, fields.Ints):
        return [rule.lo - 1, 1.5, True]
    if isinstance(rule, fields.Number):
        return [0.0 if rule.above_zero else -1.0, "x", float("nan")]
    return []


MODE_ROWS = [r for r in fields.FIELDS if r.checked_in in (fields.ANAKIN, fields.SEBULBA)
             and not isinstance(r.rule, fields.Checked)]


@pytest.mark.parametrize("row", MODE_ROWS, ids=lambda r: r.name)
def test_a_modes_own_check_says_what_its_records_rule_says(row):
    """The fields only one architecture checks (in its ``check_fields``) are refused there
    with the message their record's rule gives (``runtime.config.validation.check_field``)."""
    from anakin import train as anakin_train
    from rlcore.errors import ConfigError
    from runtime.config.validation import DeviceCounts, check_field, validate
    from sebulba import train as sebulba_train

    mode = anakin_train.MODE if row.checked_in == fields.ANAKIN else sebulba_train.MODE
    assert _bad_values(row.rule), row.name
    for value in _bad_values(row.rule):
        config = base.get_config()
        with config.ignore_type():
            config[row.name] = value
        with pytest.raises(ConfigError) as by_rule:
            check_field(config, row.name)
        with pytest.raises(ConfigError) as by_mode:
            validate(config, mode, DeviceCounts(devices=1, local_devices=1, processes=1))
        assert str(by_mode.value) == str(by_rule.value)
