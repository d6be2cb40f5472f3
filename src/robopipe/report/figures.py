"""Matplotlib helpers shared by the report's figures: saving, placeholders, scenario bar charts."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from robopipe.atomic import atomic_path
from robopipe.bench.registry import get_loader
from robopipe.report.tables import LOADERS

FORMATS = ("svg", "png")
PNG_DPI = 110
WIDTH_IN = 11.0
# Height per horizontal bar row and the fixed part (title, axis, legend) of a bar chart.
ROW_IN = 0.32
FRAME_IN = 1.9

plt.rcParams.update(
    {
        "svg.hashsalt": "robopipe",  # stable element ids: identical inputs give identical SVGs
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.axisbelow": True,
    }
)

_PALETTE = plt.get_cmap("tab10").colors
LOADER_COLOURS = {loader: _PALETTE[i % len(_PALETTE)] for i, loader in enumerate(LOADERS)}


def loader_colour(loader: str):
    """The colour of a loader, stable across every figure of the report."""
    return LOADER_COLOURS.get(loader, _PALETTE[len(LOADERS) % len(_PALETTE)])


def save(fig: Figure, stem: str | Path) -> list[Path]:
    """Write ``fig`` as ``{stem}.svg`` and ``{stem}.png`` (atomically) and close it."""
    written = []
    for fmt in FORMATS:
        final = Path(f"{stem}.{fmt}")
        with atomic_path(final) as tmp:
            fig.savefig(tmp, format=fmt, dpi=PNG_DPI, metadata=_metadata(fmt))
        written.append(final)
    plt.close(fig)
    return written


def _metadata(fmt: str) -> dict:
    # No creation date, so that re-running on the same results rewrites the same bytes.
    return {"Date": None} if fmt == "svg" else {}


def placeholder(stem: str | Path, title: str, message: str) -> list[Path]:
    """Write a figure that says why there is nothing to plot (the rule's outputs must exist)."""
    fig = plt.figure(figsize=(WIDTH_IN, 2.2), layout="constrained")
    fig.suptitle(title)
    fig.text(0.5, 0.45, message, ha="center", va="center", fontsize=11, wrap=True)
    return save(fig, stem)


def bar_figure(rows: int, panels: int = 1) -> tuple[Figure, list]:
    """A figure with ``panels`` side-by-side axes sized for ``rows`` horizontal bars each."""
    height = FRAME_IN + ROW_IN * max(rows, 1)
    fig, axes = plt.subplots(
        1, panels, figsize=(WIDTH_IN, height), sharey=True, layout="constrained", squeeze=False
    )
    return fig, list(axes[0])


def scenario_bars(
    ax, table: pd.DataFrame, column: str, *, fmt: str = "{:,.0f}", names=None
) -> None:
    """Horizontal bars of ``table[column]``, one per scenario (top to bottom in table order),
    coloured by loader, each labelled with its value; ``n/a`` where the value is missing.
    ``names``: the bars' tick labels (default: the scenario names)."""
    y = range(len(table))
    values = table[column]
    colours = [loader_colour(loader) for loader in table["loader"]]
    bars = ax.barh(y, values.fillna(0), color=colours, height=0.7)
    labels = ["n/a" if pd.isna(v) else fmt.format(v) for v in values]
    ax.bar_label(bars, labels=labels, padding=3, fontsize=8)
    ax.set_yticks(list(y), table["scenario"] if names is None else list(names))
    ax.set_ylim(len(table) - 0.5, -0.5)
    headroom(ax)


def headroom(ax, factor: float = 1.18) -> None:
    """Widen the x range so that the value labels at the bars' ends stay inside the axes."""
    low, high = ax.get_xlim()
    if ax.get_xscale() == "log":
        ax.set_xlim(low, high * factor**3)
    else:
        ax.set_xlim(0, max(high, 1e-9) * factor)


def loader_legend(fig: Figure, loaders, lines_ax=None) -> None:
    """One legend entry per loader present (a peer's marked ``(peer)``), then the labelled
    lines of ``lines_ax``, below the axes (outside them, so that no entry hides a bar)."""
    present = list(dict.fromkeys(loaders))
    handles = [plt.Rectangle((0, 0), 1, 1, color=loader_colour(lo)) for lo in present]
    labels = [f"{lo} (peer)" if get_loader(lo).peer else lo for lo in present]
    if lines_ax is not None:
        line_handles, line_labels = lines_ax.get_legend_handles_labels()
        handles += line_handles
        labels += line_labels
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(handles), 3))
