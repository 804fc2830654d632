"""The user's own code named by import path, ``PACKAGE.MODULE:NAME``, in a config field
(``env_id``, ``network``): the form and the import, failing as one ``<field>:`` line
(``rlcore.errors.ConfigError``). See docs/extending.md."""

from __future__ import annotations

import importlib
from typing import Any

from rlcore.errors import ConfigError
from rlcore.names import clash_hint, user_frame


def is_import_path(value: Any) -> bool:
    """Whether ``value`` has the form ``PACKAGE.MODULE:NAME`` (a dotted module path of
    identifiers, a colon, an identifier)."""
    if not isinstance(value, str):
        return False
    module, sep, name = value.partition(":")
    return bool(sep) and name.isidentifier() and all(
        part.isidentifier() for part in module.split("."))


def colon_hint(value: Any) -> str:
    """What a refusal of ``value`` adds where it reads as an import path written with a dot
    for the colon (``pkg.mod.Name``): the likely path and the form (``; did you mean
    'pkg.mod:Name'? (an import path puts a colon before the name: MODULE:NAME)``); else
    ``""``. See docs/design.md, "Your own code"."""
    if not isinstance(value, str) or ":" in value:
        return ""
    module, _, name = value.rpartition(".")
    if not module or not is_import_path(f"{module}:{name}"):
        return ""
    return f"; did you mean '{module}:{name}'? (an import path puts a colon before the " \
           "name: MODULE:NAME)"


def load_object(path: str, field: str) -> Any:
    """The object ``PACKAGE.MODULE:NAME`` names.

    Args:
      path: the import path.
      field: the config field that gave it (the error line starts with it).

    Raises:
      ConfigError: the module does not import (the line says why) or has no ``NAME``.
    """
    module_name, _, name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        own = e.name is None or module_name == e.name or module_name.startswith(f"{e.name}.")
        where = "" if own else f" (it imports {e.name!r}, which is missing)"
        hint = clash_hint(module_name) or "; is its package installed or on PYTHONPATH?"
        raise ConfigError(f"{field}: cannot import module {module_name!r} of '{path}'{where}"
                          f"{hint}") from None
    except Exception as e:  # noqa: BLE001 - the user's module may raise anything
        raise refusal(f"{field}: importing {module_name!r} of '{path}' failed", e) from None
    if not hasattr(module, name):
        raise ConfigError(f"{field}: module {module_name!r} has no attribute {name!r}")
    return getattr(module, name)


def path_of(obj: Any, field: str, hint: str = "") -> str:
    """The import path of ``obj`` (an import path given as a string is returned as it is):
    ``MODULE:NAME`` of a class or function, or of an object bound to a name at the top level
    of its class's module or of ``__main__`` (a notebook's or script's own). ``hint`` ends
    the refusal's line (e.g. where the arguments of what builds it go).

    Raises:
      ConfigError: ``obj`` has no such name (a lambda, a nested function, an object built
        inside a function), in one line.
    """
    if isinstance(obj, str):
        return obj
    import sys

    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if module and name.isidentifier() and getattr(sys.modules.get(module), name, None) is obj:
        return f"{module}:{name}"
    for module in (type(obj).__module__, "__main__"):
        namespace = vars(sys.modules[module]) if module in sys.modules else {}
        for name, value in namespace.items():
            if value is obj and name.isidentifier():
                return f"{module}:{name}"
    raise ConfigError(f"{field}: {type(obj).__name__} object {short_repr(obj)} has no name at the "
                      "top level of a module; pass its class, or a function at the top level "
                      f"that builds it{hint}")


def one_line(error: BaseException, limit: int = 200) -> str:
    """``error``'s message on one line, at most ``limit`` characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def short_repr(obj: Any, limit: int = 60) -> str:
    """``repr(obj)`` on one line (its whitespace collapsed), at most ``limit`` characters."""
    text = " ".join(repr(obj).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def refusal(head: str, error: BaseException) -> ConfigError:
    """The refusal of the user's code that raised ``error``: ``"<head>: <Type>: <the
    message's first line> (at FILE:LINE in NAME)"``, the frame of their code where the
    traceback passes one, with the whole traceback as the error's ``details``, which a
    command keeps in a file the line names (docs/design.md, "Exit codes").

    Args:
      head: the line's start, the field first (``"env_id: 'pkg.envs:Grid' does not trace"``).
      error: what the user's code raised.
    """
    import traceback

    first = next((ln for ln in str(error).splitlines() if ln.strip()), "")
    message = one_line(ValueError(first)) if first else type(error).__name__
    frame = user_frame(error)
    at = f" (at {frame})" if frame else ""
    return ConfigError(f"{head}: {type(error).__name__}: {message}{at}",
                       details="".join(traceback.format_exception(error)))
