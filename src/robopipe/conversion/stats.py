"""Aggregate per-episode statistics into dataset statistics, as lerobot 0.6.1 does.

Source: lerobot 0.6.1 ``datasets/compute_stats.py:582`` ``aggregate_feature_stats`` and
``:622`` ``aggregate_stats``: elementwise min and max; ``count = Σ count``;
``mean = Σ mean_i·count_i / Σ count``; population std by parallel variance,
``std = sqrt(Σ (std_i² + (mean_i − mean)²)·count_i / Σ count)``; quantiles ``qNN`` are
count-weighted means, kept only when every episode has them.
"""

from __future__ import annotations

import numpy as np

STAT_KEYS = ("min", "max", "mean", "std", "count")


def aggregate_feature_stats(stats: list[dict]) -> dict[str, np.ndarray]:
    """Aggregate one feature's stats over episodes.

    Args:
        stats: per episode ``{"min","max","mean","std","count"[, "qNN"...]}`` of array-likes;
            vectors have shape ``(D,)``, images ``(3, 1, 1)``, ``count`` shape ``(1,)``.

    Returns:
        The same keys as numpy arrays of the same shapes (float64 for mean/std/quantiles).
    """
    means = np.stack([np.asarray(s["mean"], dtype=np.float64) for s in stats])
    variances = np.stack([np.asarray(s["std"], dtype=np.float64) ** 2 for s in stats])
    counts = np.stack([np.asarray(s["count"]) for s in stats])
    total_count = counts.sum(axis=0)
    weights = counts.astype(np.float64)
    while weights.ndim < means.ndim:
        weights = np.expand_dims(weights, axis=-1)
    mean = (means * weights).sum(axis=0) / total_count
    variance = ((variances + (means - mean) ** 2) * weights).sum(axis=0) / total_count
    result = {
        "min": np.min(np.stack([np.asarray(s["min"]) for s in stats]), axis=0),
        "max": np.max(np.stack([np.asarray(s["max"]) for s in stats]), axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": total_count,
    }
    quantiles = [k for k in stats[0] if k.startswith("q") and all(k in s for s in stats)]
    for key in quantiles:
        values = np.stack([np.asarray(s[key], dtype=np.float64) for s in stats])
        result[key] = (values * weights).sum(axis=0) / total_count
    return result


def aggregate_stats(episodes_stats: list[dict[str, dict]]) -> dict[str, dict[str, list]]:
    """Dataset stats from per-episode stats: ``{feature: {stat: nested list}}``, JSON-ready.

    Features appear in the order of their first appearance in ``episodes_stats``.
    """
    features: dict[str, None] = {}
    for ep in episodes_stats:
        features.update(dict.fromkeys(ep))
    return {
        feature: {
            key: value.tolist()
            for key, value in aggregate_feature_stats(
                [ep[feature] for ep in episodes_stats if feature in ep]
            ).items()
        }
        for feature in features
    }
