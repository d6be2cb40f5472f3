"""robopipe against its peers: per source, robopipe's best loader and the best peer's.

Inputs: the scenario table (:func:`robopipe.report.tables.load_scenarios`) and the peer
loaders the run skipped, with why (:func:`robopipe.workflow.bench.skipped_peers`).
"""

from __future__ import annotations

import pandas as pd

from robopipe.bench.registry import get_loader

SOURCES = ("local", "http", "s3", "hf")
# the representations both sides read: the converted dataset (empty) and the Lance layout of
# its very mp4s; other training copies (jpeg90, ...) hold other frames
SAME_FRAMES = (None, "lance")
COLUMNS = [
    "source",
    "mode",
    "workers",
    "robopipe_loader",
    "robopipe_samples_per_s",
    "peer_loader",
    "peer_version",
    "peer_samples_per_s",
    "peer_items_equal",
    "robopipe_over_peer",
    "note",
]


def peers_table(table: pd.DataFrame, skipped: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per (source, frame mode, workers) measured for both robopipe and a peer, on one
    node, on the cpu, on the converted dataset's frames (its own files, or for LanceDBDataset
    their Lance layout; not the loaders of a robomimic HDF5 file): robopipe's fastest loader
    and the fastest peer, samples/s each, and ``robopipe_over_peer`` (above 1: robopipe is
    faster). A (source, mode, workers) measured by only one side has the other's columns empty
    and says so in ``note``. Then one row per skipped peer loader (``skipped``: loader -> why),
    with ``note`` the reason.
    """
    reads_v30 = table["loader"].map(lambda name: not get_loader(name).robomimic_only)
    runs = table[
        reads_v30
        & (table["nodes"] == 1)
        & (table["decode"] == "cpu")
        & table["encoding"].apply(lambda e: (None if pd.isna(e) else e) in SAME_FRAMES)
        & table["source"].isin(SOURCES)
    ]
    rows = []
    for (source, mode, workers), group in runs.groupby(["source", "mode", "workers"], sort=False):
        ours = _fastest(group[~group["peer"].astype(bool)])
        theirs = _fastest(group[group["peer"].astype(bool)])
        if ours is None and theirs is None:
            continue
        both = ours is not None and theirs is not None
        rows.append(
            {
                "source": source,
                "mode": mode,
                "workers": int(workers),
                "robopipe_loader": None if ours is None else ours["loader"],
                "robopipe_samples_per_s": None if ours is None else ours["samples_per_s"],
                "peer_loader": None if theirs is None else theirs["loader"],
                "peer_version": None if theirs is None else theirs.get("peer_version"),
                "peer_samples_per_s": None if theirs is None else theirs["samples_per_s"],
                "peer_items_equal": None if theirs is None else theirs.get("peer_items_equal"),
                "robopipe_over_peer": (
                    ours["samples_per_s"] / theirs["samples_per_s"] if both else None
                ),
                "note": None if both else f"no {'peer' if ours is not None else 'robopipe'} run",
            }
        )
    order = {s: i for i, s in enumerate(SOURCES)}
    rows.sort(key=lambda r: (order[r["source"]], r["mode"], r["workers"]))
    rows += [
        {"peer_loader": loader, "note": f"skipped: {why}"}
        for loader, why in (skipped or {}).items()
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def _fastest(runs: pd.DataFrame) -> pd.Series | None:
    """The run with the most samples/s, or None."""
    runs = runs.dropna(subset=["samples_per_s"])
    return None if runs.empty else runs.loc[runs["samples_per_s"].idxmax()]
