"""The rooms of the code and what each may import (the import guard), and where env ids may
be written.

Rules (README "Where things are"):
- ``rlcore`` (the RL math and the policy) imports nothing of ours but itself;
- ``runtime`` (everything around a run) imports only ``rlcore`` and itself;
- ``envs`` imports only ``rlcore.types`` and ``rlcore.errors`` (and itself);
- ``configs`` is imported only by configs, the entry points (``anakin/main.py``,
  ``sebulba/main.py``, and the evaluate commands ``anakin/evaluate.py``,
  ``sebulba/evaluate.py``, which fill an older run's missing fields from ``configs/base.py``),
  benchmarks (which build runs from configs) and tests;
- no module of ``rlcore``, ``runtime``, ``anakin`` or ``sebulba`` writes an env id: env
  names belong to ``envs/`` (and to configs and benchmarks, which choose envs).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("rlcore", "runtime", "envs", "anakin", "sebulba", "configs", "benchmarks", "tests")
ENTRY_POINTS = ("anakin/main.py", "sebulba/main.py", "anakin/evaluate.py", "sebulba/evaluate.py")


def imported_modules(tree: ast.AST):
    """``(line, dotted module)`` of every import in ``tree``: ``import x``, ``from x import
    y`` (as ``x.y`` too, so ``from rlcore import config`` counts as ``rlcore.config``) and
    ``importlib.import_module("x...")`` with a literal or f-string prefix."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant):
                yield node.lineno, str(arg.value)
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(
                    arg.values[0], ast.Constant):
                yield node.lineno, str(arg.values[0].value)


def package_files(package: str) -> list[Path]:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, package
    return files


def ours_imported(path: Path):
    """``(line, module)`` of the imports of ours in ``path``."""
    for line, module in imported_modules(ast.parse(path.read_text())):
        if module.split(".")[0] in OURS:
            yield line, module


def allowed(package: str, module: str) -> bool:
    """May a module of ``package`` import ``module``?"""
    top = module.split(".")[0]
    if top == package:
        return True
    if package == "rlcore":
        return False
    if package == "runtime":
        return top == "rlcore"
    if package == "envs":
        return module in ("rlcore", "rlcore.types", "rlcore.errors") or any(
            module.startswith(m + ".") for m in ("rlcore.types", "rlcore.errors"))
    if package in ("anakin", "sebulba"):
        return top in ("rlcore", "runtime", "envs")
    if package == "benchmarks":
        return top in ("rlcore", "runtime", "envs", "anakin", "sebulba", "configs")
    if package == "configs":
        return top == "runtime"  # base.py builds its config from the field records
    raise AssertionError(package)


@pytest.mark.parametrize("package", ["rlcore", "runtime", "envs", "anakin", "sebulba",
                                     "benchmarks", "configs"])
def test_import_rules(package):
    bad = []
    for path in package_files(package):
        rel = path.relative_to(ROOT).as_posix()
        for line, module in ours_imported(path):
            ok = allowed(package, module)
            if module.split(".")[0] == "configs" and package in ("anakin", "sebulba"):
                ok = rel in ENTRY_POINTS
            if not ok:
                bad.append(f"{rel}:{line}: {module}")
    assert not bad, f"{package} imports what its room may not:\n" + "\n".join(bad)


def test_the_rule_sees_what_it_guards():
    """The checker finds each form of import it is meant to (so the rule can fail)."""
    src = ("import envs.base\nfrom configs import base\nfrom rlcore import config\n"
           "importlib.import_module(f'configs.{name}')\n")
    found = [m for _, m in imported_modules(ast.parse(src))]
    assert {"envs.base", "configs", "configs.base", "rlcore.config", "configs."} <= set(found)
    assert not allowed("rlcore", "runtime.config")
    assert not allowed("runtime", "configs.base")
    assert not allowed("envs", "rlcore.learner")
    assert allowed("envs", "rlcore.types")


def env_names() -> set[str]:
    """Every env id the registry knows, and each id's name without its version (``CartPole``
    of ``CartPole-v1``, ``Breakout`` of ``Breakout-MinAtar``), of at least 4 letters."""
    from envs import registry

    ids = set()
    for mode in (registry.ANAKIN, registry.SEBULBA):
        ids |= set(registry.accepted_ids(mode))
    names = set()
    for env_id in ids:
        bare = env_id.split(":", 1)[-1]
        names.add(bare)
        stem = re.split(r"-", bare)[0]
        if len(stem) >= 4 and stem[0].isupper():
            names.add(stem)
    return names


@pytest.mark.parametrize("package", ["rlcore", "runtime", "anakin", "sebulba"])
def test_no_env_id_outside_envs(package):
    names = env_names()
    assert {"CartPole-v1", "CartPole", "Breakout-v5", "Breakout-MinAtar"} <= names
    pattern = re.compile(r"(?<![\w-])(" + "|".join(
        re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?![\w])")
    bad = []
    for path in package_files(package):
        for i, text in enumerate(path.read_text().splitlines(), start=1):
            found = pattern.search(text)
            if found:
                bad.append(f"{path.relative_to(ROOT)}:{i}: {found.group(1)}: {text.strip()}")
    assert not bad, "env ids belong to envs/ (and configs, benchmarks):\n" + "\n".join(bad)
