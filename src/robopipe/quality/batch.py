"""The quality jobs: one per episode batch (:func:`check_batch`), then one merge
(:func:`merge_batches`) that runs the dataset-wide checks and writes quality.json and
episodes.parquet; :func:`verdict` says whether a run may pass under ``fail_on``.

A batch job holds one episode at a time: its columns (read once, pyarrow) and its sampled
frames' thumbnails, one camera at a time. Its partial result is a JSON file of per-episode
findings and small per-episode summaries (per dimension: min, max, sums; action delta scales;
a content hash and a 16-point signature), so the merge reads some hundred numbers per episode
and never a frame or a row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.atomic import atomic_path, write_json
from robopipe.errors import DatasetError
from robopipe.quality.dataset import open_dataset
from robopipe.quality.numeric import SIGNATURE_POINTS, EpisodeChecks, finding, summarise
from robopipe.quality.options import (
    ALL_CHECKS,
    CHECK_INFO,
    CHECKS,
    SEVERITY_RANK,
    QualityOptions,
)
from robopipe.quality.video import (
    DecodeStats,
    black_stretches,
    camera_luma,
    frozen_stretches,
    resolve_device,
    sample_indices,
)

PARTIAL_VERSION = 1
DUPLICATE_GRIDS = 4  # shifted grids hashed for near duplicates
DUPLICATE_CELL = 0.25  # grid cell, in typical ranges of each dimension
DUPLICATE_BUCKET = 64  # most earlier episodes of one bucket a signature is compared with
DUPLICATE_ROWS = 4096  # signatures whose grid cells are computed at a time
MAX_VERDICT_LINES = 50


# ---------------------------------------------------------------------------- batch job
def check_batch(
    root: str,
    episode_indices: Sequence[int],
    options: QualityOptions,
    out: Path,
    *,
    storage_options: dict | None = None,
) -> None:
    """Run the per-episode checks on ``episode_indices`` of the dataset at ``root`` (a v2.0,
    v2.1 or v3.0 folder or fsspec URL) and write the partial result to ``out`` (JSON,
    atomically).

    Each episode's signal and timestamp columns are read once; each camera's frames at
    :func:`robopipe.quality.video.sample_indices` (``options.decode``) are decoded on
    ``options.device``. A missing or unreadable data or video file is a finding
    (``missing_file``, ``unreadable_file``, ``unreadable_video``; error) of its episode.

    Raises:
        DatasetError: the dataset cannot be opened at all (no info.json, an unknown version,
            unreadable episode metadata), or an episode index is out of range.
    """
    dataset = open_dataset(root, storage_options=storage_options)
    episodes = [int(e) for e in episode_indices]
    for episode in episodes:
        dataset.check_episode(episode)
    signals = dataset.signal_keys
    observations = [k for k in signals if k.startswith("observation.")]
    actions = [k for k in signals if k.startswith("action")]
    names = {k: dataset.dimension_names(k) for k in signals}
    checks = EpisodeChecks(options, dataset.fps, names)
    cameras_on = options.enabled("frozen_camera") or options.enabled("black_camera")
    used, fallback = resolve_device(options.device) if cameras_on else ("cpu", None)
    decode = DecodeStats(device=options.device, used=used, fallback=fallback)
    header_findings: list[dict] = []
    stored: dict[int, dict] = {}
    if options.enabled("stats_mismatch"):
        try:
            stored = dataset.stored_episode_stats(episodes)
        except DatasetError as err:
            header_findings.append(
                finding("unreadable_file", "error", None, err.reason, feature=err.file)
            )
    extra = [c for c in ("timestamp", "frame_index") if c in dataset.features]
    records = []
    for episode in episodes:
        record = {"episode_index": episode, "length": int(dataset.lengths[episode])}
        found: list[dict] = []
        columns = _read_columns(dataset, episode, [*signals, *extra], found)
        if columns is not None:
            values = {k: columns[k] for k in signals}
            for key, array in values.items():
                if options.enabled("nan_inf") and array.dtype.kind == "f":
                    found += checks.nan_inf(episode, key, array)
                if options.enabled("frozen_signal") and key in observations:
                    found += checks.frozen_signal(episode, key, array)
                if options.enabled("clipped_dimension"):
                    found += checks.clipped_dimension(episode, key, array)
            if options.enabled("timestamp_drift") and "timestamp" in columns:
                found += checks.timestamp_drift(
                    episode, columns["timestamp"], columns.get("frame_index")
                )
            if episode in stored:
                found += checks.stats_mismatch(episode, stored[episode], values)
            features, digest, signature = summarise(values, actions)
            record.update(
                features=features, hash=digest, signature=[round(float(v), 7) for v in signature]
            )
        if cameras_on:
            found += _camera_findings(dataset, episode, options, decode)
        record["findings"] = found
        records.append(record)
    partial = {
        "version": PARTIAL_VERSION,
        "dataset": {
            "name": dataset.name,
            "codebase_version": dataset.version,
            "fps": dataset.fps,
            "total_episodes": dataset.num_episodes,
            "signals": signals,
            "observations": observations,
            "actions": actions,
            "names": names,
            "cameras": dataset.video_keys,
            "unknown_features": dataset.unknown_keys,
            "global_stats": _global_stats_lists(dataset, header_findings)
            if options.enabled("stats_mismatch")
            else {},
        },
        "decode": {"mode": options.decode, "sample_s": options.sample_s, **decode.to_dict()},
        "findings": header_findings,
        "episodes": records,
    }
    write_json(out, partial, indent=None)


def _read_columns(dataset, episode: int, keys: list[str], found: list[dict]) -> dict | None:
    """The episode's columns ``keys``; None (and a finding in ``found``) where its data file
    is missing or unreadable."""
    try:
        return dataset.columns(episode, keys)
    except FileNotFoundError:
        found.append(
            finding(
                "missing_file",
                "error",
                episode,
                f"data file {dataset.data_file(episode)} is missing",
                feature="data",
            )  # fmt: skip
        )
    except (DatasetError, ValueError) as err:
        found.append(
            finding(
                "unreadable_file",
                "error",
                episode,
                str(getattr(err, "reason", err)),
                feature="data",
            )  # fmt: skip
        )
    return None


def _camera_findings(dataset, episode: int, options: QualityOptions, decode: DecodeStats):
    """``frozen_camera`` and ``black_camera`` (or ``missing_file`` / ``unreadable_video``)
    findings of every camera of one episode."""
    found: list[dict] = []
    length = int(dataset.lengths[episode])
    indices = sample_indices(length, dataset.fps, options.sample_s, options.decode)
    if not len(indices):
        return found
    for key in dataset.video_keys:
        path = dataset.video_file(episode, key)
        if not dataset.fs.exists(path):
            found.append(
                finding(
                    "missing_file", "error", episode, f"video file {path} is missing", feature=key
                )  # fmt: skip
            )
            continue
        snap_s = options.sample_s / 2 if options.decode == "sample" else 0.0
        try:
            decoded, luma = camera_luma(
                dataset,
                path,
                dataset.video_start_s(episode, key),
                indices,
                episode,
                decode,
                snap_s=snap_s,
            )
        except DatasetError as err:
            found.append(finding("unreadable_video", "error", episode, err.reason, feature=key))
            continue
        if options.enabled("frozen_camera"):
            for stretch in frozen_stretches(
                decoded,
                luma,
                dataset.fps,
                options.frozen_camera_s,
                options.frozen_camera_diff,
                options.black_luma if options.enabled("black_camera") else None,
            ):
                found.append(
                    finding(
                        "frozen_camera",
                        options.severity_of("frozen_camera"),
                        episode,
                        f"{key} shows one picture for {stretch.seconds:.2f} s (frames "
                        f"{stretch.first}-{stretch.last}; largest change between samples "
                        f"{stretch.value:.2f} luma levels)",
                        feature=key,
                        frames=(stretch.first, stretch.last),
                        value=stretch.seconds,
                        threshold=options.frozen_camera_s,
                    )  # fmt: skip
                )
        if options.enabled("black_camera"):
            for stretch in black_stretches(
                decoded, luma, dataset.fps, options.black_camera_s, options.black_luma
            ):
                found.append(
                    finding(
                        "black_camera",
                        options.severity_of("black_camera"),
                        episode,
                        f"{key} is black for {stretch.seconds:.2f} s (frames "
                        f"{stretch.first}-{stretch.last}; mean luma at most {stretch.value:.1f})",
                        feature=key,
                        frames=(stretch.first, stretch.last),
                        value=stretch.seconds,
                        threshold=options.black_camera_s,
                    )  # fmt: skip
                )
    return found


def _global_stats_lists(dataset, found: list[dict]) -> dict:
    try:
        stats = dataset.stored_global_stats()
    except DatasetError as err:
        found.append(finding("unreadable_file", "error", None, err.reason, feature=err.file))
        return {}
    keep = set(dataset.signal_keys)
    return {
        k: {s: v.reshape(-1).tolist() for s, v in e.items() if s in ("min", "max", "mean", "std")}
        for k, e in stats.items()
        if k in keep
    }


# ---------------------------------------------------------------------------- merge job
class _Collected:
    """The partials' per-episode summaries as arrays, one row per episode that has them,
    ordered by episode index (:meth:`finish`): one block of rows per partial while reading,
    so that the merge holds numbers, not an object per episode and value."""

    def __init__(self) -> None:
        self.head: dict | None = None
        self.decode: dict | None = None
        self.findings: list[dict] = []
        self.lengths: dict[int, int] = {}
        self.rows: np.ndarray | list = []  # episode of each summary row
        self.hashes: list[str] = []
        self.signatures: np.ndarray | list = []
        self._blocks: dict[tuple[str, str], list[np.ndarray]] = {}
        self._arrays: dict[tuple[str, str], np.ndarray] = {}

    def add(self, partial: dict, path: Path) -> None:
        if partial.get("version") != PARTIAL_VERSION:
            raise ValueError(f"{path}: not a quality partial of version {PARTIAL_VERSION}")
        if self.head is None:
            self.head = partial["dataset"]
        self.decode = _add_decode(self.decode, partial["decode"])
        self.findings += partial.get("findings", [])
        summarised = []
        for record in partial["episodes"]:
            episode = int(record["episode_index"])
            self.lengths[episode] = int(record["length"])
            self.findings += record["findings"]
            if "features" in record:
                summarised.append(record)
        if not summarised:
            return
        self.rows += [int(r["episode_index"]) for r in summarised]
        self.hashes += [r["hash"] for r in summarised]
        self.signatures.append(np.array([r["signature"] for r in summarised], np.float32))
        for key, entry in summarised[0]["features"].items():
            for stat in entry:
                block = np.array([r["features"][key][stat] for r in summarised], np.float64)
                self._blocks.setdefault((key, stat), []).append(block)

    def finish(self) -> None:
        """Join the blocks and order the rows by episode index (partials come in any
        order)."""
        rows = np.asarray(self.rows, np.int64)
        order = np.argsort(rows, kind="stable")
        # partials in episode order (the jobs' usual order) need no reordered copy
        ordered = bool(np.array_equal(order, np.arange(len(order))))

        def joined(blocks: list[np.ndarray]) -> np.ndarray:
            array = np.concatenate(blocks)
            blocks.clear()  # each block freed as soon as it is joined
            return array if ordered else array[order]

        self.rows = rows[order]
        self.hashes = self.hashes if ordered else [self.hashes[i] for i in order]
        self.signatures = joined(self.signatures) if self.signatures else np.zeros((0, 0))
        for name in list(self._blocks):
            blocks = self._blocks.pop(name)
            if sum(len(b) for b in blocks) == len(order):
                self._arrays[name] = joined(blocks)

    @property
    def features(self) -> set[str]:
        """The signal features that have summaries."""
        return {key for key, _ in self._arrays}

    def has(self, key: str, stat: str) -> bool:
        return (key, stat) in self._arrays

    def matrix(self, key: str, stat: str) -> np.ndarray:
        """``(summary rows, dims)`` float64 of one feature's stat."""
        return self._arrays[(key, stat)]


def _add_decode(total: dict | None, part: dict) -> dict:
    if total is None:
        return dict(part)
    out = dict(total)
    for key in ("frames_decoded", "files", "gpu_files"):
        out[key] = out.get(key, 0) + part.get(key, 0)
    out["decode_s"] = round(out.get("decode_s", 0) + part.get("decode_s", 0), 3)
    if part.get("used") == "cpu":
        out["used"] = "cpu"
    out["fallback"] = out.get("fallback") or part.get("fallback")
    return out


def merge_batches(
    partials: Sequence[Path],
    out_dir: Path,
    *,
    dataset: str,
    source: str,
    options: QualityOptions,
) -> dict:
    """Merge the batch jobs' ``partials``, run the dataset-wide checks (constant_dimension,
    action_jump, idle_episode, episode_length_outlier, duplicate_episode, the global part of
    stats_mismatch) and write ``out_dir/quality.json`` and ``out_dir/episodes.parquet``
    atomically. Returns the quality.json content.

    Memory: the partials' small per-episode summaries (a few hundred numbers an episode).

    Raises:
        ValueError: no partials, or a file that is not a quality partial.
    """
    if not partials:
        raise ValueError("no quality partials to merge")
    collected = _Collected()
    for path in partials:
        collected.add(json.loads(Path(path).read_text(encoding="utf-8")), Path(path))
    collected.finish()
    head = collected.head
    checks = EpisodeChecks(options, head["fps"], head["names"])
    found = list(collected.findings)
    for key in head.get("unknown_features", []):
        found.append(
            finding(
                "unknown_feature",
                options.severity_of("unknown_feature"),
                None,
                f"feature {key} has a dtype the quality checks do not read",
                feature=key,
            )  # fmt: skip
        )
    if options.enabled("constant_dimension"):
        found += _constant_dimension(collected, checks)
    if options.enabled("action_jump"):
        found += _action_jump(collected, checks)
    if options.enabled("idle_episode"):
        found += _idle_episode(collected, checks)
    if options.enabled("episode_length_outlier"):
        found += _length_outlier(collected, checks)
    if options.enabled("duplicate_episode"):
        found += _duplicates(collected, checks)
    if options.enabled("stats_mismatch"):
        found += _global_stats(collected, checks)
    order = {name: i for i, name in enumerate(ALL_CHECKS)}
    found.sort(
        key=lambda f: (
            -1 if f["episode_index"] is None else f["episode_index"],
            order.get(f["check"], len(order)),
            f.get("feature") or "",
            f.get("dimension", -1),
        )
    )
    lengths = collected.lengths
    report = {
        "dataset": dataset,
        "source": source,
        "codebase_version": head["codebase_version"],
        "episodes": len(lengths),
        "fps": head["fps"],
        "decode": collected.decode,
        "counts": {s: sum(f["severity"] == s for f in found) for s in ("error", "warning", "info")},
        "checks": _check_rows(found, options),
        "findings": found,
        "options": options.to_config(),
    }
    out_dir = Path(out_dir)
    _write_episodes(out_dir / "episodes.parquet", lengths, found)
    write_json(out_dir / "quality.json", report, indent=2)
    return report


def _check_rows(found: list[dict], options: QualityOptions) -> list[dict]:
    names = list(CHECKS) + [
        c for c in ALL_CHECKS[len(CHECKS) :] if any(f["check"] == c for f in found)
    ]
    rows = []
    for name in names:
        mine = [f for f in found if f["check"] == name]
        rows.append(
            {
                "name": name,
                "severity": options.severity_of(name),
                "threshold": options.threshold_of(name),
                "episodes_flagged": len(
                    {f["episode_index"] for f in mine if f["episode_index"] is not None}
                ),
                "findings": len(mine),
                "description": CHECK_INFO[name][1],
            }
        )
    return rows


def _write_episodes(path: Path, lengths: dict[int, int], found: list[dict]) -> None:
    """episodes.parquet: ``episode_index``, ``length`` and per check the episode's worst
    severity (``""`` for none)."""
    episodes = np.array(sorted(lengths), np.int64)
    # per check, each episode's worst severity as its rank (one byte an episode)
    worst = {name: np.zeros(len(episodes), np.int8) for name in ALL_CHECKS}
    for f in found:
        episode = f["episode_index"]
        if episode is None or f["check"] not in worst:
            continue
        i = int(np.searchsorted(episodes, episode))
        if i < len(episodes) and episodes[i] == episode:
            worst[f["check"]][i] = max(worst[f["check"]][i], SEVERITY_RANK[f["severity"]])
    names = np.array(sorted(SEVERITY_RANK, key=SEVERITY_RANK.get))  # by rank
    table = pa.table(
        {
            "episode_index": pa.array(episodes, pa.int64()),
            "length": pa.array([lengths[int(e)] for e in episodes], pa.int64()),
            **{name: pa.array(names[worst[name]], pa.string()) for name in ALL_CHECKS},
        }
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


# ---------------------------------------------------------------------------- dataset-wide
def _ranges(collected: _Collected, key: str) -> np.ndarray:
    return collected.matrix(key, "max") - collected.matrix(key, "min")


def _constant_dimension(collected: _Collected, checks: EpisodeChecks) -> list[dict]:
    """``constant_dimension``: a dimension holds one value through an episode (of 2 frames or
    more). Where it moves in most other episodes, a warning (a sensor or command that died
    for the episode); where it is constant in most episodes, or it is a gripper
    (``info_dimensions``), info. A dimension constant in every episode is one info finding
    for the dataset (an unused degree of freedom). After lerobot-doctor 0.2.0, which warns on
    dimensions with zero variance over the whole dataset (checks/statistics.py) and on
    dimensions static in most of an episode in over 80 % of the episodes
    (checks/anomalies.py)."""
    out = []
    rows = np.asarray(collected.rows)
    if not len(rows):
        return out
    long_enough = np.array([collected.lengths[e] >= 2 for e in rows])
    for key in collected.head["signals"]:
        if key not in collected.features:
            continue
        span = _ranges(collected, key)
        constant = (span == 0) & long_enough[:, None]
        for dim in range(span.shape[1]):
            hits = np.flatnonzero(constant[:, dim])
            if not len(hits):
                continue
            share = len(hits) / int(long_enough.sum() or 1)
            if len(hits) == int(long_enough.sum()):
                value = collected.matrix(key, "min")[hits[0], dim]
                out.append(
                    finding(
                        "constant_dimension",
                        "info",
                        None,
                        f"{checks.label(key, dim)} is {value:.6g} in every episode "
                        "(an unused degree of freedom?)",
                        feature=key,
                        dimension=dim,
                        value=value,
                    )  # fmt: skip
                )
                continue
            severity = checks.severity("constant_dimension", key, dim)
            if share > 0.5 and severity != "off":
                severity = "info"
            for row in hits:
                value = collected.matrix(key, "min")[row, dim]
                out.append(
                    finding(
                        "constant_dimension",
                        severity,
                        int(rows[row]),
                        f"{checks.label(key, dim)} holds {value:.6g} through the episode "
                        f"(constant in {share:.0%} of the episodes)",
                        feature=key,
                        dimension=dim,
                        value=value,
                        frames=(0, collected.lengths[int(rows[row])] - 1),
                    )  # fmt: skip
                )
    return out


def _action_jump(collected: _Collected, checks: EpisodeChecks) -> list[dict]:
    """``action_jump``: a frame-to-frame change of an action dimension whose robust z-score
    ``|delta - median| / (1.4826 * MAD)`` is at least ``action_jump_z`` and which is at least
    ``action_jump_span`` of the dimension's range over the dataset. The MAD is the median over
    episodes of each episode's MAD of that dimension's deltas (where it is 0, 1.2533 times the
    median of their mean absolute deviations, the same scale for normal data); the span guard
    keeps quantised or mostly idle dimensions, whose MAD is one quantum or 0, from flagging
    every movement (cr5's joint velocities). Dimensions named by ``info_dimensions`` (a
    gripper, which opens and closes in steps) are left out. lerobot-doctor 0.2.0
    (checks/actions.py) divides deltas by their global standard deviation and flags a mean
    over dimensions above 8; the median and MAD are not moved by the jumps themselves, and
    the largest dimension is reported."""
    out = []
    threshold = checks.options.action_jump_z
    rows = np.asarray(collected.rows)
    for key in collected.head["actions"]:
        if not collected.has(key, "delta_mad"):
            continue
        mad = collected.matrix(key, "delta_mad")
        scale = 1.4826 * np.median(mad, axis=0)
        fallback = 1.2533 * np.median(collected.matrix(key, "delta_mean"), axis=0)
        scale = np.where(scale > 0, scale, fallback)
        largest = collected.matrix(key, "delta_max")
        with np.errstate(all="ignore"):
            span = np.nanmax(collected.matrix(key, "max"), axis=0) - np.nanmin(
                collected.matrix(key, "min"), axis=0
            )
            z = np.where(scale > 0, largest / scale, 0.0)
        z[largest < checks.options.action_jump_span * span] = 0.0
        gripper = [checks.is_info_dimension(key, d) for d in range(z.shape[1])]
        z[:, np.asarray(gripper, bool)] = 0.0  # a gripper opens and closes in steps
        frames = collected.matrix(key, "delta_frame")
        for row in np.flatnonzero((z >= threshold).any(axis=1)):
            dim = int(np.argmax(z[row]))
            frame = int(frames[row, dim])
            jumps = int((z[row] >= threshold).sum())
            out.append(
                finding(
                    "action_jump",
                    checks.severity("action_jump"),
                    int(rows[row]),
                    f"{checks.label(key, dim)} changes by {largest[row, dim]:.4g} "
                    f"({largest[row, dim] / span[dim]:.0%} of its range, "
                    f"{z[row, dim]:.0f} robust z-scores) from frame {frame} to {frame + 1}"
                    + (f"; {jumps} dimensions jump" if jumps > 1 else ""),
                    feature=key,
                    dimension=dim,
                    frames=(frame, frame + 1),
                    value=float(z[row, dim]),
                    threshold=threshold,
                )  # fmt: skip
            )
    return out


def _idle_episode(collected: _Collected, checks: EpisodeChecks) -> list[dict]:
    """``idle_episode``: every dimension of the observations (the actions where there are
    none) spans less than ``idle_ratio`` of its median span over the episodes: a recording
    in which the robot did not move. lerobot-doctor 0.2.0 has no such check; it flags
    idle episodes only through their frozen actions."""
    head = collected.head
    keys = [k for k in (head["observations"] or head["actions"]) if k in collected.features]
    if not keys or len(collected.rows) < 2:
        return []
    spans = np.concatenate([_ranges(collected, k) for k in keys], axis=1)
    typical = np.nanmedian(spans, axis=0)
    moving = typical > 0
    if not moving.any():
        return []
    with np.errstate(invalid="ignore"):
        motion = np.nanmax(spans[:, moving] / typical[moving], axis=1)
    out = []
    for row in np.flatnonzero(motion < checks.options.idle_ratio):
        episode = int(collected.rows[row])
        out.append(
            finding(
                "idle_episode",
                checks.severity("idle_episode"),
                episode,
                f"the robot barely moves: every dimension of {', '.join(keys)} spans at most "
                f"{motion[row]:.2%} of its median span over the episodes",
                frames=(0, collected.lengths[episode] - 1),
                value=float(motion[row]),
                threshold=checks.options.idle_ratio,
            )  # fmt: skip
        )
    return out


def _length_outlier(collected: _Collected, checks: EpisodeChecks) -> list[dict]:
    """``episode_length_outlier``: an episode whose length has a robust z-score
    ``|length - median| / (1.4826 * MAD)`` of at least ``length_z`` (Iglewicz and Hoaglin's
    modified z-score; lerobot-doctor 0.2.0 checks/episodes.py uses 3 standard deviations
    from the mean, which the outliers themselves inflate), or that is shorter than
    ``length_min_s`` (lerobot-doctor: shorter than ``max(5, fps)`` frames)."""
    episodes = sorted(collected.lengths)
    lengths = np.array([collected.lengths[e] for e in episodes], dtype=np.float64)
    if not len(lengths):
        return []
    median = float(np.median(lengths))
    scale = 1.4826 * float(np.median(np.abs(lengths - median)))
    scale = scale if scale > 0 else max(1.0, 0.01 * median)
    z = np.abs(lengths - median) / scale
    shortest = max(5, math.ceil(checks.options.length_min_s * checks.fps))
    out = []
    for i in np.flatnonzero((z >= checks.options.length_z) | (lengths < shortest)):
        why = (
            f"shorter than {shortest} frames ({checks.options.length_min_s} s)"
            if lengths[i] < shortest
            else f"{z[i]:.1f} robust z-scores from the median {median:.0f}"
        )
        out.append(
            finding(
                "episode_length_outlier",
                checks.severity("episode_length_outlier"),
                episodes[i],
                f"{int(lengths[i])} frames: {why}",
                value=float(lengths[i]),
                threshold=checks.options.length_z,
            )  # fmt: skip
        )
    return out


def _duplicates(collected: _Collected, checks: EpisodeChecks) -> list[dict]:
    """``duplicate_episode``, O(episodes) by hashing, never pairwise.

    Exact: equal SHA-1 of the signal columns' bytes. Near: each episode's signature (every
    signal dimension resampled at 16 evenly spaced times) divided by the dimension's median
    span over episodes, then cut into cells of 0.25 spans on 4 randomly shifted grids; the
    episodes sharing a cell vector on any grid are compared, and a pair whose signatures
    differ by at most ``duplicate_tolerance`` everywhere, with lengths within 5 %, is a near
    duplicate. The later episode is flagged, naming the earlier. lerobot-doctor 0.2.0
    (checks/anomalies.py) compares the first and last 10 action values of every pair."""
    rows = np.asarray(collected.rows)
    out = []
    first_of: dict[str, int] = {}
    exact: set[int] = set()
    for row, digest in enumerate(collected.hashes):
        if digest in first_of:
            exact.add(row)
            earlier = int(rows[first_of[digest]])
            out.append(
                finding(
                    "duplicate_episode",
                    checks.severity("duplicate_episode"),
                    int(rows[row]),
                    f"an exact copy of episode {earlier}",
                    value=earlier,
                )  # fmt: skip
            )
        else:
            first_of[digest] = row
    if len(rows) < 2 or not collected.signatures.shape[1]:
        return out
    spans = [np.nanmedian(_ranges(collected, k), axis=0) for k in collected.head["signals"]
             if k in collected.features]  # fmt: skip
    scale = np.repeat(np.concatenate(spans), SIGNATURE_POINTS)
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    # float32 as stored (8 bytes an episode and dimension in float64: 270 MB more at 80,000
    # episodes, with the intermediate); the cells are cut in float64, a block at a time
    signatures = collected.signatures / scale.astype(np.float32)
    lengths = np.array([collected.lengths[int(e)] for e in rows], dtype=np.float64)
    tolerance = checks.options.duplicate_tolerance
    flagged: set[int] = set(exact)
    rng = np.random.default_rng(0)
    for _grid in range(DUPLICATE_GRIDS):
        offsets = rng.random(signatures.shape[1])
        buckets: dict[int, list[int]] = {}
        for row, key in enumerate(_cell_keys(signatures, offsets)):
            members = buckets.setdefault(key, [])
            if row not in flagged:
                for other in members[-DUPLICATE_BUCKET:]:
                    diff = float(np.max(np.abs(signatures[row] - signatures[other])))
                    close = abs(lengths[row] - lengths[other]) <= 0.05 * max(lengths[row], 1)
                    if (
                        diff <= tolerance
                        and close
                        and collected.hashes[row] != collected.hashes[other]
                    ):
                        flagged.add(row)
                        out.append(
                            finding(
                                "duplicate_episode",
                                checks.severity("duplicate_episode"),
                                int(rows[row]),
                                f"a near copy of episode {int(rows[other])} (signals within "
                                f"{diff:.2%} of their typical span)",
                                value=int(rows[other]),
                                threshold=tolerance,
                            )  # fmt: skip
                        )
                        break
            members.append(row)
    return out


def _cell_keys(signatures: np.ndarray, offsets: np.ndarray) -> list[int]:
    """Each signature's grid cell (``floor(signature / DUPLICATE_CELL + offsets)``, one
    integer per dimension) as one 64-bit key: the cells' dot product with random odd
    multipliers, wrapping. Made ``DUPLICATE_ROWS`` signatures at a time, so that memory holds
    8 bytes per episode, not the cells (8 bytes per dimension: 130 MB more at the
    DROID-shaped 20k episodes). Two cells with one key only add comparisons, which decide."""
    odd = np.random.default_rng(1).integers(0, 2**63, signatures.shape[1], dtype=np.uint64)
    multipliers = odd | np.uint64(1)
    keys: list[int] = []
    for start in range(0, len(signatures), DUPLICATE_ROWS):
        block = signatures[start : start + DUPLICATE_ROWS].astype(np.float64)
        cells = np.floor(block / DUPLICATE_CELL + offsets).astype(np.int64).view(np.uint64)
        with np.errstate(over="ignore"):
            keys += (cells * multipliers).sum(axis=1, dtype=np.uint64).tolist()
    return keys


def _global_stats(collected: _Collected, checks: EpisodeChecks) -> list[dict]:
    """The global part of ``stats_mismatch``: ``meta/stats.json``'s min, max, mean and std
    (population) of each signal feature against the same stats of every episode's rows
    together (from the episodes' counts, sums and squared deviations, combined as
    lerobot 0.6.1 ``aggregate_stats`` combines means and variances), within ``stats_rtol``
    as the per-episode check."""
    out = []
    stored = collected.head.get("global_stats") or {}
    rtol = checks.options.stats_rtol
    for key, entry in stored.items():
        if key not in collected.features:
            continue
        count = collected.matrix(key, "count").sum(axis=0)
        if not count.all():
            continue
        counts = collected.matrix(key, "count")
        sums = collected.matrix(key, "sum")
        mean = sums.sum(axis=0) / count
        with np.errstate(invalid="ignore", divide="ignore"):  # Chan et al.'s pairwise update
            means = np.where(counts > 0, sums / counts, mean)
        spread = collected.matrix(key, "m2") + counts * (means - mean) ** 2
        variance = spread.sum(axis=0) / count
        data = {
            "min": np.nanmin(collected.matrix(key, "min"), axis=0),
            "max": np.nanmax(collected.matrix(key, "max"), axis=0),
            "mean": mean,
            "std": np.sqrt(variance),
        }
        scale = np.maximum(np.abs(data["min"]), np.abs(data["max"]))
        for stat in ("min", "max", "mean", "std"):
            if stat not in entry:
                continue
            have = np.asarray(entry[stat], np.float64).reshape(-1)
            want = data[stat]
            if have.shape != want.shape:
                continue
            bad = np.abs(have - want) > rtol * (np.abs(want) + scale)
            if bad.any():
                dim = int(np.flatnonzero(bad)[0])
                out.append(
                    finding(
                        "stats_mismatch",
                        checks.severity("stats_mismatch"),
                        None,
                        f"meta/stats.json {stat} of {key}[{dim}] is {have[dim]:.6g}, the "
                        f"data's is {want[dim]:.6g}",
                        feature=key,
                        dimension=dim,
                        value=float(have[dim]),
                        threshold=rtol,
                    )  # fmt: skip
                )
                break
    return out


# ---------------------------------------------------------------------------- verdict
def verdict(report: Mapping, fail_on: str) -> str | None:
    """None when a run may pass under ``fail_on`` (``"never"``, ``"error"``, ``"warning"``);
    else a message naming every finding at least that severe (check, episode, feature,
    frames), at most 50 lines of them.

    Raises:
        ValueError: an unknown ``fail_on``.
    """
    if fail_on not in ("never", "error", "warning"):
        raise ValueError(f"fail_on must be never, error or warning, not {fail_on!r}")
    if fail_on == "never":
        return None
    floor = SEVERITY_RANK[fail_on]
    failing = [
        f for f in report.get("findings", []) if SEVERITY_RANK.get(f["severity"], 0) >= floor
    ]
    if not failing:
        return None
    lines = [
        f"quality of {report.get('dataset', '?')}: {len(failing)} finding(s) at or above "
        f"{fail_on} (fail_on: {fail_on}):"
    ]
    for f in failing[:MAX_VERDICT_LINES]:
        where = "dataset" if f["episode_index"] is None else f"episode {f['episode_index']}"
        parts = [f"  {where}: {f['check']} ({f['severity']})"]
        if f.get("feature"):
            parts.append(f["feature"] + (f"[{f['dimension']}]" if "dimension" in f else ""))
        if f.get("frames"):
            parts.append(f"frames {f['frames'][0]}-{f['frames'][1]}")
        lines.append(" ".join(parts) + f": {f['message']}")
    if len(failing) > MAX_VERDICT_LINES:
        lines.append(f"  ... and {len(failing) - MAX_VERDICT_LINES} more")
    return "\n".join(lines)
