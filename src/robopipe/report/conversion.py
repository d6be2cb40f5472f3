"""Conversion figures from Snakemake's ``benchmark:`` files, and the comparison with lerobot.

Snakemake measures each job's wall-clock time (column ``s``, seconds) and the peak resident
set size of its process tree (column ``max_rss``, MB of 2**20 bytes); each job records its own
peak RSS and start-up beside its log (:mod:`robopipe.jobs`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from robopipe.report.figures import WIDTH_IN, bar_figure, headroom, placeholder, save
from robopipe.report.tables import conversion_by_rule

NO_BENCHMARKS = "no conversion benchmark file for this dataset (results/jobs/<dataset>/)"
SHARD_RULE = "shard"
# Above this many shards, name labels would not fit: plot against the shard's ordinal instead.
MAX_NAMED_SHARDS = 40
_WALL, _RSS, _STARTUP = "#4c72b0", "#dd8452", "#55a868"


def _bars(ax, labels, values, colour, fmt):
    bars = ax.barh(range(len(labels)), values.fillna(0), color=colour, height=0.7)
    text = ["n/a" if pd.isna(v) else fmt.format(v) for v in values]
    ax.bar_label(bars, labels=text, padding=3, fontsize=8)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    headroom(ax)


def rules(jobs: pd.DataFrame, stem: str | Path, dataset: str, job_rss: pd.DataFrame | None = None):
    """Per conversion rule: summed wall time of its jobs (s), the largest job's peak RSS (MB):
    as the jobs measured it themselves (``job_rss``) where they did, else Snakemake's; and the
    mean start-up of its jobs (s: process start to first work, from ``job_rss``; in a SLURM
    run, from each SLURM job's start, Snakemake's starts inside the job included)."""
    title = f"{dataset}: conversion time and memory per rule"
    if jobs.empty:
        return placeholder(stem, title, NO_BENCHMARKS)
    per_rule = conversion_by_rule(jobs, job_rss)
    labels = [f"{r.rule} ({r.jobs} job{'s' if r.jobs != 1 else ''})" for r in per_rule.itertuples()]
    fig, (wall, rss, startup) = bar_figure(len(per_rule), panels=3)
    _bars(wall, labels, per_rule["total_s"], _WALL, "{:,.2f}")
    wall.set_xlabel("wall time, summed over the rule's jobs, s")
    measured = per_rule["job_peak_rss_mb"].fillna(per_rule["max_rss_mb"])
    _bars(rss, labels, measured, _RSS, "{:,.0f}")
    rss.set_xlabel("peak RSS of the rule's largest job (its own or its largest child's), MB")
    if per_rule["job_start_s"].notna().any():  # a SLURM run: from each SLURM job's start
        _bars(startup, labels, per_rule["job_start_s"], _STARTUP, "{:,.1f}")
        startup.set_xlabel("SLURM job start to first work, mean, s")
    else:
        _bars(startup, labels, per_rule["startup_s"], _STARTUP, "{:,.2f}")
        startup.set_xlabel("start-up per job (interpreter, imports), mean, s")
    fig.suptitle(title)
    return save(fig, stem)


def shards(jobs: pd.DataFrame, stem: str | Path, dataset: str):
    """Per shard job: wall time (s) and peak RSS (MB); points by ordinal beyond 40 shards."""
    title = f"{dataset}: conversion time and memory per shard"
    rows = jobs[jobs["rule"] == SHARD_RULE].reset_index(drop=True)
    if rows.empty:
        return placeholder(stem, title, f"no benchmark file of rule '{SHARD_RULE}'")
    if len(rows) <= MAX_NAMED_SHARDS:
        fig, (wall, rss) = bar_figure(len(rows), panels=2)
        _bars(wall, rows["name"], rows["s"], _WALL, "{:,.2f}")
        wall.set_xlabel("wall time, s")
        _bars(rss, rows["name"], rows["max_rss"], _RSS, "{:,.0f}")
        rss.set_xlabel("peak RSS, MB")
    else:
        fig, (wall, rss) = plt.subplots(1, 2, figsize=(WIDTH_IN, 4.2), layout="constrained")
        for ax, column, colour, unit in (
            (wall, "s", _WALL, "wall time, s"),
            (rss, "max_rss", _RSS, "peak RSS, MB"),
        ):
            ax.plot(rows.index, rows[column], "o", markersize=3, color=colour)
            ax.set_ylim(bottom=0)
            ax.set_ylabel(unit)
            ax.set_xlabel(f"shard (ordinal by name, {len(rows)} shards)")
    fig.suptitle(title)
    return save(fig, stem)


def lerobot(comparison: dict | None, stem: str | Path, dataset: str):
    """Wall time (s) and peak RSS (MB) of lerobot's converter against robopipe's conversion."""
    title = f"{dataset}: conversion, lerobot's converter vs robopipe"
    if comparison is None:
        message = "lerobot's converter was not measured for this dataset (lerobot_convert.json)"
        return placeholder(stem, title, message)
    fig, (wall, rss) = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.2), layout="constrained")
    names = ["lerobot (one process)", "robopipe (workflow)"]
    walls = pd.Series([comparison["lerobot_wall_s"], comparison["robopipe_wall_s"]])
    rsses = pd.Series([comparison["lerobot_peak_rss_mb"], comparison["robopipe_max_job_rss_mb"]])
    _bars(wall, names, walls, _WALL, "{:,.2f}")
    wall.set_xlabel("wall time of the whole conversion, s")
    _bars(rss, names, rsses, _RSS, "{:,.0f}")
    rss.set_xlabel("peak RSS (lerobot: its process; robopipe: largest job), MB")
    rss.set_yticks([])
    fig.suptitle(f"{title} ({comparison['episodes']} episodes)")
    return save(fig, stem)
