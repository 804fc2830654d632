"""The rooms of the code and what each may import (the import guard), and where env ids may
be written.

Rules (README "Where things are"):
- ``rlcore`` (the RL math and the policy) imports nothing of ours but itself;
- ``runtime`` (everything around a run) imports only ``rlcore`` and itself; inside it, each
  room (``RUNTIME_ROOMS``: ``process``, ``config``, ``distributed``, ``run``, ``commands``)
  imports only ``rlcore``, itself and the rooms before it, and ``runtime/__init__.py``
  imports nothing at its top (``test_runtime_rooms``). Two doors (``DOORS``), each inside a
  function: ``runtime/commands/policy.py`` (``load_policy``: a run's policy, the network's
  and the params') imports ``envs.registry`` for the env's spec, and ``runtime/__init__.py``
  imports that module inside its ``__getattr__`` (``runtime.load_policy`` on first use).
  runtime imports neither mode, by statement or by a module's name
  (``test_runtime_imports_no_mode``): the arrows point from the modes to runtime;
- ``envs`` imports only ``rlcore.types``, ``rlcore.errors``, ``rlcore.imports`` and
  ``rlcore.numbers`` (and itself);
- ``configs`` is imported only by configs, the entry points (``anakin/main.py``,
  ``sebulba/main.py``, and the evaluate commands ``anakin/evaluate.py``,
  ``sebulba/evaluate.py``, which fill an older run's missing fields from ``configs/base.py``),
  benchmarks (which build runs from configs) and tests;
- no module of ``rlcore``, ``runtime``, ``anakin`` or ``sebulba`` writes an env id: env
  names belong to ``envs/`` (and to configs and benchmarks, which choose envs);
- no two modules of ours import each other, directly or through others, not even inside a
  function (``test_no_import_cycles``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What envs may import of rlcore: the types, the one error, the import-path rule.
ENVS_MAY_IMPORT = ("rlcore.types", "rlcore.errors", "rlcore.imports", "rlcore.numbers")
OURS = ("rlcore", "runtime", "envs", "anakin", "sebulba", "configs", "benchmarks", "tests")
ENTRY_POINTS = ("anakin/main.py", "sebulba/main.py", "anakin/evaluate.py", "sebulba/evaluate.py")
# Imports past the room rules, each inside a function only (``function_imports``): the file
# and the modules it may import so. ``load_policy`` builds a run's network on the env's spec,
# which envs gives (below both modes); ``runtime.load_policy`` loads it on first use.
DOORS = {
    "runtime/commands/policy.py": ("envs.registry", "envs.registry.env_spec"),
    "runtime/__init__.py": ("runtime.commands.policy", "runtime.commands.policy.load_policy"),
}
MODES = ("anakin", "sebulba")


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


def function_imports(tree: ast.AST) -> set[tuple[int, str]]:
    """``(line, dotted module)`` of the imports of ``tree`` made inside a function."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in node.body:
                found |= set(imported_modules(stmt))
    return found


def through_doors(rel: str, path: Path) -> set[tuple[int, str]]:
    """The imports of ``path`` (``rel`` to the root) that ``DOORS`` lets past the rules:
    its named modules, imported inside a function."""
    doors = DOORS.get(rel, ())
    inside = function_imports(ast.parse(path.read_text())) if doors else set()
    return {(line, module) for line, module in inside if module in doors}


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
        return module in ("rlcore", *ENVS_MAY_IMPORT) or any(
            module.startswith(m + ".") for m in ENVS_MAY_IMPORT)
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
        doors = through_doors(rel, path)
        for line, module in ours_imported(path):
            ok = allowed(package, module) or (line, module) in doors
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
    assert not allowed("rlcore", "runtime.config.validation")
    assert not allowed("runtime", "configs.base")
    assert not allowed("envs", "rlcore.learner")
    assert allowed("envs", "rlcore.types")


# runtime's rooms, lowest first: a room may import the rooms before it, never one after.
RUNTIME_ROOMS = ("process", "config", "distributed", "run", "commands")
# At most this many entries at runtime's top (its rooms, __init__.py and a few modules).
RUNTIME_TOP_ENTRIES = 10


def runtime_room(module: str) -> str | None:
    """The room of a dotted module of ours (``runtime.run.metrics`` -> ``run``); None for
    ``runtime`` itself and modules outside it."""
    parts = module.split(".")
    return parts[1] if parts[0] == "runtime" and len(parts) > 1 else None


def room_allowed(room: str, module: str) -> bool:
    """May a module of runtime's ``room`` import ``module``? (``runtime`` itself, as in
    ``from runtime import distributed``, imports nothing.)"""
    if module.split(".")[0] == "rlcore" or module == "runtime":
        return True
    target = runtime_room(module)
    if target not in RUNTIME_ROOMS:
        return False
    return RUNTIME_ROOMS.index(target) <= RUNTIME_ROOMS.index(room)


def test_runtime_rooms():
    """Each room of runtime imports only the rooms before it; every room is a sub-package
    whose ``__init__.py`` says what it holds, or ``distributed.py``; the top stays small."""
    top = [p for p in (ROOT / "runtime").iterdir() if p.name != "__pycache__"]
    assert len(top) <= RUNTIME_TOP_ENTRIES, sorted(p.name for p in top)
    rooms = {p.stem for p in top if p.name != "__init__.py"}
    assert rooms == set(RUNTIME_ROOMS), rooms
    for room in RUNTIME_ROOMS:
        init = ROOT / "runtime" / room / "__init__.py"
        if room != "distributed":
            assert ast.get_docstring(ast.parse(init.read_text())), f"{init}: no docstring"
    init = ROOT / "runtime" / "__init__.py"
    assert set(ours_imported(init)) == through_doors("runtime/__init__.py", init)
    bad = []
    for path in package_files("runtime"):
        rel = path.relative_to(ROOT)
        room = runtime_room(".".join(rel.with_suffix("").parts))
        if room is None or path == init:
            continue
        doors = through_doors(rel.as_posix(), path)
        for line, module in ours_imported(path):
            if not room_allowed(room, module) and (line, module) not in doors:
                bad.append(f"{rel.as_posix()}:{line}: {module}")
    assert not bad, "a runtime room imports a room after it:\n" + "\n".join(bad)


def test_the_doors_open_inside_functions_only(tmp_path):
    """``DOORS`` lets its file's named modules past the rules when imported inside a
    function, nothing at the module's top, no other module, no other file; no door opens
    onto a mode."""
    path = tmp_path / "policy.py"
    path.write_text("import envs.registry\ndef f():\n    if 1:\n        import "
                    "envs.registry\n    import anakin.evaluate\n")
    assert through_doors("runtime/commands/policy.py", path) == {(4, "envs.registry")}
    assert through_doors("runtime/commands/train.py", path) == set()
    assert not any(m.split(".")[0] in MODES for doors in DOORS.values() for m in doors)


# What imports a module by its name: a call of one of these (``importlib.import_module``,
# ``__import__``, ``importlib.util.find_spec``, ``runpy.run_module``, ...).
IMPORT_CALLS = ("import_module", "__import__", "find_spec", "run_module", "import_object",
                "resolve_name")


def names_a_module(tree: ast.AST, packages: tuple[str, ...]) -> list[tuple[int, str]]:
    """``(line, text)`` of each place ``tree`` reaches a module of ``packages`` by name
    rather than an import statement: a string (docstrings aside) that is such a module's
    dotted name (``"anakin.evaluate"``) or an f-string that starts with one, and any call
    that imports by a name (``IMPORT_CALLS``) not written out as a constant."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                       ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    dotted = re.compile(r"(%s)(\.\w+)*\.?$" % "|".join(packages))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings and dotted.match(node.value)
                and "." in node.value):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            arg = node.args[0] if node.args else None
            if name in IMPORT_CALLS and not isinstance(arg, ast.Constant):
                found.append((node.lineno, f"{name}(<a computed name>)"))
            elif name in IMPORT_CALLS and dotted.match(str(arg.value)):
                found.append((node.lineno, f"{name}({arg.value!r})"))
    return found


def test_runtime_imports_no_mode():
    """runtime reaches neither mode: no import statement (``test_import_rules``), no module
    named by a string, no import by a computed name."""
    bad = [f"{path.relative_to(ROOT)}:{line}: {text}" for path in package_files("runtime")
           for line, text in names_a_module(ast.parse(path.read_text()), MODES)]
    assert not bad, "runtime reaches a mode by a module's name:\n" + "\n".join(bad)


def test_the_name_rule_sees_what_it_guards():
    src = ('"""anakin.evaluate in a docstring is prose."""\nimport importlib\n'
           'm = importlib.import_module(name)\nn = __import__("sebulba")\n'
           'p = "anakin.evaluate"\nq = f"sebulba.{x}"\nok = importlib.util.find_spec("wandb")\n'
           'r = "anakin"\n')
    found = names_a_module(ast.parse(src), MODES)
    assert [line for line, _ in found] == [3, 4, 5, 6], found


def test_the_room_rule_sees_what_it_guards():
    assert room_allowed("run", "runtime.config.fields")
    assert room_allowed("run", "runtime.distributed")
    assert room_allowed("config", "rlcore.types")
    assert not room_allowed("config", "runtime.run.files")
    assert not room_allowed("process", "runtime.config")
    assert not room_allowed("distributed", "runtime.run.metrics")
    assert not room_allowed("run", "runtime.commands.launch")
    assert not room_allowed("run", "runtime.commands")


CYCLE_PACKAGES = ("rlcore", "runtime", "envs", "anakin", "sebulba", "benchmarks")


def module_names(packages=CYCLE_PACKAGES) -> dict[str, Path]:
    """``{dotted module: file}`` of every module of ``packages`` (a package's
    ``__init__.py`` under the package's name)."""
    names = {}
    for package in packages:
        for path in package_files(package):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """``{module: the modules of sources it imports}`` for ``sources`` (``{dotted module:
    its text}``), every import counted wherever it is (inside functions too). An imported
    name is its module when it is one (``from runtime import failure``: ``runtime.failure``,
    not ``runtime``, as ``import runtime.failure`` is), else the module it comes from
    (``from runtime.process.failure import Details``)."""
    def resolve(name: str) -> str | None:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, text in sources.items():
        tree = ast.parse(text)
        only_modules = packages_of_submodules(tree, sources)
        found = {resolve(m) for line, m in imported_modules(tree) if (line, m) not in only_modules}
        graph[module] = found - {None, module}
    return graph


def packages_of_submodules(tree: ast.AST, sources) -> set[tuple[int, str]]:
    """``(line, package)`` of each ``from package import a, b`` of ``tree`` whose names are
    all modules of ``sources``: that line imports those modules, not a name of the
    package's own."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and all(
                f"{node.module}.{alias.name}" in sources for alias in node.names):
            found.add((node.lineno, node.module))
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as ``[a, b, ..., a]``, or None when there is none
    (a depth-first search, modules in sorted order so that the answer is stable)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                return path[path.index(imported):] + [imported]
            if imported not in state and (cycle := visit(imported)) is not None:
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)) is not None:
            return cycle
    return None


def test_no_import_cycles():
    """No module of ours imports itself through others: the message names the cycle."""
    sources = {m: p.read_text() for m, p in module_names().items()}
    cycle = find_cycle(import_graph(sources))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_sees_cycles():
    """The cycle check finds a cycle closed by an import inside a function, and through
    ``from package import module``."""
    sources = {"runtime": "", "runtime.a": "from runtime import b\n",
               "runtime.b": "def f():\n    from runtime.c import g\n",
               "runtime.c": "import runtime.a\n", "runtime.d": "from runtime.a import x\n"}
    graph = import_graph(sources)
    assert graph["runtime.a"] == {"runtime.b"}  # not the package ``runtime`` too
    assert graph["runtime.d"] == {"runtime.a"}
    assert find_cycle(graph) == ["runtime.a", "runtime.b", "runtime.c", "runtime.a"]
    assert find_cycle({**graph, "runtime.c": set()}) is None


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
