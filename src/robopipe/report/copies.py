"""Which copy to train on: loader samples/s against size on disk per encoding (annotated with
PSNR), and a table in the spirit of lerobot's video benchmark (compression factor, load-time
factor, PSNR, SSIM).

Inputs: the copies' ``copy.json`` (``robopipe.copies.finish.finish_copy``), the scenario table
(``results.load_scenarios``) and the decode ceilings per encoding (``results.load_ceilings``).
The converted dataset itself appears as encoding ``converted``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from robopipe.layout import INFO_PATH
from robopipe.report.figures import WIDTH_IN, loader_colour, placeholder, save

CONVERTED = "converted"
NO_COPIES = "no training copy was benchmarked for this dataset (bench.matrix.encoding)"
COLUMNS = (
    "encoding",
    "loader",
    "workers",
    "samples_per_s",
    "load_time_factor",
    "size_mb",
    "compression_factor",
    "psnr_mean_db",
    "psnr_worst_db",
    "ssim_mean",
    "ssim_worst",
    "lossless",
    "encode_s",
    "random_frames_per_s_per_core",
    "sequential_frames_per_s_per_core",
)


def converted_entry(root: str | Path) -> dict:
    """``copy.json``-like fields of the converted dataset at ``root``: its mp4s' bytes and the
    raw bytes of its frames (every camera's frames at the info.json shape)."""
    root = Path(root)
    info = json.loads((root / INFO_PATH).read_text())
    frame_bytes = sum(p.stat().st_size for p in root.glob("videos/*/*/*.mp4"))
    raw = sum(
        info["total_frames"] * math.prod(f["shape"])
        for f in info["features"].values()
        if f["dtype"] == "video"
    )
    return {
        "encoding": CONVERTED,
        "frame_bytes": frame_bytes,
        "compression_factor": raw / frame_bytes if frame_bytes else None,
        "encode_s": 0.0,
        "fidelity": {"lossless": True},
    }


def copies_table(
    scenarios: pd.DataFrame, copies: list[dict], ceilings: dict, converted: dict | None
) -> pd.DataFrame:
    """One row per (encoding, loader, workers) of the local cpu single-frame scenarios.

    ``load_time_factor`` is, as in lerobot's video benchmark, the time to load a sample from
    this encoding over the time from the converted dataset with the same loader and workers
    (below 1: faster). ``compression_factor`` is raw frames (H x W x 3 bytes each) over the
    frames' bytes on disk. ``converted`` is ``copy.json``'s fields for the converted dataset
    (size and frames), or None.
    """
    by_encoding = {c["encoding"]: c for c in copies}
    if converted is not None:
        by_encoding[CONVERTED] = converted
    runs = scenarios[
        (scenarios["source"] == "local")
        & (scenarios["decode"] == "cpu")
        & (scenarios["mode"] == "single")
        & (scenarios["nodes"] == 1)
    ].copy()
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    runs["encoding"] = runs["encoding"].fillna(CONVERTED)
    base = runs[runs["encoding"] == CONVERTED].set_index(["loader", "workers"])["samples_per_s"]
    rows = []
    for run in runs.itertuples():
        copy = by_encoding.get(run.encoding, {})
        fidelity = copy.get("fidelity") or {}
        ceiling = ceilings.get(None if run.encoding == CONVERTED else run.encoding) or {}
        reference = base.get((run.loader, run.workers))
        rows.append(
            {
                "encoding": run.encoding,
                "loader": run.loader,
                "workers": run.workers,
                "samples_per_s": run.samples_per_s,
                "load_time_factor": reference / run.samples_per_s if reference else None,
                "size_mb": copy["frame_bytes"] / 2**20 if copy else None,
                "compression_factor": copy.get("compression_factor"),
                "psnr_mean_db": fidelity.get("psnr_mean_db"),
                "psnr_worst_db": fidelity.get("psnr_worst_db"),
                "ssim_mean": fidelity.get("ssim_mean"),
                "ssim_worst": fidelity.get("ssim_worst"),
                "lossless": fidelity.get("lossless", run.encoding in (CONVERTED, "original")),
                "encode_s": copy.get("encode_s"),
                "random_frames_per_s_per_core": ceiling.get("random_frames_per_s_per_core"),
                "sequential_frames_per_s_per_core": ceiling.get("sequential_frames_per_s_per_core"),
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.sort_values(["loader", "workers", "size_mb"]).reset_index(drop=True)


def fidelity_label(row) -> str:
    """``lossless``, or the mean and worst-frame PSNR in dB."""
    if row["lossless"] is True or row["lossless"] == 1:
        return "lossless"
    if pd.isna(row["psnr_mean_db"]):
        return "PSNR n/a"
    return f"{row['psnr_mean_db']:.1f} dB (worst {row['psnr_worst_db']:.1f})"


def figure(table: pd.DataFrame, stem: str | Path, dataset: str):
    """Samples/s against the frames' size on disk, one point per encoding and loader (workers
    in the marker), each annotated with its encoding and PSNR."""
    title = f"{dataset}: which copy to train on (samples/s against size, PSNR against the source)"
    rows = table.dropna(subset=["size_mb", "samples_per_s"])
    if rows.empty:
        return placeholder(stem, title, NO_COPIES)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.2), layout="constrained")
    markers = {0: "s", 1: "^", 2: "o", 4: "D", 8: "P"}
    for (loader, workers), group in rows.groupby(["loader", "workers"], sort=True):
        ax.plot(
            group["size_mb"], group["samples_per_s"], linestyle="none",
            marker=markers.get(workers, "o"), color=loader_colour(loader), markersize=7,
            label=f"{loader}, {workers} workers",
        )  # fmt: skip
        for _, row in group.iterrows():
            ax.annotate(
                f"{row['encoding']}\n{fidelity_label(row)}", (row["size_mb"], row["samples_per_s"]),
                textcoords="offset points", xytext=(6, 4), fontsize=7,
            )  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("frames on disk, MB (log scale; mp4s, or the data files holding the frames)")
    ax.set_ylabel("samples/s (steady window)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.legend(loc="upper right", fontsize=8)
    fig.suptitle(title)
    return save(fig, stem)
