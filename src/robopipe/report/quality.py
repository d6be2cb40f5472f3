"""The quality section of a dataset's report: what robopipe.quality found, and where.

Inputs: the dataset's ``quality.json`` and ``episodes.parquet`` (the ``quality_merge`` job's,
:func:`robopipe.quality.merge_batches`), and the dataset itself for the pictures of what was
flagged (:func:`robopipe.quality.read_episode_frames`, :func:`robopipe.quality.
read_episode_columns`). Four figures, each as SVG and PNG (:data:`robopipe.layout.
REPORT_QUALITY_FIGURES`):

- ``quality_checks``: findings per check, one bar per check, split by severity;
- ``quality_episodes``: episodes x checks, each cell the worst severity of that check in that
  episode (above :data:`MAX_STRIP_COLUMNS` episodes, each column the worst of a run of
  consecutive episodes);
- ``quality_cameras``: a contact sheet, the first, middle and last frame of each flagged
  camera stretch;
- ``quality_signals``: each numeric finding's signal over its episode, the flagged frames
  shaded.

The last two read the dataset and are bounded: at most ``max_drawn`` findings each (default
:data:`MAX_DRAWN`), the most severe first, then by episode; the title says how many of how
many are shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.patches import Patch

from robopipe.quality import CHECKS, read_episode_columns, read_episode_frames
from robopipe.report.figures import WIDTH_IN, bar_figure, headroom, placeholder, save

__all__ = [
    "CAMERA_CHECKS",
    "MAX_DRAWN",
    "MAX_STRIP_COLUMNS",
    "SIGNAL_CHECKS",
    "camera_findings",
    "cameras",
    "checks",
    "episodes_strip",
    "quality_figures",
    "signal_findings",
    "signals",
    "worst_per_column",
]

# the checks that flag a stretch of a camera's frames (robopipe.quality), and those whose
# findings are on a numeric feature's signal (the structural ones, missing_file and the like,
# have nothing to draw)
CAMERA_CHECKS = ("frozen_camera", "black_camera")
SIGNAL_CHECKS = tuple(c for c in CHECKS if c not in CAMERA_CHECKS)
SEVERITIES = ("info", "warning", "error")  # ascending
SEVERITY_COLOURS = {"info": "#4c72b0", "warning": "#f0a030", "error": "#c44e52"}
MAX_DRAWN = 12  # findings drawn in the contact sheet, and in the signal plots
MAX_STRIP_COLUMNS = 1000  # episodes drawn one column each in the strip
THUMB_IN = 1.9  # a contact-sheet row's height, inches


def _rank(severity: str) -> int:
    """0 for none, 1 info, 2 warning, 3 error."""
    return SEVERITIES.index(severity) + 1 if severity in SEVERITIES else 0


def _most_severe_first(findings: Sequence[Mapping]) -> list[Mapping]:
    return sorted(findings, key=lambda f: (-_rank(f["severity"]), f["episode_index"]))


def _drawable(finding: Mapping, checks: Sequence[str]) -> bool:
    """Whether ``finding`` is one of ``checks`` in one episode, on a named feature."""
    return (
        finding["check"] in checks
        and finding.get("episode_index") is not None
        and bool(finding.get("feature"))
    )


def _where(finding: Mapping) -> str:
    """``episode 3, observation.state[2], frames 10-40``: as much as the finding names."""
    episode = finding.get("episode_index")
    parts = ["every episode" if episode is None else f"episode {episode}"]
    if finding.get("feature"):
        dim = finding.get("dimension")
        parts.append(finding["feature"] + (f"[{dim}]" if dim is not None else ""))
    if finding.get("frames"):
        first, last = finding["frames"]
        parts.append(f"frame {first}" if first == last else f"frames {first}-{last}")
    return ", ".join(parts)


def checks(report: Mapping, stem: str | Path, dataset: str) -> list[Path]:
    """Bars of the findings per check (every check of ``report["checks"]``, in order, a
    passed one at zero), stacked by severity; each check's label gives its threshold and the
    episodes it flagged."""
    title = f"{dataset}: findings per check ({report['episodes']} episodes)"
    names = [c["name"] for c in report["checks"]]
    if not names:
        return placeholder(stem, title, "no check ran (quality.json lists none)")
    counts = pd.DataFrame(0, index=names, columns=list(SEVERITIES))
    for f in report["findings"]:
        if f["check"] not in counts.index:
            counts.loc[f["check"]] = 0
        counts.loc[f["check"], f["severity"]] += 1
    flagged = {c["name"]: c.get("episodes_flagged", 0) for c in report["checks"]}
    thresholds = {c["name"]: c.get("threshold") for c in report["checks"]}
    labels = [
        f"{name} ({flagged.get(name, 0)} ep."
        + (f", threshold {thresholds[name]:g})" if thresholds.get(name) is not None else ")")
        for name in counts.index
    ]
    fig, (ax,) = bar_figure(len(counts))
    left = np.zeros(len(counts))
    for severity in SEVERITIES:
        values = counts[severity].to_numpy()
        ax.barh(range(len(counts)), values, left=left, height=0.7,
                color=SEVERITY_COLOURS[severity], label=severity)  # fmt: skip
        left += values
    for y, total in enumerate(left):
        ax.annotate(f"{int(total):,}", (total, y), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8)  # fmt: skip
    ax.set_yticks(range(len(counts)), labels)
    ax.set_ylim(len(counts) - 0.5, -0.5)
    ax.set_xlabel("findings")
    headroom(ax)
    ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    return save(fig, stem)


def episodes_strip(
    episodes: pd.DataFrame, check_names: Sequence[str], stem: str | Path, dataset: str
) -> list[Path]:
    """Episodes (x) by checks (y), each cell the worst severity of that check in that episode
    (``episodes.parquet``: ``episode_index``, then one severity string column per check);
    above :data:`MAX_STRIP_COLUMNS` episodes, each column is the worst of a run of
    consecutive episodes, so that no flagged episode is lost to resampling."""
    title = f"{dataset}: episodes x checks, worst severity"
    names = [c for c in check_names if c in episodes.columns]
    if episodes.empty or not names:
        return placeholder(stem, title, "no episode was checked (episodes.parquet is empty)")
    table = episodes.sort_values("episode_index")
    ranks = np.stack([table[c].map(_rank).fillna(0).to_numpy(np.int8) for c in names])
    first, last = int(table["episode_index"].iloc[0]), int(table["episode_index"].iloc[-1])
    ranks, per_column = worst_per_column(ranks)
    if per_column > 1:
        title += f" (each column the worst of {per_column} consecutive episodes)"
    colours = ["#f4f4f4", *(SEVERITY_COLOURS[s] for s in SEVERITIES)]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 1.6 + 0.28 * len(names)), layout="constrained")
    ax.imshow(
        ranks, aspect="auto", interpolation="nearest", cmap=ListedColormap(colours),
        norm=BoundaryNorm(np.arange(-0.5, 4.5), 4),
        extent=(first - 0.5, last + 0.5, len(names) - 0.5, -0.5),
    )  # fmt: skip
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("episode_index")
    ax.grid(False)
    handles = [Patch(color=SEVERITY_COLOURS[s], label=s) for s in SEVERITIES]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    fig.suptitle(title)
    return save(fig, stem)


def worst_per_column(
    ranks: np.ndarray, max_columns: int = MAX_STRIP_COLUMNS
) -> tuple[np.ndarray, int]:
    """``ranks`` (int8 ``(checks, episodes)``, 0-3: none, info, warning, error) in at most
    ``max_columns`` columns: each the largest rank of a run of ``per_column`` consecutive
    episodes (the last run may be shorter). Returns ``(columns, per_column)``."""
    per_column = max(1, -(-ranks.shape[1] // max_columns))
    if per_column == 1:
        return ranks, 1
    padded = np.zeros((ranks.shape[0], -(-ranks.shape[1] // per_column) * per_column), np.int8)
    padded[:, : ranks.shape[1]] = ranks
    return padded.reshape(ranks.shape[0], -1, per_column).max(axis=2), per_column


def camera_findings(report: Mapping) -> list[Mapping]:
    """The findings of a camera stretch (:data:`CAMERA_CHECKS`, in one episode, with its
    camera and frames), most severe first, then by episode."""
    found = [f for f in report["findings"] if _drawable(f, CAMERA_CHECKS) and f.get("frames")]
    return _most_severe_first(found)


def signal_findings(report: Mapping) -> list[Mapping]:
    """The findings of a numeric feature in one episode (:data:`SIGNAL_CHECKS`), most severe
    first, then by episode."""
    found = [f for f in report["findings"] if _drawable(f, SIGNAL_CHECKS)]
    return _most_severe_first(found)


def cameras(
    report: Mapping,
    root: str,
    stem: str | Path,
    dataset: str,
    *,
    storage_options: dict | None = None,
    max_drawn: int = MAX_DRAWN,
) -> list[Path]:
    """A contact sheet: one row per flagged camera stretch (:func:`camera_findings`, the first
    ``max_drawn``), its first, middle and last frame decoded from the dataset at ``root``
    (:func:`robopipe.quality.read_episode_frames`). A stretch whose frames cannot be read
    shows why instead."""
    found = camera_findings(report)
    title = f"{dataset}: flagged camera stretches"
    if not found:
        return placeholder(stem, title, "no camera stretch was flagged")
    drawn = found[:max_drawn]
    title += f" ({len(drawn)} of {len(found)} shown: first, middle and last frame)"
    fig, axes = plt.subplots(
        len(drawn), 3, figsize=(WIDTH_IN * 0.75, 0.6 + THUMB_IN * len(drawn)),
        layout="constrained", squeeze=False,
    )  # fmt: skip
    for row, finding in zip(axes, drawn, strict=True):
        first, last = finding["frames"]
        wanted = [first, (first + last) // 2, last]
        try:
            frames = read_episode_frames(
                root, finding["episode_index"], finding["feature"], wanted,
                storage_options=storage_options,
            )  # fmt: skip
            failed = None
        except Exception as exc:  # an unreadable video is itself a finding: show why
            frames, failed = None, f"{type(exc).__name__}: {exc}"
        for i, ax in enumerate(row):
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if frames is None:
                ax.text(0.5, 0.5, failed, ha="center", va="center", fontsize=7, wrap=True)
            else:
                ax.imshow(frames[i])
            ax.set_xlabel(f"frame {wanted[i]}", fontsize=8)
        row[0].set_title(
            f"{finding['check']} ({finding['severity']}): {_where(finding)}",
            loc="left", fontsize=8,
        )  # fmt: skip
    fig.suptitle(title)
    return save(fig, stem)


def signals(
    report: Mapping,
    root: str,
    stem: str | Path,
    dataset: str,
    *,
    storage_options: dict | None = None,
    max_drawn: int = MAX_DRAWN,
) -> list[Path]:
    """One panel per numeric finding (:func:`signal_findings`, the first ``max_drawn``): its
    feature over its episode (the flagged dimension, else every dimension; for ``timestamp``
    its drift from ``frame_index / fps``, where quality.json gives ``fps``), read from the
    dataset at ``root`` (:func:`robopipe.quality.read_episode_columns`), its flagged frames
    shaded. A signal that cannot be read shows why instead."""
    found = signal_findings(report)
    title = f"{dataset}: flagged signals"
    if not found:
        return placeholder(stem, title, "no numeric feature was flagged")
    drawn = found[:max_drawn]
    title += f" ({len(drawn)} of {len(found)} shown; flagged frames shaded)"
    columns = 3 if len(drawn) > 1 else 1
    rows = -(-len(drawn) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(WIDTH_IN, 0.6 + 2.3 * rows), layout="constrained", squeeze=False
    )
    for ax, finding in zip(axes.flat, drawn, strict=False):
        feature, dim = finding["feature"], finding.get("dimension")
        try:
            values = read_episode_columns(
                root, finding["episode_index"], [feature], storage_options=storage_options
            )[feature]
        except Exception as exc:  # bad input is itself a finding: show why
            ax.text(0.5, 0.5, f"{type(exc).__name__}: {exc}", ha="center", va="center",
                    fontsize=7, wrap=True, transform=ax.transAxes)  # fmt: skip
        else:
            values = values.reshape(len(values), -1)
            if dim is not None and dim < values.shape[1]:
                values = values[:, [dim]]
            frames = np.arange(len(values))
            if feature == "timestamp" and report.get("fps"):  # the drift, not the clock
                values = values - (frames / float(report["fps"]))[:, None]
                ax.set_ylabel("timestamp drift, s", fontsize=8)
            ax.plot(frames, values, linewidth=0.9)
        if finding.get("frames"):
            first, last = finding["frames"]
            ax.axvspan(first - 0.5, last + 0.5, color=SEVERITY_COLOURS[finding["severity"]],
                       alpha=0.25, linewidth=0)  # fmt: skip
        ax.set_title(f"{finding['check']} ({finding['severity']})\n{_where(finding)}", fontsize=8)
        ax.set_xlabel("frame_index", fontsize=8)
    for ax in list(axes.flat)[len(drawn) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    return save(fig, stem)


def quality_figures(
    report_json: str | Path,
    episodes_parquet: str | Path,
    out_dir: str | Path,
    *,
    dataset: str,
    root: str,
    storage_options: dict | None = None,
    max_drawn: int = MAX_DRAWN,
) -> list[Path]:
    """Write the four quality figures (SVG and PNG: ``quality_checks``, ``quality_episodes``,
    ``quality_cameras``, ``quality_signals``) into ``out_dir`` from a dataset's quality.json
    and episodes.parquet, reading its flagged frames and signals from ``root`` (a folder or
    fsspec URL, with ``storage_options``); return the written paths. Every figure is always
    written: one with nothing to draw says why."""
    report = json.loads(Path(report_json).read_text(encoding="utf-8"))
    episodes = pd.read_parquet(episodes_parquet)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [c["name"] for c in report["checks"]]
    kwargs = {"storage_options": storage_options, "max_drawn": max_drawn}
    return [
        *checks(report, out / "quality_checks", dataset),
        *episodes_strip(episodes, names, out / "quality_episodes", dataset),
        *cameras(report, root, out / "quality_cameras", dataset, **kwargs),
        *signals(report, root, out / "quality_signals", dataset, **kwargs),
    ]
