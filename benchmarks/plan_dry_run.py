"""Planning speed: ``snakemake -n`` of a 30,000-episode, 3-camera v2.1 dataset.

The plan reads only metadata: ``meta/*.json*``, each episode's parquet footer (row count and
uncompressed size) and each mp4's size on disk. So the dataset is made of small files: a real
demo dataset of ``--lengths`` episodes (tiny H.264 videos, 32x48) is generated once, and every
episode of the big dataset is a hard link to the seed episode of the same length class (parquet
row counts match ``episodes.jsonl``). With ``--video-mb X`` the mp4s are instead sparse files of
X MiB apparent size (no disk used), to count the video files of a dataset of real size.

Then, timed (:func:`robopipe.harness.dry_run.time_dry_run`): ``snakemake -n --quiet rules`` of
the real Snakefile with a config naming the dataset (the conversion target by default), as a
whole process (interpreter start included). Prints the wall time and the jobs per rule. With
``--slurm``, the dry run uses the SLURM profile (``--executor slurm --workflow-profile
profiles/slurm``) and also prints how many ``sbatch`` calls the run would make: one per group
job, one per job outside a group. Usage::

    python benchmarks/plan_dry_run.py [--episodes 30000] [--cameras 3] [--episodes-per-shard N]
        [--video-mb X] [--target convert] [--slurm] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from robopipe.demo import demo_cameras, generate_demo
from robopipe.harness.dry_run import SLURM_PROFILE, time_dry_run
from robopipe.layout import (
    V21_DATA_PATH,
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
    V21_VIDEO_PATH,
)

REPO = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def make_big_dataset(
    root: Path, *, episodes: int, cameras: int, lengths: int, video_mb: float | None
) -> Path:
    """A v2.1 dataset of ``episodes`` episodes whose files are links to a small seed dataset."""
    seed = generate_demo(
        root / "seed", episodes=lengths, cameras=demo_cameras(cameras), height=32, width=48,
        min_length=100, max_length=400, codec="h264",
    )  # fmt: skip
    info = json.loads((seed / V21_INFO_PATH).read_text())
    seed_episodes = _jsonl(seed / V21_EPISODES_PATH)
    seed_stats = {s["episode_index"]: s["stats"] for s in _jsonl(seed / V21_EPISODES_STATS_PATH)}
    video_keys = sorted(k for k, ft in info["features"].items() if ft["dtype"] == "video")
    chunks_size = info["chunks_size"]

    big = root / "big"
    (big / "meta").mkdir(parents=True)
    episode_lines, stats_lines, total_frames = [], [], 0
    for index in range(episodes):
        like = index % lengths
        chunk = index // chunks_size
        _link(seed / _data(like, 0), big / _data(index, chunk))
        for key in video_keys:
            target = big / _video(index, chunk, key)
            if video_mb is None:
                _link(seed / _video(like, 0, key), target)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as f:
                    f.truncate(int(video_mb * MIB))
        length = seed_episodes[like]["length"]
        total_frames += length
        episode_lines.append({**seed_episodes[like], "episode_index": index})
        stats_lines.append({"episode_index": index, "stats": seed_stats[like]})
    info.update(
        total_episodes=episodes,
        total_frames=total_frames,
        total_videos=episodes * len(video_keys),
        total_chunks=(episodes + chunks_size - 1) // chunks_size,
        splits={"train": f"0:{episodes}"},
    )
    (big / V21_INFO_PATH).write_text(json.dumps(info, indent=4))
    _write_jsonl(big / V21_EPISODES_PATH, episode_lines)
    _write_jsonl(big / V21_EPISODES_STATS_PATH, stats_lines)
    (big / V21_TASKS_PATH).write_text((seed / V21_TASKS_PATH).read_text())
    return big


def _data(index: int, chunk: int) -> str:
    return V21_DATA_PATH.format(episode_chunk=chunk, episode_index=index)


def _video(index: int, chunk: int, key: str) -> str:
    return V21_VIDEO_PATH.format(episode_chunk=chunk, video_key=key, episode_index=index)


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    os.link(source, target)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_jsonl(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30_000)
    parser.add_argument("--cameras", type=int, default=3)
    parser.add_argument("--lengths", type=int, default=8, help="seed episodes (length classes)")
    parser.add_argument("--episodes-per-shard", type=int, default=None, help="default: work")
    parser.add_argument("--video-mb", type=float, default=None, help="sparse mp4s of this size")
    parser.add_argument("--target", default="convert")
    parser.add_argument("--slurm", action="store_true", help="count sbatch calls (SLURM profile)")
    parser.add_argument("--work", type=Path, default=None, help="kept; default: a temp dir")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="plan-dry-run-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        source = make_big_dataset(
            work, episodes=args.episodes, cameras=args.cameras, lengths=args.lengths,
            video_mb=args.video_mb,
        )  # fmt: skip
        print(f"generated {args.episodes} episodes x {args.cameras} cameras in "
              f"{time.perf_counter() - start:.1f} s: {source}")  # fmt: skip
        result = time_dry_run(
            REPO, source, work, episodes_per_shard=args.episodes_per_shard, target=args.target,
            slurm=args.slurm,
        )  # fmt: skip
    print(f"snakemake -n ({args.target}, episodes_per_shard={args.episodes_per_shard}, "
          f"cpus={os.cpu_count()}): {result['wall_s']:.1f} s wall")  # fmt: skip
    for rule, count in result["jobs"].items():
        print(f"  {rule:<16} {count:>7}")
    if args.slurm:
        print(f"sbatch calls ({SLURM_PROFILE}, group jobs and jobs outside groups): "
              f"{result['sbatch']}")  # fmt: skip


if __name__ == "__main__":
    main()
