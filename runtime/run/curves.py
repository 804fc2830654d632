"""Learning curves of runs: ``curve.png``, the return against env steps and against
wall-clock, every variant of a sweep a line, a band over its seeds.

One drawing for every use: each run writes ``<workdir>/curve.png`` as it closes (its end,
or its exit on a signal; ``runtime.run.directory.RunDir.close``), and ``python -m
benchmarks.curves RUN...`` draws the same for one or several runs. An agent is told apart by
its metrics lines' swept values (the fields of ``config.sweep``) and its ``seed``; the agents
of one run directory (or of one ``LABEL:DIR,DIR`` group of directories) that share their
swept values are one line: their mean, with the band from the lowest to the highest seed
(inside the returns' possible range, since every seed's return is). The wall-clock axis adds
up the invocations of a resumed run (each restarts ``wall_time`` at 0). A population's run
(``hparam/<name>`` keys) adds a row below: each agent's hyperparameters against env steps,
in its line's colour. See docs/design.md, "Metrics keys", and docs/design.md,
"Population-based training".
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from runtime.config.fields import is_swept_key
from runtime.run import files
from runtime.run.population import HPARAM, now_text

CURVE = files.CURVE  # what a run writes into its directory as it closes
RETURN_LABEL = "mean episode return"  # the y axis where the env says nothing more
Curve = list[tuple[float, float]]  # [(x, episode_return)]


@dataclasses.dataclass
class Line:
    """One line of the plot: the agents of one variant.

    Attributes:
      label: the legend's text (``"lr: learning_rate=0.001"``; empty for a plain run).
      seeds: the agents' seeds, in order.
      steps: per agent, ``[(env_steps, episode_return)]``.
      wall: per agent, ``[(wall-clock s since the run's start, episode_return)]``.
      hparams: per agent, ``{name: [(env_steps, value)]}`` of its ``hparam/<name>`` keys
        (empty without a population).
    """

    label: str
    seeds: list
    steps: list[Curve]
    wall: list[Curve]
    hparams: list[dict[str, Curve]] = dataclasses.field(default_factory=list)


def env_id_of(workdir: str) -> str | None:
    """The ``env_id`` of ``workdir/config.json`` (None without one)."""
    path = files.config_path(workdir)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f).get("env_id")


def swept_keys(rows) -> list[str]:
    """The swept fields the lines carry (``runtime.config.fields.is_swept_key``), in
    first-seen order."""
    keys: dict[str, None] = {}
    for r in rows:
        keys.update((k, None) for k in r if is_swept_key(k))
    return list(keys)


def joined_wall(rows) -> list[float]:
    """The lines' ``wall_time`` (one agent's, in file order) made cumulative over the
    invocations of a resumed run: where it drops, the earlier invocation's last value is
    added from there on."""
    out, offset, previous = [], 0.0, None
    for r in rows:
        t = float(r.get("wall_time") or 0.0)
        if previous is not None and t < previous:
            offset = out[-1]
        out.append(t + offset)
        previous = t
    return out


def run_lines(rows, label: str = "") -> list[Line]:
    """The lines of one run's (or one group's) metrics lines: agents keyed by their swept
    values and seed, one ``Line`` per swept values (first-seen order)."""
    keys = swept_keys(rows)
    agents: dict[tuple, list[dict]] = {}
    for r in rows:
        agents.setdefault((tuple(r.get(k) for k in keys), r.get("seed", 0)), []).append(r)
    variants: dict[tuple, list[dict]] = {}
    for (values, _), mine in agents.items():
        variants.setdefault(values, []).extend(mine)
    lines = {values: Line(variant_label(label, keys, values, mine), [], [], [], [])
             for values, mine in variants.items()}
    for (values, seed), mine in agents.items():
        line = lines[values]
        wall = joined_wall(mine)
        kept = [(r, w) for r, w in zip(mine, wall) if r.get("episode_return") is not None]
        line.seeds.append(seed)
        line.steps.append([(r["env_steps"], r["episode_return"]) for r, _ in kept])
        line.wall.append([(w, r["episode_return"]) for r, w in kept])
        line.hparams.append(hparam_curves(mine))
    return [line for line in lines.values() if any(line.steps)]


def variant_label(label: str, keys: list[str], values: tuple, rows) -> str:
    """The legend's text of one variant's agents: ``"lr: learning_rate=0.001"``, with what
    a population made of them (``population.now_text``: ``" (now learning_rate=0.0008)"``)."""
    variant = ",".join(f"{k}={v:g}" for k, v in zip(keys, values) if v is not None)
    return ": ".join(p for p in (label, variant) if p) + now_text(rows)


def hparam_curves(rows) -> dict[str, Curve]:
    """One agent's ``{name: [(env_steps, value)]}`` of its ``hparam/<name>`` keys."""
    out: dict[str, Curve] = {}
    for r in rows:
        for k, v in r.items():
            if k.startswith(HPARAM) and v is not None:
                out.setdefault(k[len(HPARAM):], []).append((r["env_steps"], v))
    return out


def hparam_names(lines: list[Line]) -> list[str]:
    """The hyperparameters any agent of ``lines`` logged, first-seen order."""
    return list(dict.fromkeys(k for line in lines for h in line.hparams for k in h))


def _hparam_panel(ax, lines: list[Line], name: str) -> None:
    """Every agent's ``name`` against env steps (a step line per agent, its line's
    colour); a log axis for positive values."""
    xs = [p[0] for line in lines for h in line.hparams for p in h.get(name, [])]
    divisor, unit = _scale(xs, STEP_UNITS)
    values = []
    for i, line in enumerate(lines):
        for h in line.hparams:
            curve = h.get(name, [])
            values += [p[1] for p in curve]
            ax.step([p[0] / divisor for p in curve], [p[1] for p in curve], where="post",
                    color=f"C{i}", lw=1.0, alpha=0.8)
    if values and min(values) > 0:
        ax.set_yscale("log")
    ax.set_xlabel(unit)
    ax.set_ylabel(name + (" (log scale)" if values and min(values) > 0 else ""))
    ax.set_title(f"{name} each agent trained with (hparam/{name}; colour: the agent's "
                 "starting variant)", fontsize=9)
    ax.grid(alpha=0.3)


def band(curves: list[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x, mean, low, high)`` over ``curves`` (each interpolated linearly) at every x any
    of them logged inside the range all of them cover; low and high are the lowest and
    highest curve there."""
    curves = [c for c in curves if c]
    start, end = max(c[0][0] for c in curves), min(c[-1][0] for c in curves)
    x = np.unique([p[0] for c in curves for p in c if start <= p[0] <= end])
    ys = np.array([np.interp(x, [p[0] for p in c], [p[1] for p in c]) for c in curves])
    return x, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def common_label(labels) -> str:
    """The y axis of a plot of runs whose own labels are ``labels``
    (``envs.registry.return_axis_label``'s): theirs where they agree."""
    labels = set(labels)
    return labels.pop() if len(labels) == 1 else RETURN_LABEL


def _scale(values, units) -> tuple[float, str]:
    """``(divisor, unit)``: the largest of ``units`` (``[(divisor, name)]``, ascending)
    that the largest of ``values`` reaches."""
    top = max(values, default=0.0)
    pick = units[0]
    for divisor, name in units:
        if top >= 2 * divisor:
            pick = (divisor, name)
    return pick


STEP_UNITS = [(1.0, "env steps"), (1e3, "env steps (thousands)"),
              (1e6, "env steps (millions)")]
WALL_UNITS = [(1.0, "wall-clock (s)"), (60.0, "wall-clock (min)"), (3600.0, "wall-clock (h)")]


def _panel(ax, lines: list[Line], which: str, units) -> bool:
    """Draws every line's mean and band on ``ax`` against ``which`` (``"steps"`` or
    ``"wall"``); whether any line has a band (two seeds or more)."""
    curves = [getattr(line, which) for line in lines]
    divisor, unit = _scale([p[0] for cs in curves for c in cs for p in c], units)
    banded = False
    for i, (line, cs) in enumerate(zip(lines, curves)):
        x, mean, low, high = band(cs)
        n = len([c for c in cs if c])
        text = line.label or "episode return"
        text += f" (mean of {n} seeds)" if n > 1 else f" (seed {line.seeds[0]})"
        ax.plot(x / divisor, mean, color=f"C{i}", lw=1.8, marker="." if x.size < 3 else None,
                label=text)
        if n > 1:
            ax.fill_between(x / divisor, low, high, color=f"C{i}", alpha=0.2, lw=0)
            banded = True
    ax.set_xlabel(unit)
    ax.grid(alpha=0.3)
    return banded


def draw(path: str, lines: list[Line], title: str, ylabel: str,
         target: float | None = None) -> str:
    """Writes ``path`` (a PNG): two panels, the return against env steps and against
    wall-clock, one mean line per ``Line`` with its band over seeds (min to max); ``target``
    adds a dashed line. Returns ``path``."""
    # A Figure of its own (no pyplot, no backend switch): a notebook's inline plots and a
    # user's backend stay as they were.
    from matplotlib.figure import Figure

    names = hparam_names(lines)[:2]  # a population's run: a row of its hyperparameters
    rows = 1 + bool(names)
    fig = Figure(figsize=(11, 3.8 * rows + 0.22 * (len(lines) + 1) // 2), layout="constrained")
    mosaic = [["steps", "wall"]] + ([[names[0], names[-1]]] if names else [])
    panels = fig.subplot_mosaic(mosaic)
    axes = [panels["steps"], panels["wall"]]
    for name in names:
        _hparam_panel(panels[name], lines, name)
    banded = False
    for ax, which, units in zip(axes, ("steps", "wall"), (STEP_UNITS, WALL_UNITS)):
        banded |= _panel(ax, lines, which, units)
        if target is not None:
            ax.axhline(target, color="grey", ls="--", lw=1, label=f"target {target:g}")
    axes[0].set_ylabel(ylabel)
    axes[0].set_title("against env steps (of one agent)", fontsize=9)
    axes[1].set_title("against wall-clock (metrics' wall_time, resumes joined)", fontsize=9)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center",
               ncol=2 if len(lines) > 1 else 1, fontsize=8)
    note = "\n(band: lowest to highest seed)" if banded else ""
    fig.suptitle(title + note, fontsize=11)
    fig.savefig(path, dpi=100)
    return path


def write_run_curve(workdir: str, label: str = RETURN_LABEL) -> str | None:
    """Draws ``workdir/curve.png`` from the run's ``metrics.jsonl``, the y axis ``label``
    (the env's: ``envs.registry.return_axis_label``); None (nothing written) when no
    episode finished yet."""
    lines = run_lines(files.read_metrics(workdir))
    if not lines:
        return None
    env_id = env_id_of(workdir)
    title = f"{os.path.basename(os.path.abspath(workdir))}: {env_id or 'episode return'}"
    return draw(files.curve_path(workdir), lines, title, label)
