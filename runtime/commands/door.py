"""What an architecture package's front door (``anakin``, ``sebulba``) holds besides its
``run``, in one place: the names of the types its ``run`` is annotated with, and its trainer,
imported when called (docs/design.md, "From Python").

Imports only the standard library, so that ``import anakin`` starts no JAX; the types are
imported for a type checker only.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Unpack

if TYPE_CHECKING:
    from runtime.commands.result import RunResult
    from runtime.commands.train import RunArguments, Trainer

__all__ = ["RunArguments", "RunResult", "Unpack", "trainer_of"]


def trainer_of(package: str, load: Callable[[], ModuleType]) -> Trainer:
    """The trainer of the architecture package named ``package``: a function that imports
    its ``train`` module when called (``load``, the package's own import: this room names
    no mode) and returns its ``(MODE, train_result)``, what
    ``runtime.commands.train.run_main`` and ``train_in_python`` take."""

    def trainer() -> tuple[object, Callable]:
        module = load()
        return module.MODE, module.train_result

    trainer.__doc__ = (f"{package}'s checks and trainer, ``(MODE, train_result)``, imported "
                       "when called (the command line's and ``run``'s).")
    return trainer
