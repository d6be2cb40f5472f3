"""The numeric checks of one episode, and the small summary of it that the dataset-wide checks
need (ranges, delta scales, sums for the global stats, a content hash and a signature).

Which features each check reads: every numeric feature but the bookkeeping columns
(``timestamp``, ``frame_index``, ``episode_index``, ``index``, ``task_index``) for
``nan_inf``, ``constant_dimension``, ``clipped_dimension``, ``stats_mismatch`` and
``duplicate_episode``; observation features (``observation.*``) for ``frozen_signal`` and,
where the dataset has them, ``idle_episode`` (else its actions); ``action*`` features for
``action_jump``; the ``timestamp`` column for ``timestamp_drift``.
"""

from __future__ import annotations

import hashlib

import numpy as np

from robopipe.layout import DEFAULT_TOLERANCE_S
from robopipe.quality.options import QualityOptions

SIGNATURE_POINTS = 16  # points per dimension of a duplicate_episode signature
MIN_CLIPPED_RUN = 3  # frames: a clipped dimension sits at its extreme in runs this long
STAT_NAMES = ("min", "max", "mean", "std", "count")


def finding(
    check: str,
    severity: str,
    episode: int | None,
    message: str,
    *,
    feature: str | None = None,
    dimension: int | None = None,
    frames: tuple[int, int] | None = None,
    value: float | None = None,
    threshold: float | None = None,
) -> dict:
    """One finding as quality.json holds it (keys that do not apply are left out)."""
    out: dict = {"check": check, "severity": severity, "episode_index": episode}
    if feature is not None:
        out["feature"] = feature
    if dimension is not None:
        out["dimension"] = int(dimension)
    if frames is not None:
        out["frames"] = [int(frames[0]), int(frames[1])]
    if value is not None:
        out["value"] = _plain(value)
    if threshold is not None:
        out["threshold"] = _plain(threshold)
    out["message"] = message
    return out


def _plain(value: float):
    value = float(value)
    if not np.isfinite(value):
        return str(value)
    return int(value) if value.is_integer() and abs(value) < 2**53 else round(value, 6)


def as_matrix(values: np.ndarray) -> np.ndarray:
    """``(frames,)`` or ``(frames, D)`` values as a float64 ``(frames, D)`` matrix."""
    values = np.asarray(values, dtype=np.float64)
    return values.reshape(len(values), -1)


def runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) positions of each run of True in a bool array."""
    padded = np.concatenate([[False], np.asarray(flags, bool), [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]


class EpisodeChecks:
    """The per-episode checks of one dataset, with what they need of it.

    Args:
        options: thresholds and severities.
        fps: the dataset's frame rate.
        names: per signal feature, its dimension names (info.json ``names``).
    """

    def __init__(self, options: QualityOptions, fps: float, names: dict[str, list[str]]):
        self.options = options
        self.fps = fps
        self.names = names

    def severity(self, check: str, feature: str | None = None, dimension: int | None = None):
        """The severity of a finding of ``check`` (``info`` on an :attr:`info_dimensions`
        dimension for the constant and clipped checks)."""
        severity = self.options.severity_of(check)
        if (
            feature is not None
            and dimension is not None
            and check in ("constant_dimension", "clipped_dimension")
            and severity != "off"
            and self.is_info_dimension(feature, dimension)
        ):
            return "info"
        return severity

    def is_info_dimension(self, feature: str, dimension: int) -> bool:
        names = self.names.get(feature) or []
        name = names[dimension].lower() if dimension < len(names) else ""
        return any(part.lower() in name for part in self.options.info_dimensions)

    def label(self, feature: str, dimension: int) -> str:
        names = self.names.get(feature) or []
        name = names[dimension] if dimension < len(names) else str(dimension)
        return f"{feature}[{dimension}] ({name})" if name != f"{feature}[{dimension}]" else name

    # ---------------------------------------------------------------- the checks
    def nan_inf(self, episode: int, key: str, values: np.ndarray) -> list[dict]:
        """``nan_inf``: any NaN or infinite value (error). lerobot-doctor 0.2.0 fails a
        dataset with NaN or Inf actions (checks/actions.py) but names no episode; here
        every feature and the episode, frames and first dimension are named."""
        matrix = as_matrix(values)
        bad = ~np.isfinite(matrix)
        if not bad.any():
            return []
        rows = np.flatnonzero(bad.any(axis=1))
        dim = int(np.flatnonzero(bad[rows[0]])[0])
        nans, infs = int(np.isnan(matrix).sum()), int(np.isinf(matrix).sum())
        return [
            finding(
                "nan_inf",
                self.severity("nan_inf"),
                episode,
                f"{nans} NaN and {infs} infinite value(s) in {key} over {len(rows)} frame(s), "
                f"first at frame {rows[0]}, {self.label(key, dim)}",
                feature=key,
                dimension=dim,
                frames=(rows[0], rows[-1]),
                value=nans + infs,
            )  # fmt: skip
        ]

    def frozen_signal(self, episode: int, key: str, values: np.ndarray) -> list[dict]:
        """``frozen_signal``: the whole vector of an observation feature repeats exactly for
        at least ``N = max(3, ceil(frozen_signal_s * fps))`` frames (a stuck sensor: real
        sensors jitter in their last bits). lerobot-doctor 0.2.0 warns when consecutive
        identical *actions* cover 5 % of an episode (checks/actions.py); actions legitimately
        hold still while an operator pauses, so here observations are checked, over a time."""
        matrix = as_matrix(values)
        if len(matrix) < 2:
            return []
        need = max(3, int(np.ceil(self.options.frozen_signal_s * self.fps)))
        same = np.all(matrix[1:] == matrix[:-1], axis=1)
        found = [(a, b + 1) for a, b in runs(same) if b + 2 - a >= need]
        if not found:
            return []
        first, last = max(found, key=lambda r: r[1] - r[0])
        frames = last - first + 1
        return [
            finding(
                "frozen_signal",
                self.severity("frozen_signal"),
                episode,
                f"{key} repeats one vector for {frames} frames ({frames / self.fps:.2f} s) "
                f"from frame {first}"
                + (f"; {len(found)} such stretches" if len(found) > 1 else ""),
                feature=key,
                frames=(first, last),
                value=frames / self.fps,
                threshold=self.options.frozen_signal_s,
            )  # fmt: skip
        ]

    def clipped_dimension(self, episode: int, key: str, values: np.ndarray) -> list[dict]:
        """``clipped_dimension``: a dimension sits exactly at its episode maximum (or minimum)
        for at least ``clipped_fraction`` of the frames, in runs of at least 3 frames that
        the signal approaches or leaves (the two steps before or after the run) by a step of
        more than twice its smallest step (a signal cut at a limit; not one resting at its
        extreme level, nor a quantised one moving by its quantum; a run over which the whole
        vector holds is ``frozen_signal``'s), while it takes more than two values (a binary
        gripper command is not clipped) and, away from the extreme, distinct values in at
        least half of its frames (a quantised signal, such as cr5's joint velocities in
        steps of 0.00095, repeats its levels everywhere). After lerobot-doctor 0.2.0
        (checks/actions.py: over 50 % of a dimension's values at its minimum or maximum warns,
        over 99 % fails), per episode and per run."""
        matrix = as_matrix(values)
        out = []
        if len(matrix) < 2 * MIN_CLIPPED_RUN or not np.isfinite(matrix).all():
            return out
        fraction = self.options.clipped_fraction
        at_top = (matrix == matrix.max(axis=0)).mean(axis=0) >= fraction
        at_bottom = (matrix == matrix.min(axis=0)).mean(axis=0) >= fraction
        candidates = np.flatnonzero(at_top | at_bottom)  # most dimensions stop here
        if not len(candidates):
            return out
        steps = np.abs(np.diff(matrix, axis=0))
        held = np.all(steps == 0, axis=1)  # the whole vector repeats from frame i to i + 1
        for dim in candidates.tolist():
            column = matrix[:, dim]
            moving = steps[:, dim][steps[:, dim] > 0]
            if not len(moving) or len(np.unique(column)) <= 2:
                continue
            smallest = moving.min()
            for side, extreme in (("maximum", column.max()), ("minimum", column.min())):
                at = column == extreme
                share = at.mean()
                if len(np.unique(column[~at])) < 0.5 * (~at).sum():
                    continue  # quantised: repeats its levels away from the extreme too
                cut = [
                    (a, b)
                    for a, b in runs(at)
                    if b - a + 1 >= MIN_CLIPPED_RUN
                    and _approach(steps[:, dim], a, b) > 2 * smallest
                    and not held[a:b].all()
                ]
                if share < self.options.clipped_fraction or not cut:
                    continue
                out.append(
                    finding(
                        "clipped_dimension",
                        self.severity("clipped_dimension", key, dim),
                        episode,
                        f"{self.label(key, dim)} sits at its {side} {extreme:.6g} for "
                        f"{share:.0%} of the frames ({len(cut)} run(s) cut at that level)",
                        feature=key,
                        dimension=dim,
                        frames=(cut[0][0], cut[-1][1]),
                        value=share,
                        threshold=self.options.clipped_fraction,
                    )  # fmt: skip
                )
                break
        return out

    def timestamp_drift(
        self, episode: int, timestamps: np.ndarray, frame_index: np.ndarray | None
    ) -> list[dict]:
        """``timestamp_drift``: the ``timestamp`` column against ``frame_index / fps``, where
        the video frames are and where lerobot's loaders look for them.

        - error: timestamps that do not increase (lerobot-doctor 0.2.0 checks/temporal.py
          warns on non-monotonic timestamps);
        - warning: the median frame interval off ``1 / fps`` by more than
          ``timestamp_rate_tolerance`` (lerobot-doctor's 10 % mean-interval rule), or a
          drift ``max |timestamp - frame_index / fps|`` above ``timestamp_drift_s``;
        - info: any other drift above lerobot's ``tolerance_s`` (1e-4 s): wall-clock
          timestamps, such as cr5's, which lerobot 0.6.1's loader would refuse and
          ``restamp_timestamps`` rewrites.
        """
        ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
        if len(ts) < 2 or not np.isfinite(ts).all():
            return []
        expected = (
            np.arange(len(ts)) if frame_index is None else np.asarray(frame_index).reshape(-1)
        ) / self.fps
        severity = self.options.severity_of("timestamp_drift")
        dt = np.diff(ts)
        back = np.flatnonzero(dt <= 0)
        if len(back):
            return [
                finding(
                    "timestamp_drift",
                    "error" if severity == "warning" else severity,
                    episode,
                    f"timestamps do not increase at {len(back)} frame(s), first from frame "
                    f"{back[0]} to {back[0] + 1} ({ts[back[0]]:.4f} s then "
                    f"{ts[back[0] + 1]:.4f} s)",
                    feature="timestamp",
                    frames=(back[0], back[0] + 1),
                    value=float(dt[back[0]]),
                )  # fmt: skip
            ]
        off = np.abs(ts - expected)
        worst = int(off.argmax())
        drift = float(off[worst])
        interval = float(np.median(dt))
        rate_error = abs(interval * self.fps - 1)
        if rate_error > self.options.timestamp_rate_tolerance:
            return [
                finding(
                    "timestamp_drift",
                    severity,
                    episode,
                    f"the median frame interval is {interval:.4f} s, {rate_error:.0%} off "
                    f"1/fps = {1 / self.fps:.4f} s; drift up to {drift:.3f} s at frame {worst}",
                    feature="timestamp",
                    frames=(0, len(ts) - 1),
                    value=rate_error,
                    threshold=self.options.timestamp_rate_tolerance,
                )  # fmt: skip
            ]
        if drift > self.options.timestamp_drift_s:
            level = severity
        elif drift > DEFAULT_TOLERANCE_S + 1e-6:
            level = "info" if severity != "off" else severity
        else:
            return []
        return [
            finding(
                "timestamp_drift",
                level,
                episode,
                f"timestamps drift up to {drift:.3f} s from frame_index / fps (frame {worst}); "
                f"frame intervals {dt.min():.4f}-{dt.max():.4f} s",
                feature="timestamp",
                frames=(worst, worst),
                value=drift,
                threshold=self.options.timestamp_drift_s
                if level != "info"
                else DEFAULT_TOLERANCE_S,
            )  # fmt: skip
        ]

    def stats_mismatch(
        self, episode: int, stored: dict, columns: dict[str, np.ndarray]
    ) -> list[dict]:
        """``stats_mismatch`` of one episode: its stored stats (v2.1
        ``episodes_stats.jsonl``, v3.0 ``meta/episodes`` ``stats/*``) of each numeric
        feature against the stats of its rows (:func:`robopipe.stats.numeric_stats`, as
        lerobot computes them). A stat differs when ``|stored - data| > stats_rtol *
        (|data| + max |value|)``; ``count`` must be equal. Camera stats are not compared
        (they come from the frames lerobot encoded, not the decoded ones)."""
        out = []
        for key, values in columns.items():
            entry = stored.get(key)
            if not entry:
                continue
            matrix = as_matrix(values)
            if not len(matrix):
                continue
            with np.errstate(all="ignore"):  # NaN data gives NaN stats, as lerobot's
                data = {
                    "min": matrix.min(axis=0),
                    "max": matrix.max(axis=0),
                    "mean": matrix.mean(axis=0),
                    "std": matrix.std(axis=0),
                }
                finite = np.where(np.isfinite(matrix), np.abs(matrix), 0)
            scale = finite.max(axis=0)
            problem = _stat_problem(entry, data, len(matrix), scale, self.options.stats_rtol)
            if problem is None:
                continue
            stat, dim, have, want = problem
            out.append(
                finding(
                    "stats_mismatch",
                    self.severity("stats_mismatch"),
                    episode,
                    f"stored {stat} of {key}"
                    + (f"[{dim}]" if dim is not None else "")
                    + f" is {have:.6g}, the data's is {want:.6g}",
                    feature=key,
                    dimension=dim,
                    value=have,
                    threshold=self.options.stats_rtol,
                )  # fmt: skip
            )
        return out


def _approach(steps: np.ndarray, first: int, last: int) -> float:
    """The largest of the two steps before a run ``[first, last]`` and the two after it."""
    near = np.concatenate([steps[max(first - 2, 0) : first], steps[last : last + 2]])
    return float(near.max()) if len(near) else 0.0


def _stat_problem(entry: dict, data: dict, count: int, scale, rtol: float):
    """The first stored stat that differs from the data's: ``(stat, dimension, stored, data)``
    or None."""
    if "count" in entry:
        stored = np.asarray(entry["count"], np.float64).reshape(-1)
        if len(stored) and int(stored[0]) != count:
            return "count", None, float(stored[0]), float(count)
    for stat in ("min", "max", "mean", "std"):
        if stat not in entry:
            continue
        stored = np.asarray(entry[stat], np.float64).reshape(-1)
        want = np.asarray(data[stat], np.float64).reshape(-1)
        if stored.shape != want.shape:
            return stat, None, float(len(stored)), float(len(want))
        with np.errstate(invalid="ignore"):
            same = (stored == want) | (np.isnan(stored) & np.isnan(want))
            tolerance = rtol * (np.abs(want) + np.broadcast_to(scale, want.shape))
            bad = ~same & ~(np.abs(stored - want) <= tolerance)
        if bad.any():
            dim = int(np.flatnonzero(bad)[0])
            return stat, dim, float(stored[dim]), float(want[dim])
    return None


def summarise(
    columns: dict[str, np.ndarray], action_keys: list[str]
) -> tuple[dict, str, np.ndarray]:
    """What the dataset-wide checks need of one episode's signal ``columns``.

    Returns:
        ``(features, hash, signature)``: ``features[key]`` has, per dimension (lists of
        floats), ``min``, ``max`` (NaN where no value is finite), ``sum``, ``m2`` (the sum
        of squared deviations from the episode's mean) and ``count`` (finite values) and
        for ``action_keys`` ``delta_mad`` (median absolute deviation of the frame-to-frame
        deltas), ``delta_mean`` (their mean absolute
        deviation), ``delta_max`` (the largest absolute deviation) and ``delta_frame`` (the
        frame before it); ``hash``: SHA-1 of the columns' bytes (exact duplicates);
        ``signature``: float32 ``(SIGNATURE_POINTS * dims,)``, each dimension resampled at
        ``SIGNATURE_POINTS`` evenly spaced times (near duplicates).
    """
    features: dict[str, dict] = {}
    digest = hashlib.sha1()
    points = []
    for key, values in columns.items():
        array = np.ascontiguousarray(values)
        digest.update(key.encode())
        digest.update(array.tobytes())
        matrix = as_matrix(array)
        finite = np.isfinite(matrix)
        clean = np.where(finite, matrix, np.nan)
        with np.errstate(all="ignore"):
            count = finite.sum(axis=0)
            total = np.where(finite, matrix, 0).sum(axis=0)
            centred = np.where(finite, matrix - total / np.maximum(count, 1), 0)
            entry = {
                "min": _nan_reduce(np.nanmin, clean),
                "max": _nan_reduce(np.nanmax, clean),
                "sum": total.tolist(),
                "m2": (centred * centred).sum(axis=0).tolist(),
                "count": count.tolist(),
            }
        if key in action_keys and len(matrix) < 3:  # no deltas to speak of
            zeros = [0.0] * matrix.shape[1]
            entry.update(delta_mad=zeros, delta_mean=zeros, delta_max=zeros, delta_frame=zeros)
        elif key in action_keys:
            deltas = np.diff(clean, axis=0)
            median = np.median if finite.all() else np.nanmedian  # nanmedian is 10x slower
            with np.errstate(all="ignore"):
                centre = median(deltas, axis=0)
                deviation = np.abs(deltas - centre)
                entry["delta_mad"] = np.nan_to_num(median(deviation, axis=0)).tolist()
                entry["delta_mean"] = np.nan_to_num(np.nanmean(deviation, axis=0)).tolist()
                filled = np.nan_to_num(deviation, nan=0.0)
                entry["delta_max"] = filled.max(axis=0).tolist()
                entry["delta_frame"] = filled.argmax(axis=0).tolist()
        features[key] = entry
        positions = np.linspace(0, max(len(matrix) - 1, 0), SIGNATURE_POINTS)
        base = np.arange(len(matrix))
        for dim in range(matrix.shape[1]):
            column = np.nan_to_num(matrix[:, dim], nan=0.0, posinf=0.0, neginf=0.0)
            points.append(np.interp(positions, base, column) if len(column) else np.zeros(16))
    signature = np.concatenate(points).astype(np.float32) if points else np.zeros(0, np.float32)
    return features, digest.hexdigest(), signature


def _nan_reduce(function, matrix: np.ndarray) -> list[float]:
    if not len(matrix):
        return [float("nan")] * matrix.shape[1]
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return function(matrix, axis=0).tolist()
