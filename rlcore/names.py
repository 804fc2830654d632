"""The project's top-level package names, resolved to this installation in every process
that imports it, whatever folder of the same name comes first on ``sys.path`` (a user's
``configs/`` of YAML files, an ``envs/`` package of their own in the current directory).
See docs/design.md, "Installed package".

Also which file of a traceback is the user's (``user_frame``: neither ours nor a library's),
the one rule the refusals of the user's code and a runtime failure's line use.

Imports nothing of ours and no library, so an entry package can claim the names before
anything else of ours is imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType

# Every top-level package of the project (pyproject.toml's ``[tool.setuptools] packages``).
OURS = ("rlcore", "runtime", "envs", "configs", "benchmarks", "anakin", "sebulba")
# The folder that holds them: this installation's (site-packages, or the checkout).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_ours(module: ModuleType) -> bool:
    """Whether ``module`` (a top-level package) is this installation's: its folder is in
    ``ROOT``."""
    locations = list(getattr(module, "__path__", None) or [])
    return any(os.path.dirname(os.path.abspath(p)) == ROOT for p in locations)


class OurNames(importlib.abc.MetaPathFinder):
    """Finds the packages ``OURS`` names in ``ROOT`` only; every other name, and their
    submodules (found through the package's own ``__path__``), goes the usual way."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in OURS:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [ROOT])


def claim() -> None:
    """Puts ``OurNames`` first on ``sys.meta_path`` (once), so that ``import envs`` and the
    rest of ``OURS`` import this installation's packages from here on.

    Raises:
      ImportError: a package of another origin already holds one of the names in this
        process (one Python process holds one package per name), in one line naming it.
    """
    for name in OURS:
        module = sys.modules.get(name)
        if module is not None and not is_ours(module):
            where = getattr(module, "__file__", None) or list(getattr(module, "__path__", []))
            raise ImportError(
                f"the package {name!r} imported in this process ({where}) is not "
                f"podracer-rl's, which needs the name {name!r} for its own: rename yours "
                f"(the project's names: {', '.join(OURS)})")
    if not any(isinstance(finder, OurNames) for finder in sys.meta_path):
        sys.meta_path.insert(0, OurNames())


def clash_hint(module_name: str) -> str:
    """What a failed import of ``module_name`` adds where its top-level package is one of
    ``OURS`` and the module is not ours (a user's ``envs.my_env`` beside our ``envs``): why,
    and what to do; else ``""``."""
    top = module_name.split(".")[0]
    if top not in OURS or module_name == top:
        return ""
    return (f"; {top!r} is podracer-rl's own package, so a package of yours named {top!r} "
            "cannot be imported beside it: move your module into a package with a name of "
            "your own (docs/extending.md)")


def _library_dirs() -> tuple[str, ...]:
    """The interpreter's own folders and its installed libraries' (ours among them where
    installed), each ending in a separator."""
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs)


def is_users_file(filename: str) -> bool:
    """Whether a traceback frame's ``filename`` is the user's code: a file neither of this
    project's packages (``rlcore.names``) nor of the interpreter and its libraries."""
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    ours = os.path.relpath(path, ROOT).split(os.sep)[0] in (*OURS, "tests")
    return not ours and not path.startswith(_library_dirs())


def user_frame(error: BaseException) -> str | None:
    """``FILE:LINE in NAME`` of the innermost frame of the user's code (``is_users_file``)
    that ``error`` passed through, or None (docs/design.md, "Your own code")."""
    import traceback

    frames = [f for f in traceback.extract_tb(error.__traceback__) if is_users_file(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else None
