"""Everything around a run, apart from the RL math of ``rlcore``, in four rooms and one
module (docs/design.md, "Rooms"), each importing only ``rlcore``, itself and the rooms
listed before it (tests/test_layout.py checks it):

- ``process``: a command's life as a process: exit codes, one-line failures, signals,
  flag parsing, output paths;
- ``config``: the config's fields, their validation and derived sizes, sweeps, XLA
  flags, the agent builder and the memory plan;
- ``distributed``: JAX's multi-controller runtime, the device mesh, cross-process votes;
- ``run``: the run directory and its parts: metrics, checkpoints and their clock, resume,
  the workdir and its lock, curves, console lines;
- ``commands``: what a command runs: training, evaluation with its statistics and video,
  the local launcher, and ``load_policy`` (a trained agent back from Python).

``runtime.load_policy`` is ``runtime.commands.policy.load_policy``, imported on its first
use (``__getattr__``): ``import runtime`` itself imports nothing, JAX included.
"""

__all__ = ["load_policy"]


def __getattr__(name: str):
    """``load_policy`` on first use (``runtime.commands.policy``, which imports JAX);
    AttributeError for any other missing name, so that ``from
    runtime import <room>`` imports the room."""
    if name == "load_policy":
        from runtime.commands.policy import load_policy

        return load_policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
