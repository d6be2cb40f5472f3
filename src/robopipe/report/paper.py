"""The seed paper's figures (Improving Dataloaders for Visuomotor Imitation within Robomimic),
from the ``*_seq_*`` scenarios: the cache-mode comparison at sequence length 50 and batch
size 1, the batch-size sweep at sequence length 10, the sequence-length sweep at batch size 64.

A scenario's sequence length, batch size and image size come from its frame mode
(:func:`robopipe.bench.scenarios.parse_sequence_mode`); scenarios with downscaled images are
left out of the three. A figure without its scenarios says which to run
(``config/examples/robomimic_paper.yaml`` runs them all).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from robopipe.bench.scenarios import parse_sequence_mode
from robopipe.report.figures import WIDTH_IN, bar_figure, loader_colour, placeholder, save
from robopipe.report.tables import SEQUENCE_LOADERS

CACHE_MODES = {"seq_length": 50, "batch_size": 1}  # the paper's cache-mode comparison
BATCH_SWEEP = {"seq_length": 10}  # batch sizes swept at this sequence length
SEQ_SWEEP = {"batch_size": 64}  # sequence lengths swept at this batch size
HOW = "run the *_seq_* scenarios of config/examples/robomimic_paper.yaml"
_MARKERS = "osD^v<>ph*"


def sequence_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of sequence loaders (``*_seq_*``, :mod:`robopipe.bench.registry`) of a
    scenario table (:func:`~robopipe.report.tables.load_scenarios`) at full image size, with
    an int ``seq_length`` column."""
    rows = table[table["loader"].isin(SEQUENCE_LOADERS)].copy()
    modes = [parse_sequence_mode(mode) for mode in rows["mode"]]
    rows["seq_length"] = [m.seq_length for m in modes]
    return rows[pd.Series([m.image_size is None for m in modes], index=rows.index, dtype=bool)]


def _select(rows: pd.DataFrame, fixed: dict) -> pd.DataFrame:
    for column, value in fixed.items():
        rows = rows[rows[column] == value]
    return rows


def cache_modes(table: pd.DataFrame, stem: str | Path, dataset: str) -> list[Path]:
    """Bars of samples/s (left) and peak RSS in MB (right) per ``*_seq_*`` scenario at
    sequence length 50, batch size 1 (the paper's cache-mode comparison), labelled by loader
    and worker count."""
    title = f"{dataset}: cache modes and strategies, sequence length 50, batch size 1"
    rows = _select(sequence_table(table), CACHE_MODES)
    if rows.empty:
        return placeholder(stem, title, f"no scenario at sequence length 50, batch 1: {HOW}")
    fig, (left, right) = bar_figure(len(rows), panels=2)
    for ax, column, label in (
        (left, "samples_per_s", "samples/s"),
        (right, "peak_rss_mb", "peak RSS (MB)"),
    ):
        y = range(len(rows))
        bars = ax.barh(y, rows[column], color=[loader_colour(lo) for lo in rows["loader"]])
        ax.bar_label(bars, labels=[f"{v:,.0f}" for v in rows[column]], padding=3, fontsize=8)
        labels = [f"{lo} w{w}" for lo, w in zip(rows["loader"], rows["workers"], strict=True)]
        ax.set_yticks(list(y), labels)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlim(0, rows[column].max() * 1.2)
        ax.set_xlabel(label)
    fig.suptitle(title)
    return save(fig, stem)


def _sweep(table, stem, title, varied, fixed, xlabel, empty):
    rows = _select(sequence_table(table), fixed)
    series = [
        (f"{loader} w{workers}", loader, group.sort_values(varied))
        for (loader, workers), group in rows.groupby(["loader", "workers"], sort=False)
        if group[varied].nunique() >= 2
    ]
    if not series:
        return placeholder(stem, title, f"{empty}: {HOW}")
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.2), layout="constrained")
    for i, (label, loader, group) in enumerate(series):
        ax.plot(
            group[varied], group["samples_per_s"], marker=_MARKERS[i % len(_MARKERS)],
            color=loader_colour(loader), label=label,
        )  # fmt: skip
    values = sorted(rows[varied].unique())
    ax.set_xscale("log")
    ax.set_xticks(values, [str(int(v)) for v in values])
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_yscale("log")  # rates span orders of magnitude across loaders
    ax.set_ylabel("samples/s (log)")
    fig.legend(loc="outside lower center", ncols=min(len(series), 4), fontsize=8)
    fig.suptitle(title)
    return save(fig, stem)


def batch_sizes(table: pd.DataFrame, stem: str | Path, dataset: str) -> list[Path]:
    """Samples/s against batch size at sequence length 10 (both axes log), one line per
    loader and worker count measured at two batch sizes or more."""
    return _sweep(
        table, stem, f"{dataset}: batch size sweep, sequence length 10", "batch_size",
        BATCH_SWEEP, "batch size", "no loader was measured at two batch sizes at seq_length 10",
    )  # fmt: skip


def seq_lengths(table: pd.DataFrame, stem: str | Path, dataset: str) -> list[Path]:
    """Samples/s against sequence length at batch size 64 (both axes log), one line per
    loader and worker count measured at two sequence lengths or more."""
    return _sweep(
        table, stem, f"{dataset}: sequence length sweep, batch size 64", "seq_length",
        SEQ_SWEEP, "sequence length", "no loader was measured at two sequence lengths at batch 64",
    )  # fmt: skip
