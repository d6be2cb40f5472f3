import threading
import time

import pytest
import torch

from robopipe.bench.measure import (
    ZeroSamplesError,
    batch_frames,
    measure_latency,
    measure_throughput,
    wait_for_ranks,
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


def test_throughput_records_when_measuring_started_after_the_barrier():
    epoch = [batch([0, 1])]
    before = time.time()
    out = measure_throughput(lambda: epoch, video_keys=["cam"], warmup_batches=1, steady_s=0.01)
    assert before <= out["measure_start_unix"] <= time.time()
    assert out["barrier_wait_s"] is None
    before = time.time()
    out = measure_throughput(
        lambda: epoch, video_keys=["cam"], warmup_batches=1, steady_s=0.01,
        start_barrier=lambda: time.sleep(0.2),
    )  # fmt: skip
    assert out["barrier_wait_s"] >= 0.2
    assert out["measure_start_unix"] >= before + 0.2  # measuring starts after the barrier


def test_ranks_leave_the_start_barrier_together(tmp_path):
    left = {}

    def rank(r, delay):
        time.sleep(delay)  # rank 1 is still importing
        waited = wait_for_ranks(tmp_path, r, 2)
        left[r] = (time.time(), waited)

    threads = [threading.Thread(target=rank, args=(r, 0.4 * r)) for r in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert left[0][1] >= 0.35 and left[1][1] < 0.2  # rank 0 waited for rank 1
    assert abs(left[0][0] - left[1][0]) < 0.2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready-0", "ready-1"]


def test_the_start_barrier_names_the_ranks_that_never_came(tmp_path):
    with pytest.raises(RuntimeError, match=r"ranks \[1, 2\] of 3 did not reach the start barrier"):
        wait_for_ranks(tmp_path, 0, 3, timeout_s=0.05)
