"""The open log window of a run: each agent's per-update scalars and ended episodes since
the last metrics line.

A log line holds the window's means (``window_means``). With each checkpoint the open
window is saved beside it (``log_state/<update>.json``) and a resume loads it back and drops
the metrics lines past the checkpoint (``truncate_metrics``), so a resumed run's
``metrics.jsonl`` equals an uninterrupted run's except for clock keys.
"""

from __future__ import annotations

import json
import math
import os
from typing import Mapping

import numpy as np

from rlcore.types import EpisodeSummary
from runtime.process import failure
from runtime.run import files
from runtime.run.files import write_atomically

# Keys a line holds at the window's last update, not as its mean: a population's current
# hyperparameters (``runtime.run.population``).
LAST_VALUE_PREFIXES = ("hparam/",)


def window_means(window: list[Mapping[str, float]]) -> dict[str, float]:
    """Per key, the mean over the updates of a log window that have it (evaluation keys
    come only from the updates that evaluated); ``LAST_VALUE_PREFIXES`` keys: the last."""
    keys = list(dict.fromkeys(k for w in window for k in w))
    return {k: float([w[k] for w in window if k in w][-1]) if k.startswith(LAST_VALUE_PREFIXES)
            else float(np.mean([w[k] for w in window if k in w])) for k in keys}


class LogWindows:
    """The open log window of each agent of a run.

    Args:
      tags: one dict per agent that goes into its metrics lines (e.g. ``{"seed": 3}``);
        ``[{}]``: one agent, lines without tags.
    """

    def __init__(self, tags: list[dict]):
        self.tags = tags
        # Per agent: the open window's per-update scalars and its ended episodes.
        self.windows: list[list[Mapping[str, float]]] = [[] for _ in tags]
        self.episodes = [EpisodeSummary.zero() for _ in tags]

    def add(self, update: int, scalars, episodes) -> None:
        """Adds update ``update``'s scalars and the episodes that ended in it.

        Args:
          scalars: ``{name: float}``, or a list of them, one per agent.
          episodes: EpisodeSummary, or a list of them, one per agent.

        Raises:
          FloatingPointError: an agent's ``loss/total`` is not finite.
        """
        if isinstance(episodes, EpisodeSummary):
            scalars, episodes = [scalars], [episodes]
        for a, (sc, ep) in enumerate(zip(scalars, episodes, strict=True)):
            total_loss = sc.get("loss/total", 0.0)
            if not math.isfinite(total_loss):
                agent = f" of agent {self.tags[a]}" if self.tags[a] else ""
                raise FloatingPointError(
                    f"non-finite loss ({total_loss}) in update {update}{agent}")
            self.episodes[a] = self.episodes[a] + ep
            self.windows[a].append(dict(sc))

    def take(self) -> list[tuple[dict, EpisodeSummary, dict]]:
        """Ends the windows: ``(means, episodes, tags)`` per agent, for a log line; the
        next windows start empty."""
        agents = []
        for window, ep, tags in zip(self.windows, self.episodes, self.tags):
            means = window_means(window)
            agents.append((means, ep, tags))
        self.windows = [[] for _ in self.tags]
        self.episodes = [EpisodeSummary.zero() for _ in self.tags]
        return agents

    def save(self, workdir: str, update: int) -> None:
        """Writes the open windows as ``log_state/<update>.json``, atomically."""
        agents = [{"window": w, "episodes": e.as_list(), **({"info": e.info} if e.info else {})}
                  for w, e in zip(self.windows, self.episodes)]
        saved = agents[0] if len(agents) == 1 else {"agents": agents}
        with failure.doing(f"saving the log window of update {update}"):
            os.makedirs(files.log_state_path(workdir), exist_ok=True)
            write_atomically(files.log_state_path(workdir, update), json.dumps(saved))

    def load(self, workdir: str, update: int) -> None:
        """Reopens the windows saved with checkpoint ``update`` (none saved: kept empty)."""
        path = files.log_state_path(workdir, update)
        if not os.path.exists(path):
            return
        with open(path) as f:
            saved = json.load(f)
        agents = saved.get("agents", [saved])
        self.windows = [a["window"] for a in agents]
        self.episodes = [EpisodeSummary(*a["episodes"], info=a.get("info")) for a in agents]


def truncate_metrics(workdir: str, update: int) -> None:
    """Drops metrics.jsonl lines past ``update`` (logged after the restored checkpoint),
    and a last line torn by a killed process; rewrites the file atomically."""
    path = files.metrics_path(workdir)
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = [ln.rstrip("\n") + "\n" for ln in f
                 if (u := _update_of(ln)) is not None and u <= update]
    write_atomically(path, "".join(lines))


def _update_of(line: str) -> int | None:
    """The ``update`` of a metrics.jsonl line; None for a blank or torn line."""
    try:
        return int(json.loads(line)["update"])
    except (ValueError, KeyError, TypeError):
        return None
