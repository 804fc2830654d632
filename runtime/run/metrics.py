"""Metric sinks: a console progress line, ``metrics.jsonl``, TensorBoard event files and,
when asked for (``wandb_project``), Weights & Biases.

A ``metrics.jsonl`` line holds ``update``, ``env_steps``, ``wall_time``, ``sps``,
``episode_return`` (mean over episodes ended since the previous line, ``null`` if none),
``episode_length`` (likewise), ``episode/<name>`` for each per-episode value the env reports
(``EnvSpec.episode_info``, e.g. an open-ended env's achievements; likewise), ``loss/...`` and
``time/<stage>_s``. Every key whose value
depends on the clock contains ``time``, ``sps`` or ``wall``; every other value is
reproducible run to run.

TensorBoard and W&B get one run per agent of a many-agent run (``tb/<agent>/`` under the run
directory; W&B runs grouped under the run's name), so that one chart overlays the seeds and
swept values of a key; a lone agent's event files stay in the run directory.

Weights & Biases is optional: nothing imports ``wandb`` unless a run sets
``config.wandb_project``; ``config.wandb_mode = "offline"`` writes the run under the run
directory without network (``wandb sync`` uploads it later).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import time
from typing import Mapping

import numpy as np

from rlcore.errors import ConfigError
from rlcore.numbers import readable
from rlcore.types import EpisodeSummary
from runtime.config.fields import is_swept_key
from runtime.config.saved import with_version
from runtime.process import failure
from runtime.run import files as run_files
from runtime.run.console import clock
from runtime.run.population import now_text

# The metrics.jsonl contract: every key that depends on the clock has one of these in its
# name; every other value is reproducible.
CLOCK_WORDS = ("time", "sps", "wall")


def is_clock_key(key: str) -> bool:
    """Whether a metrics.jsonl key depends on the clock (and so differs run to run)."""
    return any(word in key for word in CLOCK_WORDS)


def _to_python(value):
    value = np.asarray(value)
    if value.dtype.kind in "iu":
        return int(value)
    if value.dtype.kind == "b":
        return bool(value)
    return float(value)


class MetricsLogger:
    """Writes one log step to the console, ``metrics.jsonl`` and TensorBoard.

    Args:
      workdir: run directory (``None``: console only).
      total_updates: updates in the run, for progress and ETA.
      console: print a progress line per log step.
      tensorboard: write TensorBoard event files under ``workdir``.
      write: this process writes files (process 0 in a multi-process run).
      start: ``(update, env_steps)`` the run starts from (a resume), for SPS and ETA.
      wandb: ``wandb.init`` arguments (``project``, ``mode``, ``config``, ...) to log every
        line to Weights & Biases too; None: not used.
      agents: the tags of every agent (``runtime.config.sweep.agent_tags``; None: one agent):
        TensorBoard and W&B get one run per agent (``agent_name``).
      opened: ``time.perf_counter()`` when the command opened the run directory, which
        ``wall_time`` counts from (default: now).
    """

    def __init__(self, workdir, total_updates: int, *, console=True, tensorboard=True,
                 write=True, start: tuple[int, int] = (0, 0), wandb: dict | None = None,
                 agents: list[dict] | None = None, opened: float | None = None):
        self.total_updates = total_updates
        self.console = console
        self.start = time.perf_counter() if opened is None else opened
        self.start_update = start[0]
        self._last = (self.start, start[1])
        self._steady: tuple[int, float] | None = None  # (update, time) of steady_from
        self._last_returns: dict[str, float] = {}  # per variant label: the last known return
        self._jsonl = None
        self._tb: dict[str, object] = {}  # agent_name(tags) -> its SummaryWriter
        self._tb_at: tuple[str, int] | None = None  # (workdir, env steps at the start)
        self._wandb: dict[str, object] = {}  # agent_name(tags) -> its W&B run
        if workdir and write:
            os.makedirs(workdir, exist_ok=True)
            self._jsonl = open(run_files.metrics_path(workdir), "a", buffering=1)
            if tensorboard:
                self._tb_at = (workdir, start[1])
                for tags in agents or [{}]:
                    self._writer(tags)
        if wandb and write:
            self._wandb = self._start_wandb(wandb, workdir, agents or [{}])
        self.history: list[dict] = []

    def _start_wandb(self, settings: dict, workdir, agents: list[dict]) -> dict:
        """One W&B run per agent (``wandb_runs``); a run W&B refuses to start closes the
        sinks and is a ConfigError."""
        import wandb as wandb_lib

        try:
            return wandb_runs(wandb_lib, settings, workdir, agents)
        except Exception as e:  # no API key, no network, ...: a clear line, exit 2
            self.close()
            reason = " ".join(str(e).split()) or type(e).__name__
            raise ConfigError(
                f"wandb_mode: W&B could not start a run in mode '{settings.get('mode')}' "
                f"({reason}); log in (`wandb login`, or WANDB_API_KEY) or pass "
                "--config.wandb_mode=offline") from e

    def log(self, update: int, env_steps: int, scalars: Mapping[str, float],
            episodes: EpisodeSummary, sps: float | None = None) -> dict:
        """Writes one line; ``scalars`` holds ``loss/...`` and ``time/...`` values,
        ``episodes`` the episodes ended since the previous line.

        ``sps`` defaults to env steps per second since the previous line; callers that log
        several lines per measured interval (Anakin's multi-update calls) pass their own.
        """
        return self.log_agents(update, env_steps, [(scalars, episodes, {})], sps)[0]

    def log_agents(self, update: int, env_steps: int, agents, sps: float | None = None,
                   at: float | None = None) -> list[dict]:
        """Writes one line per agent of a log step, and one console line for them all.

        Args:
          update: updates done.
          env_steps: env steps done, per agent.
          agents: ``[(scalars, EpisodeSummary, tags)]``, one per agent; ``tags`` (e.g.
            ``{"seed": 3}``, empty for a single agent) go into that agent's line.
          sps: per-agent env steps per second (default: since the previous log step, or
            since ``steady_from``: compile excluded; None when no update since counts).
          at: ``time.perf_counter()`` of the step, for ``wall_time`` (default: now).

        Returns:
          The rows written.
        """
        now = time.perf_counter() if at is None else at
        last_time, last_steps = self._last
        if sps is None:  # none for a window of compiling updates only (``steady_from``)
            steps = env_steps - last_steps
            sps = steps / max(now - last_time, 1e-9) if steps > 0 else None
        self._last = (now, env_steps)
        rows = []
        for scalars, episodes, tags in agents:
            ep_return, ep_length = episodes.means()
            row = dict(tags)
            row.update({
                "update": int(update),
                "env_steps": int(env_steps),
                "wall_time": now - self.start,
                "sps": sps,
                "episode_return": ep_return,
                "episode_length": ep_length,
            })
            row.update({f"episode/{k}": v for k, v in episodes.info_means().items()})
            row.update({k: _to_python(v) for k, v in sorted(scalars.items())})
            rows.append(row)
            self._write(row, tags)
        for row, (_, _, tags) in zip(rows, agents):  # one call per log step and agent
            run = self._wandb.get(agent_name(tags))
            if run is not None:
                run.log(_numbers(row, tags), step=int(env_steps))
        if self.console:
            print(self.progress_line(rows, variant_keys(rows[0])), file=sys.stderr, flush=True)
        return rows

    def _write(self, row: dict, tags: Mapping) -> None:
        self.history.append(row)
        if self._jsonl is not None:
            with failure.doing(f"writing {self._jsonl.name}"):
                self._jsonl.write(json.dumps(row) + "\n")
        writer = self._writer(tags)
        if writer is not None:
            for key, value in _numbers(row, tags).items():
                writer.add_scalar(key, value, row["env_steps"])

    def _writer(self, tags: Mapping):
        """The agent's SummaryWriter, opened on first use (None without TensorBoard): a lone
        agent's event files in the workdir, several agents' in ``workdir/tb/<agent_name>/``,
        one TensorBoard run each, so that one chart overlays every seed and swept value of a
        tag. Events an earlier process logged past the resumed step (or all of them, for a
        run that starts over) are purged, as metrics.jsonl's lines are."""
        name = agent_name(tags)
        if self._tb_at is not None and name not in self._tb:
            from tensorboardX import SummaryWriter

            workdir, steps = self._tb_at
            logdir = (os.path.join(workdir, run_files.TENSORBOARD_AGENTS, name) if name
                      else workdir)
            self._tb[name] = SummaryWriter(logdir=logdir, purge_step=steps + 1)
        return self._tb.get(name)

    def steady_from(self, update: int, at: float, env_steps: int | None = None) -> None:
        """Time per update is steady (no compile in it) from ``update`` reached at ``at``
        (``time.perf_counter()``): the ETA is measured from there, and so is the default
        SPS of the next line when ``env_steps`` (those of ``update``) is given."""
        self._steady = (update, at)
        if env_steps is not None and env_steps >= self._last[1]:
            self._last = (at, env_steps)

    def eta_s(self, done: int, now: float) -> float | None:
        """Seconds left after ``done`` updates at ``now``, at the steady rate since
        ``steady_from``; None before it is known (no steady update yet)."""
        if self._steady is None or done <= self._steady[0]:
            return None
        update, at = self._steady
        return (now - at) / (done - update) * max(self.total_updates - done, 0)

    def progress_line(self, rows, variant_keys=()) -> str:
        """``update 10/122 | env steps 40,960 | SPS 12,345 | return 23.4 | ETA 0:00:12``;
        with several agents the return is their mean and range, ``return 23.4 (10.0..31.2,
        8 agents)``, and SPS counts the env steps of all of them, ``SPS 49,380 (4
        agents)``. With swept fields (``variant_keys``) the return is given per variant,
        its mean over seeds: ``return learning_rate=0.001: 23.4, learning_rate=0.0001:
        12.0``. A return without an episode ended since the previous line is the last known
        one, ``return 23.4 (last)``; SPS and ETA are ``-`` until known. A run whose acting
        params trail the learner's shows the lag's mean (``params_lag``): ``| lag 4.0``."""
        rows = [rows] if isinstance(rows, Mapping) else rows
        row = rows[0]
        done = row["update"]
        eta = self.eta_s(done, self.start + row["wall_time"])
        ret_s = self._returns_text(rows, variant_keys)
        evals = [r["eval/episode_return"] for r in rows if "eval/episode_return" in r]
        eval_s = f" | eval return {readable(sum(evals) / len(evals))}" if evals else ""
        if row.get("params_lag") is not None:  # the acting params' lag behind the learner's
            eval_s += f" | lag {row['params_lag']:.1f}"
        sps_s = "-" if row["sps"] is None else f"{row['sps'] * len(rows):,.0f}"
        if len(rows) > 1:
            sps_s += f" ({len(rows)} agents)"
        return (
            f"update {done}/{self.total_updates} | env steps {row['env_steps']:,} | "
            f"SPS {sps_s} | return {ret_s}{eval_s} | "
            f"ETA {'-' if eta is None else clock(eta)}"
        )

    def _returns_text(self, rows, variant_keys) -> str:
        """The return part of ``progress_line`` (its docstring): per variant, each labelled
        with what a population made of its hyperparameters (``population.now_text``), or
        the mean with the agents' range."""
        if variant_keys:
            return ", ".join(f"{label}{now_text(group)}: {self._return_text(label, group)}"
                             for label, group in group_by_variant(rows, variant_keys))
        text = self._return_text("", rows)
        returns = [r["episode_return"] for r in rows if r["episode_return"] is not None]
        if len(rows) > 1 and returns:
            text += f" ({readable(min(returns))}..{readable(max(returns))}, {len(rows)} agents)"
        return text + now_text(rows)

    def recall(self, rows) -> None:
        """Takes the last known returns from earlier lines (``rows``, in order: a resumed
        run's ``metrics.jsonl``), so that its first lines can show them."""
        for _, step in itertools.groupby(rows, key=lambda r: r["update"]):
            step = list(step)
            keys = variant_keys(step[0])
            for label, group in (group_by_variant(step, keys) if keys else [("", step)]):
                mean = _mean_return(group)
                if mean is not None:
                    self._last_returns[label] = mean

    def _return_text(self, label: str, rows) -> str:
        """The mean return of ``rows``' episodes, kept as ``label``'s last known; without
        one, the last known marked ``(last)``, or ``-`` before any."""
        mean = _mean_return(rows)
        if mean is not None:
            self._last_returns[label] = mean
            return readable(mean)
        last = self._last_returns.get(label)
        return "-" if last is None else f"{readable(last)} (last)"

    def close(self) -> None:
        """Closes every sink (each one even after another failed to close: their threads
        stop), then raises the first failure."""
        closers = [self._jsonl.close] if self._jsonl is not None else []
        closers += [w.close for w in self._tb.values()]
        closers += [run.finish for run in self._wandb.values()]
        self._jsonl, self._tb, self._wandb, self._tb_at = None, {}, {}, None
        failure.close_all(*closers)


def eval_scalars(evals: EpisodeSummary) -> dict[str, float]:
    """``eval/episode_return`` and ``eval/episode_length`` of an update that evaluated
    (empty for one that did not: no episode)."""
    ret, length = evals.means()
    return {} if ret is None else {"eval/episode_return": ret, "eval/episode_length": length}


def variant_keys(row: Mapping) -> list[str]:
    """The swept fields a metrics line carries (what tells its variant apart), in order."""
    return [k for k in row if is_swept_key(k)]


def group_by_variant(rows, variant_keys) -> list[tuple[str, list[dict]]]:
    """``[(label, rows)]``: rows grouped by their values of ``variant_keys`` (first-seen
    order), labelled ``key=value,...``."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(",".join(f"{k}={r[k]:g}" for k in variant_keys), []).append(r)
    return list(groups.items())


def _mean_return(rows) -> float | None:
    """The mean ``episode_return`` of the rows that have one; None when none has."""
    returns = [r["episode_return"] for r in rows if r["episode_return"] is not None]
    return sum(returns) / len(returns) if returns else None


def _numbers(row: Mapping, tags: Mapping) -> dict[str, float]:
    """The scalars of a line that go to TensorBoard and W&B: every number but the step
    counters and the agent's tags (the x axis and the group)."""
    return {k: v for k, v in row.items()
            if k not in ("update", "env_steps", *tags) and isinstance(v, (int, float))
            and not isinstance(v, bool)}


def wandb_settings(config, workdir: str | None) -> dict | None:
    """``wandb.init`` arguments of a run (None unless ``config.wandb_project`` is set)."""
    project = config.get("wandb_project", "")
    if not project:
        return None
    name = os.path.basename(os.path.abspath(workdir)) if workdir else None
    return {"project": project, "mode": config.wandb_mode, "name": name,
            "config": json.loads(config.to_json_best_effort())}


def agent_name(tags: Mapping) -> str:
    """An agent's name among the runs' agents, e.g. ``learning_rate=0.001,seed=3``: its
    TensorBoard run directory (``tb/<name>``) and W&B run; empty for a lone agent."""
    return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in tags.items())


def wandb_runs(wandb_lib, settings: dict, workdir, agents: list[dict]) -> dict:
    """``{agent_name: run}``: ``wandb.init(**settings)`` for a lone agent; for several, one
    run each, grouped under the run's name (``settings["name"]``), its config holding the
    agent's swept values and seed."""
    quiet = wandb_lib.Settings(silent=True)  # no "wandb: ..." lines on the console
    if len(agents) == 1 and not agents[0]:
        return {"": wandb_lib.init(dir=workdir, settings=quiet, **settings)}
    runs = {}
    try:
        for tags in agents:
            name = agent_name(tags)
            runs[name] = wandb_lib.init(
                dir=workdir, settings=quiet, reinit="create_new",
                **{**settings, "group": settings.get("name"),
                   "name": f"{settings.get('name')}/{name}",
                   "config": {**(settings.get("config") or {}), **tags}})
    except Exception:
        for run in runs.values():  # the error says why; these were started for nothing
            with contextlib.suppress(Exception):
                run.finish()
        raise
    return runs


def write_config(workdir: str, config) -> None:
    """Writes ``config.json`` into the run directory: the config with the format version
    it is written under (``runtime.config.saved``)."""
    os.makedirs(workdir, exist_ok=True)
    saved = with_version(json.loads(config.to_json_best_effort()))
    run_files.write_atomically(run_files.config_path(workdir),
                               json.dumps(saved, indent=2, sort_keys=True))
