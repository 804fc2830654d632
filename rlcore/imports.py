"""The user's own code named by import path, ``PACKAGE.MODULE:NAME``, in a config field
(``env_id``, ``network``): the form and the import, failing as one ``<field>:`` line
(``rlcore.errors.ConfigError``). See docs/extending.md."""

from __future__ import annotations

import importlib
from typing import Any

from rlcore.errors import ConfigError


def is_import_path(value: Any) -> bool:
    """Whether ``value`` has the form ``PACKAGE.MODULE:NAME`` (a dotted module path of
    identifiers, a colon, an identifier)."""
    if not isinstance(value, str):
        return False
    module, sep, name = value.partition(":")
    return bool(sep) and name.isidentifier() and all(
        part.isidentifier() for part in module.split("."))


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
        raise ConfigError(f"{field}: cannot import module {module_name!r} of '{path}'{where}; "
                          "is its package installed or on PYTHONPATH?") from None
    except Exception as e:  # noqa: BLE001 - the user's module may raise anything
        raise ConfigError(f"{field}: importing {module_name!r} of '{path}' failed: "
                          f"{type(e).__name__}: {one_line(e)}") from None
    if not hasattr(module, name):
        raise ConfigError(f"{field}: module {module_name!r} has no attribute {name!r}")
    return getattr(module, name)


def one_line(error: BaseException, limit: int = 200) -> str:
    """``error``'s message on one line, at most ``limit`` characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
