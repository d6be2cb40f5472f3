"""Decode cost of the quality checks' camera frames per episode, sampled against all.

    python benchmarks/quality_decode.py [ROOT] [--episodes 20] [--sample-s 0.5]

ROOT is a v2.x or v3.0 dataset (default ../shared/datasets/cr5_banana_plate_v21). For its
first ``--episodes`` episodes and every camera, the frames the camera checks decode
(robopipe.quality.video.camera_luma: one frame every ``--sample-s`` seconds, the keyframe
standing for a GOP of at most half that; or every frame) are decoded on the CPU, alternating
sample and all per episode. It prints, per mode, frames decoded per episode, wall seconds
and CPU seconds (process time, every decoder thread) per episode. On a shared machine the
wall time follows the other load; the CPU time much less.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from robopipe.quality.dataset import open_dataset
from robopipe.quality.video import DecodeStats, camera_luma, sample_indices

DEFAULT = Path(__file__).resolve().parents[1] / ".." / "shared/datasets/cr5_banana_plate_v21"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=str(DEFAULT.resolve()))
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--sample-s", type=float, default=0.5)
    args = parser.parse_args()
    dataset = open_dataset(args.root)
    episodes = range(min(args.episodes, dataset.num_episodes))
    totals = {mode: [0, 0.0, 0.0] for mode in ("sample", "all")}
    for episode in episodes:
        for mode in totals:
            length = int(dataset.lengths[episode])
            indices = sample_indices(length, dataset.fps, args.sample_s, mode)
            snap = args.sample_s / 2 if mode == "sample" else 0.0
            wall, cpu = time.perf_counter(), time.process_time()
            for key in dataset.video_keys:
                stats = DecodeStats(device="cpu")
                path = dataset.video_file(episode, key)
                start = dataset.video_start_s(episode, key)
                camera_luma(dataset, path, start, indices, episode, stats, snap_s=snap)
                totals[mode][0] += stats.frames
            totals[mode][1] += time.perf_counter() - wall
            totals[mode][2] += time.process_time() - cpu
    count = len(episodes)
    print(f"{dataset.name}: {count} episodes, {len(dataset.video_keys)} camera(s)")
    for mode, (frames, wall, cpu) in totals.items():
        print(
            f"  {mode:6s} {frames / count:7.1f} frames/episode  {wall / count:6.3f} s wall/episode"
            f"  {cpu / count:6.3f} s CPU/episode  {1000 * cpu / max(frames, 1):5.2f} ms CPU/frame"
        )
    print(f"  all / sample: {totals['all'][2] / max(totals['sample'][2], 1e-9):.1f}x CPU")


if __name__ == "__main__":
    main()
