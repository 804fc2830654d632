"""Config files: they load, stay typed like configs/base.py, and follow the config style.

Style (flax examples' convention): a config imports one parent config (``from configs import
X``) and sets only the fields that differ from it, each with a trailing ``#`` comment.
"""

import ast
import importlib
import io
import tokenize
from pathlib import Path

import ml_collections
import pytest

from rlcore.algorithms import algorithm_class
from rlcore.algorithms.base import own_hyperparameters

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
CONFIG_FILES = sorted(p for p in CONFIG_DIR.glob("*.py") if p.name != "__init__.py")
NAMES = [p.stem for p in CONFIG_FILES]


def _load(name: str):
    module = importlib.import_module(f"configs.{name}")
    assert Path(module.__file__).resolve().parent == CONFIG_DIR, module.__file__
    return module


def _leaves(d: dict, prefix: tuple = ()) -> dict[tuple, object]:
    """Flattens ``ConfigDict.to_dict()`` into {path: value}."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_leaves(v, prefix + (k,)))
        else:
            out[prefix + (k,)] = v
    return out


def _field_assignments(path: Path) -> list[tuple[tuple[str, ...], int, int]]:
    """(field path, first line, last line) of every ``c.<a>[.<b>...] = ...`` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            parts = []
            while isinstance(target, ast.Attribute):
                parts.append(target.attr)
                target = target.value
            if parts and isinstance(target, ast.Name) and target.id == "c":
                found.append((tuple(reversed(parts)), node))
    return [(field, node.lineno, node.end_lineno) for field, node in found]


def _value(config: ml_collections.ConfigDict, field: tuple[str, ...]):
    """The value at ``field`` (a nested ConfigDict as a dict), or None if absent."""
    for key in field:
        if not isinstance(config, ml_collections.ConfigDict) or key not in config:
            return None
        config = config[key]
    return config.to_dict() if isinstance(config, ml_collections.ConfigDict) else config


def _parent(path: Path) -> str | None:
    """X of the file's ``from configs import X``."""
    parents = [alias.name for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ImportFrom) and node.module == "configs"
               for alias in node.names]
    assert len(parents) <= 1, f"{path.name}: more than one parent config {parents}"
    return parents[0] if parents else None


def test_config_files_found():
    assert "base" in NAMES and len(NAMES) > 1


# Sub-configs whose keys are the algorithm's own hyperparameters and the env's own
# arguments (names base.py cannot hold): checked against the algorithm's defaults.
OWN_SUBCONFIGS = ("algo", "env_kwargs")


def _check_own(name: str, config, own: dict) -> None:
    """Every ``algo.NAME`` of ``config`` is a hyperparameter of its algorithm, of its
    default's type; ``env_kwargs.NAME`` are the env's (its builder checks them)."""
    defaults = own_hyperparameters(algorithm_class(config.algorithm))
    for key, value in own.items():
        if key[0] != "algo":
            continue
        assert key[1] in defaults, f"{name}: algo.{key[1]} is not {config.algorithm}'s"
        assert type(value) is type(defaults[key[1]]), f"{name}: algo.{key[1]} {value!r}"


@pytest.mark.parametrize("name", NAMES)
def test_config_loads_with_base_fields_and_types(name):
    module = _load(name)
    if not hasattr(module, "get_config"):
        pytest.skip(f"{name} has no get_config")
    config = module.get_config()
    assert isinstance(config, ml_collections.ConfigDict)
    base = _leaves(_load("base").get_config().to_dict())
    fields = _leaves(config.to_dict())
    own = {k: v for k, v in fields.items() if k[0] in OWN_SUBCONFIGS}
    fields = {k: v for k, v in fields.items() if k[0] not in OWN_SUBCONFIGS}
    _check_own(name, config, own)
    extra = sorted(".".join(k) for k in fields.keys() - base.keys())
    assert not extra, f"{name}: fields missing from configs/base.py: {extra}"
    missing = sorted(".".join(k) for k in base.keys() - fields.keys())
    assert not missing, f"{name}: drops base fields {missing}"
    wrong = {".".join(k): (type(v).__name__, type(base[k]).__name__)
             for k, v in fields.items() if type(v) is not type(base[k])}
    assert not wrong, f"{name}: field types (config, base) differ: {wrong}"


@pytest.mark.parametrize("name", NAMES)
def test_every_field_assignment_has_trailing_comment(name):
    path = CONFIG_DIR / f"{name}.py"
    source = path.read_text()
    comment_lines = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                     if tok.type == tokenize.COMMENT}
    uncommented = [f"{path.name}:{first}: c.{'.'.join(field)}"
                   for field, first, last in _field_assignments(path)
                   if not comment_lines & set(range(first, last + 1))]
    assert not uncommented, "field assignments without a trailing # comment:\n" + "\n".join(
        uncommented)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "base"])
def test_no_field_set_to_parent_value(name):
    path = CONFIG_DIR / f"{name}.py"
    parent = _parent(path)
    assert parent is not None, f"{path.name}: no `from configs import <parent>`"
    child, parent_config = _load(name).get_config(), _load(parent).get_config()
    assignments = _field_assignments(path)
    assert assignments, f"{path.name} sets no field: import its parent instead"
    seen, redundant = set(), []
    for field, line, _ in assignments:
        assert field not in seen, f"{path.name}:{line}: c.{'.'.join(field)} set twice"
        seen.add(field)
        value, inherited = _value(child, field), _value(parent_config, field)
        if type(value) is type(inherited) and value == inherited:
            redundant.append(f"{path.name}:{line}: c.{'.'.join(field)} = {value!r}")
    assert not redundant, f"fields equal to configs/{parent}.py's:\n" + "\n".join(redundant)


def test_locate_names_a_shipped_config_from_any_directory(tmp_path, monkeypatch):
    """``--config`` takes a file (relative to the current directory, which wins) or a shipped
    config's name, with or without ``configs/`` and ``.py``; an ``:ARG`` suffix is kept."""
    from configs import locate
    from runtime.commands.train_flags import located_config

    monkeypatch.chdir(tmp_path)
    shipped = str(CONFIG_DIR / "cartpole_ppo.py")
    for value in ("cartpole_ppo", "cartpole_ppo.py", "configs/cartpole_ppo.py"):
        assert locate(value) == shipped
    assert locate("cartpole_ppo.py:small") == shipped + ":small"
    for value in ("no_such_config", "configs/sub/cartpole_ppo.py", "/abs/cartpole_ppo.py"):
        assert locate(value) == value
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "cartpole_ppo.py").write_text("")
    assert locate("configs/cartpole_ppo.py") == "configs/cartpole_ppo.py"  # the local file
    argv = ["main", "--config", "pendulum_ppo", "--config.seed=3", "--config=memory_ppo"]
    assert located_config(argv, locate) == [
        "main", "--config", str(CONFIG_DIR / "pendulum_ppo.py"), "--config.seed=3",
        f"--config={CONFIG_DIR / 'memory_ppo.py'}"]


@pytest.mark.parametrize("given, parsed", [
    (("learning_rate,",), ("learning_rate",)),
    (("learning_rate,gamma",), ("learning_rate", "gamma")),
    (("learning_rate, gamma ",), ("learning_rate", "gamma")),
    (("algo.dpo_alpha,",), ("algo.dpo_alpha",)),
    (("learning_rate", "gamma"), ("learning_rate", "gamma")),
])
def test_a_tuple_of_names_takes_the_comma_form(given, parsed):
    """``--config.pbt.explore=learning_rate,`` and ``...=a,b`` (the docs' form), which
    ml_collections reads as one name with its commas, are the names (docs/design.md,
    "Config fields")."""
    from runtime.commands.train_flags import split_name_tuples
    from runtime.config.fields import NAME_TUPLES

    assert NAME_TUPLES == ("pbt.explore",)
    config = importlib.import_module("configs.cartpole_ppo").get_config()
    config.pbt.explore = given
    split_name_tuples(config)
    assert config.pbt.explore == parsed
