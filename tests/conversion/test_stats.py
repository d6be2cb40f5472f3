"""Dataset stats aggregated from episode stats, checked against numpy on the pooled data."""

import numpy as np

from robopipe.conversion.stats import aggregate_stats


def _stats(x, axis=0):
    return {
        "min": x.min(axis=axis),
        "max": x.max(axis=axis),
        "mean": x.mean(axis=axis),
        "std": x.std(axis=axis),
        "count": np.array([len(x)]),
    }


def test_aggregate_equals_stats_of_the_pooled_data():
    rng = np.random.default_rng(0)
    episodes = [rng.normal(i, 1 + i, size=(n, 3)) for i, n in enumerate([5, 17, 40])]
    result = aggregate_stats([{"x": _stats(e)} for e in episodes])["x"]
    pooled = np.concatenate(episodes)
    np.testing.assert_allclose(result["mean"], pooled.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(result["std"], pooled.std(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(result["min"], pooled.min(axis=0))
    np.testing.assert_array_equal(result["max"], pooled.max(axis=0))
    assert result["count"] == [62]


def test_image_stats_keep_their_shape_and_counts_weigh_the_mean():
    a = {
        "mean": np.full((3, 1, 1), 0.2),
        "std": np.zeros((3, 1, 1)),
        "min": np.zeros((3, 1, 1)),
        "max": np.ones((3, 1, 1)),
        "count": np.array([100]),
    }
    b = {**a, "mean": np.full((3, 1, 1), 0.6), "count": np.array([300])}
    result = aggregate_stats([{"observation.images.front": a}, {"observation.images.front": b}])
    stats = result["observation.images.front"]
    assert np.asarray(stats["mean"]).shape == (3, 1, 1)
    np.testing.assert_allclose(stats["mean"], 0.5)
    np.testing.assert_allclose(stats["std"], np.sqrt(0.75 * 0.1**2 + 0.25 * 0.3**2))
    assert stats["count"] == [400]
