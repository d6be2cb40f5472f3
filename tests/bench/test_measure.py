import pytest
import torch

from robopipe.bench.measure import (
    ZeroSamplesError,
    batch_frames,
    measure_latency,
    measure_throughput,
)


def batch(episodes, window=1):
    n = len(episodes)
    return {
        "index": torch.arange(n),
        "episode_index": torch.tensor(episodes),
        "cam": torch.zeros((n, window, 3, 4, 4), dtype=torch.uint8),
    }


def test_batch_frames_counts_windows():
    assert batch_frames(batch([0, 1], window=8), ["cam"]) == 16


def test_throughput_counts_the_steady_window_over_epochs():
    epoch = [batch([0, 0, 1, 2]), batch([3, 3, 3, 3])]
    out = measure_throughput(lambda: epoch, video_keys=["cam"], warmup_batches=1, steady_s=0.02)
    assert out["samples"] % 4 == 0 and out["samples"] > 4  # ran over several epochs
    assert out["frames"] == out["samples"]
    assert out["samples_per_s"] == pytest.approx(out["samples"] / out["steady_wall_s"])
    assert 0.25 < out["shuffle_randomness"] < 0.75  # 3/4 and 1/4 alternate


def test_zero_samples_is_an_error():
    with pytest.raises(ZeroSamplesError, match="no batch"):
        measure_throughput(list, video_keys=[], warmup_batches=1, steady_s=1)


def test_latency_percentiles_are_ordered():
    out = measure_latency(iter([{}] * 50), 50)
    assert out["latency_ms"]["p50"] <= out["latency_ms"]["p95"] <= out["latency_ms"]["p99"]
    assert measure_latency(iter([]), 10)["latency_ms"] is None
