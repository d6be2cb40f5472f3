"""Scaling figures: throughput against the number of DataLoader workers and of nodes.

A series is every scenario that differs only in the varied quantity; series measured at a single
value are left out. When no series has two points, the figure says so instead.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from robopipe.report.dataloading import NO_SCENARIOS
from robopipe.report.figures import WIDTH_IN, loader_colour, placeholder, save

_KEYS = ("loader", "source", "mode", "decode", "workers", "nodes")
_MARKERS = "osD^v<>ph*"


def _series(table: pd.DataFrame, varied: str) -> list[tuple[str, str, pd.DataFrame]]:
    """(label, loader, rows sorted by ``varied``) per series with at least two ``varied`` values."""
    fixed = [k for k in _KEYS if k != varied]
    found = []
    for key, rows in table.groupby(fixed, sort=True, dropna=False):
        if rows[varied].nunique() < 2:
            continue
        parts = dict(zip(fixed, key, strict=True))
        suffix = f"w{parts['workers']}" if varied == "nodes" else f"n{parts['nodes']}"
        label = f"{parts['loader']} {parts['source']} {parts['mode']} {parts['decode']} {suffix}"
        found.append((label, parts["loader"], rows.sort_values(varied)))
    return found


def _plot(table, varied, panels, stem, title, empty_message, xlabel):
    if table.empty:
        return placeholder(stem, title, NO_SCENARIOS)
    series = _series(table, varied)
    if not series:
        return placeholder(stem, title, empty_message)
    fig, axes = plt.subplots(1, len(panels), figsize=(WIDTH_IN, 4.6), layout="constrained")
    for ax, (column, ylabel) in zip(axes, panels, strict=True):
        for i, (label, loader, rows) in enumerate(series):
            ax.plot(
                rows[varied],
                rows[column],
                marker=_MARKERS[i % len(_MARKERS)],
                color=loader_colour(loader),
                label=label,
            )
        values = sorted(table[varied].dropna().unique())
        ax.set_xticks(values, [str(int(v)) for v in values])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room above the top marker
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3), fontsize=8)
    fig.suptitle(title)
    return save(fig, stem)


def workers(table: pd.DataFrame, stem: str | Path, dataset: str):
    """Samples/s and decoded frames/s per node against DataLoader workers per node."""
    return _plot(
        table,
        "workers",
        (("samples_per_s", "samples/s"), ("frames_per_s_per_node", "decoded frames/s per node")),
        stem,
        f"{dataset}: scaling with DataLoader workers",
        "no scenario was measured at two or more worker counts (config: bench workers)",
        "DataLoader workers per node",
    )


def nodes(table: pd.DataFrame, stem: str | Path, dataset: str):
    """Total decoded frames/s and frames/s per node against the number of nodes."""
    return _plot(
        table,
        "nodes",
        (
            ("frames_per_s", "decoded frames/s, all nodes"),
            ("frames_per_s_per_node", "decoded frames/s per node"),
        ),
        stem,
        f"{dataset}: scaling with nodes",
        "only one node count was measured (e.g. n1 only): nothing to compare across nodes",
        "nodes",
    )
