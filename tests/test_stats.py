"""Episode stats as lerobot 0.3.x computes them, and dataset stats aggregated from them,
checked against numpy on the pooled data."""

from __future__ import annotations

import functools
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from robopipe.layout import V21_DATA_PATH, V21_EPISODES_STATS_PATH, V21_INFO_PATH, V21_VIDEO_PATH
from robopipe.stats import (
    StatsAggregator,
    aggregate_stats,
    auto_downsample_height_width,
    compute_episode_stats,
    episode_stats_from_files,
    estimate_num_samples,
    image_stats,
    numeric_stats,
    restamped_timestamp_stats,
    sample_frames,
    sample_indices,
)


def test_sampling_rules():
    # lerobot 0.3.x compute_stats.estimate_num_samples docstring values
    assert [estimate_num_samples(n) for n in (1, 50, 100, 500, 1000, 2000, 5000, 10000)] == [
        1,
        50,
        100,
        105,
        177,
        299,
        594,
        1000,
    ]
    idx = sample_indices(1000)
    assert len(idx) == 177 and idx[0] == 0 and idx[-1] == 999
    assert np.all(np.diff(idx) > 0)
    assert auto_downsample_height_width(np.zeros((3, 299, 100))).shape == (3, 299, 100)
    assert auto_downsample_height_width(np.zeros((3, 480, 640))).shape == (3, 120, 160)
    assert auto_downsample_height_width(np.zeros((3, 300, 200))).shape == (3, 150, 100)


def test_image_stats_of_sampled_frames():
    # frame t is filled with t (channel 0), 255 - t (channel 1) and 7 (channel 2)
    length = 256
    frames = np.zeros((length, 4, 6, 3), dtype=np.uint8)
    t = np.arange(length, dtype=np.uint8)[:, None, None]
    frames[..., 0], frames[..., 1], frames[..., 2] = t, 255 - t, 7
    stats = image_stats(sample_frames(frames))
    sampled = np.round(np.linspace(0, length - 1, 100)).astype(int)
    assert stats["count"].tolist() == [100]
    assert stats["mean"].shape == (3, 1, 1)
    np.testing.assert_allclose(
        stats["mean"].ravel(), [sampled.mean() / 255, 1 - sampled.mean() / 255, 7 / 255]
    )
    np.testing.assert_allclose(stats["std"].ravel(), [sampled.std() / 255, sampled.std() / 255, 0])
    np.testing.assert_allclose(stats["min"].ravel(), [0, 0, 7 / 255])


def test_sampled_frames_are_channel_first_downsampled_and_contiguous():
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, size=(150, 300, 320, 3), dtype=np.uint8)
    sampled = sample_frames(frames)
    assert sampled.shape == (100, 3, 150, 160) and sampled.dtype == np.uint8
    assert sampled.flags.c_contiguous  # lerobot's layout, which fixes the summation order
    first, last = frames[0, ::2, ::2], frames[-1, ::2, ::2]
    np.testing.assert_array_equal(sampled[0], first.transpose(2, 0, 1))
    np.testing.assert_array_equal(sampled[-1], last.transpose(2, 0, 1))


def test_numeric_stats_keep_dims_for_scalars():
    stats = numeric_stats(np.array([1, 2, 3], dtype=np.int64))
    assert {k: v.tolist() for k, v in stats.items()} == {
        "min": [1],
        "max": [3],
        "mean": [2.0],
        "std": [pytest.approx(np.sqrt(2 / 3))],
        "count": [3],
    }


def test_episode_stats_follow_the_given_order_as_lists():
    state = np.arange(12, dtype=np.float32).reshape(4, 3)
    frames = np.full((4, 2, 2, 3), 51, dtype=np.uint8)
    stats = compute_episode_stats(
        {"state": state, "cam": sample_frames(frames), "index": np.arange(4)}, video_keys={"cam"}
    )
    assert list(stats) == ["state", "cam", "index"]
    assert stats["state"]["mean"] == [4.5, 5.5, 6.5]
    assert stats["cam"]["mean"] == [[[0.2]], [[0.2]], [[0.2]]]
    assert stats["cam"]["count"] == [4]
    assert stats["index"] == {
        "min": [0],
        "max": [3],
        "mean": [1.5],
        "std": [1.25**0.5],
        "count": [4],
    }


@pytest.mark.parametrize("fps", [10, 15, 30, 29.97])
def test_restamped_timestamp_stats_are_those_of_the_float32_column(fps):
    for length in (1, 2, 7, 100, 241, 1001):
        ts = (np.arange(length) / fps).astype(np.float32)
        assert restamped_timestamp_stats(length, fps) == {
            "min": [float(ts.min())],
            "max": [float(ts.max())],
            "mean": [float(ts.mean())],
            "std": [float(ts.std())],
            "count": [length],
        }


def test_stats_from_files_equal_the_writers_with_a_lossless_codec(make_v21):
    """Decoded frames of a lossless mp4 are the encoded ones: the stats the repair computes
    from the files are those the writer computed, but for ``timestamp`` (the writer's are of
    the float64 values, the file holds float32) and the last bits of the cameras' std (the
    repair's sampled frames are laid out channel-last in memory, so numpy sums in another
    order)."""
    root = make_v21(episodes=2, cameras=1, codec="h264_lossless", min_length=120, max_length=130)
    features = json.loads((root / V21_INFO_PATH).read_text())["features"]
    video_keys = [k for k, ft in features.items() if ft["dtype"] == "video"]
    lines = (root / V21_EPISODES_STATS_PATH).read_text().splitlines()
    for line in map(json.loads, lines):
        ep = line["episode_index"]
        table = pq.read_table(root / V21_DATA_PATH.format(episode_chunk=0, episode_index=ep))
        videos = {
            k: root / V21_VIDEO_PATH.format(episode_chunk=0, video_key=k, episode_index=ep)
            for k in video_keys
        }
        ours = episode_stats_from_files(table, features, videos)
        assert list(ours) == list(line["stats"])
        assert ours[video_keys[0]]["count"] == [100]
        timestamp, expected = ours.pop("timestamp"), line["stats"].pop("timestamp")
        np.testing.assert_allclose(timestamp["mean"], expected["mean"], rtol=1e-6)
        for key in video_keys:
            std, expected = ours[key].pop("std"), line["stats"][key].pop("std")
            np.testing.assert_allclose(std, expected, rtol=1e-12)
        assert ours == line["stats"]


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


def test_aggregator_gives_aggregate_stats_to_the_bit():
    rng = np.random.default_rng(3)
    episodes = []
    for i in range(300):
        state = {k: rng.normal(size=4).tolist() for k in ("min", "max", "mean", "std")}
        state["count"] = [int(rng.integers(1, 500))]
        scalar = {"min": [i], "max": [i + 0.5], "mean": [rng.normal()], "std": [rng.random()]}
        scalar["count"] = [int(rng.integers(1, 500))]
        if i % 7:  # a quantile most episodes have: dropped
            scalar["q01"] = [rng.normal()]
        image = {k: rng.random((3, 1, 1)).tolist() for k in ("min", "max", "mean", "std")}
        image["count"] = [100]
        image["q50"] = rng.random((3, 1, 1)).tolist()  # every episode has it: kept
        ep = {"observation.state": state, "timestamp": scalar, "cam": image}
        if i % 3 == 0:
            ep.pop("cam")  # a feature only some episodes have
        episodes.append(ep)
    aggregator = StatsAggregator(block_rows=16)  # spills
    for ep in episodes:
        aggregator.add(ep)
    got, want = aggregator.result(), aggregate_stats(episodes)
    assert json.dumps(got) == json.dumps(want)
    assert list(got) == ["observation.state", "timestamp", "cam"]
    assert "q01" not in got["timestamp"] and "q50" in got["cam"]


def test_aggregator_spilling_many_episodes_gives_aggregate_stats_to_the_bit():
    # numpy sums a column of one number per row pairwise, in blocks of 8,192 rows; rows of
    # several numbers one after the other: both orders must survive the spill to disk
    rng = np.random.default_rng(4)
    n = 20_000
    means = rng.normal(size=(n, 4)) * rng.uniform(1, 1e6, size=(n, 1))
    stds, counts = rng.random((n, 4)), rng.integers(1, 500, size=n)
    episodes = []
    for i in range(n):
        ep = {
            "state": {"mean": means[i], "std": stds[i], "min": means[i] - 1, "max": means[i] + 1},
            "timestamp": {"mean": means[i, :1], "std": stds[i, :1], "min": [i], "max": [i]},
            "cam": {k: means[i, :3].reshape(3, 1, 1) for k in ("mean", "std", "min", "max")},
        }
        for stats in ep.values():
            stats["count"] = [int(counts[i])]
        if i == n // 2:
            ep["timestamp"]["max"] = [i + 0.5]  # the column widens to float64, spilled rows too
        episodes.append(ep)
    aggregator = StatsAggregator(block_rows=1000)
    for ep in episodes:
        aggregator.add(ep)
    got, want = aggregator.result(), aggregate_stats(episodes)
    assert json.dumps(got) == json.dumps(want)
    # the test is sharp: summing the scalar column in order instead would differ
    weighted = means[:, 0] * counts
    assert np.add.reduce(weighted) != functools.reduce(lambda a, b: a + b, weighted)
