"""A population's history in the run directory: ``pbt.jsonl`` and the ``hparam/<name>``
keys of ``metrics.jsonl``.

``pbt.jsonl`` holds one JSON object per agent that copied another: ``update`` (the update
after which it copied), ``target`` and ``source`` (agent indices, ``runtime.config.sweep.
agent_tags`` order), the statistic of each that ranked them (``target_statistic``,
``source_statistic``; null before any episode ended), and ``old`` and ``new``, the target's
``{name: value}`` before and after (the source's values, explored). A resume drops the lines
past its checkpoint (``truncate_history``), as ``metrics.jsonl``'s, so a resumed run's
history equals an uninterrupted run's. See docs/design.md, "Population-based training".
"""

from __future__ import annotations

import json
import math
import os
from typing import Mapping, Sequence

import numpy as np

from rlcore.pbt import Events
from runtime.run import files
from runtime.run.files import write_atomically

HPARAM = "hparam/"  # the metrics key prefix of an agent's current hyperparameters


def short(value) -> float:
    """A float32 value as the shortest decimal that reads back as it (``3e-4``, not
    ``0.0003000000142492354``)."""
    return float(str(np.float32(value)))


def hparam_scalars(names: Sequence[str], values) -> dict[str, float]:
    """``{hparam/<name>: value}`` of one agent's values ``[H]``."""
    return {HPARAM + k: short(v) for k, v in zip(names, np.asarray(values), strict=True)}


def now_text(rows: Sequence[Mapping]) -> str:
    """What a population made of a group of agents' hyperparameters, for their label:
    ``" (now learning_rate=0.0008)"`` (``0.0008..0.0012`` where the agents differ), from the
    ``hparam/<name>`` keys of the group's latest rows, for each name whose values differ
    from the ones the label names (the swept key of that name; an explored field that is
    not swept always). ``""`` without such keys (no population) or where nothing changed.
    See docs/design.md, "Population-based training".

    Args:
      rows: metrics lines of one group of agents (any updates; the latest count).
    """
    if not rows:
        return ""
    top = max(r.get("update", 0) for r in rows)
    latest = [r for r in rows if r.get("update", 0) == top]
    parts = []
    for key in dict.fromkeys(k for r in latest for k in r if k.startswith(HPARAM)):
        name = key[len(HPARAM):]
        values = sorted({r[key] for r in latest if r.get(key) is not None})
        named = sorted({r[name] for r in latest if r.get(name) is not None})
        if values and values != named:
            span = f"{values[0]:g}" + (f"..{values[-1]:g}" if len(values) > 1 else "")
            parts.append(f"{name}={span}")
    return f" (now {', '.join(parts)})" if parts else ""


def _number(x) -> float | None:
    """A finite float, or None (JSON has no infinity)."""
    x = float(x)
    return x if math.isfinite(x) else None


def event_lines(update: int, names: Sequence[str], events: Sequence[Events]) -> list[dict]:
    """The history lines of update ``update``: one per agent that copied, in agent order.

    Args:
      update: the update after which the step ran.
      names: the population's hyperparameters (``runtime.config.pbt.names``).
      events: each agent's events on the host (leaves ``[]``, ``old``/``new`` ``[H]``).
    """
    lines = []
    for target, e in enumerate(events):
        if not bool(e.exploited):
            continue
        source = int(e.source)
        lines.append({
            "update": update, "target": target, "source": source,
            "target_statistic": _number(e.statistic),
            "source_statistic": _number(events[source].statistic),
            "old": {k: short(v) for k, v in zip(names, np.asarray(e.old))},
            "new": {k: short(v) for k, v in zip(names, np.asarray(e.new))}})
    return lines


def append_history(workdir: str, lines: list[dict]) -> None:
    """Appends ``lines`` to ``pbt.jsonl``."""
    if not lines:
        return
    with open(files.pbt_path(workdir), "a") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))


def truncate_history(workdir: str, update: int) -> None:
    """Drops the ``pbt.jsonl`` lines past ``update`` (and a torn last line), atomically."""
    path = files.pbt_path(workdir)
    if not os.path.exists(path):
        return
    with open(path) as f:
        kept = [ln for ln in f if _update_of(ln) is not None and _update_of(ln) <= update]
    write_atomically(path, "".join(kept))


def read_history(workdir: str) -> list[dict]:
    """The lines of ``pbt.jsonl`` (none where the run has no population)."""
    path = files.pbt_path(workdir)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def _update_of(line: str) -> int | None:
    try:
        return int(json.loads(line)["update"])
    except (ValueError, KeyError, TypeError):
        return None
