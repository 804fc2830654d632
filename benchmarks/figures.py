"""How the benchmarks draw and write their plots: matplotlib on the Agg backend, each figure
written at one resolution and closed."""

from __future__ import annotations


def pyplot():
    """matplotlib's ``pyplot`` on the Agg backend (files, no display), imported on first
    use: the benchmarks that plot need matplotlib, the others do not."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str, tight: bool = True, dpi: int = 110) -> str:
    """Writes ``fig`` to ``path`` at ``dpi``, laid out tight first (``tight`` False: a
    figure with a layout of its own), and closes it; returns ``path``. Every plot of the
    benchmarks is written so."""
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path

