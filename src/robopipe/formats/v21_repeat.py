"""``robopipe-repeat``: a bigger (or smaller) LeRobot v2.1 dataset from a real one, its
episodes repeated::

    robopipe-repeat ../shared/datasets/cr5_banana_plate_v21 /tmp/cr5x12 --times 12
    robopipe-repeat SRC DST --episodes 4          # the first 4 episodes only

Episode ``k`` of repetition ``r`` becomes episode ``r * N + k`` (``N`` = episodes taken): its
parquet is rewritten with the new ``episode_index`` and ``index`` (schema and metadata kept),
its mp4s are copied (or hard-linked with ``--link``, for a large benchmark copy: a hard link
shares the bytes, so never damage a linked copy in place), its ``episodes.jsonl`` and
``episodes_stats.jsonl`` lines are renumbered (the ``episode_index`` and ``index`` stats
shifted), and ``info.json`` counts the new totals. Files are placed by the source's own path
templates and ``chunks_size``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robopipe.layout import (
    V21_EPISODES_PATH,
    V21_EPISODES_STATS_PATH,
    V21_INFO_PATH,
    V21_TASKS_PATH,
)


def make_repeated(
    source: str | Path,
    dest: str | Path,
    *,
    times: int = 1,
    episodes: int | None = None,
    link: bool = False,
) -> Path:
    """Write the first ``episodes`` (default: all) episodes of ``source``, ``times`` times over,
    as a new v2.1 dataset in ``dest`` (which must not exist); return ``dest``."""
    source, dest = Path(source), Path(dest)
    info = json.loads((source / V21_INFO_PATH).read_text())
    lines = [
        json.loads(line) for line in (source / V21_EPISODES_PATH).read_text().splitlines() if line
    ]
    lines = sorted(lines, key=lambda e: e["episode_index"])[:episodes]
    stats = {}
    if (source / V21_EPISODES_STATS_PATH).is_file():
        for line in (source / V21_EPISODES_STATS_PATH).read_text().splitlines():
            if line:
                entry = json.loads(line)
                stats[entry["episode_index"]] = entry["stats"]
    video_keys = [k for k, ft in info["features"].items() if ft["dtype"] == "video"]
    chunks = info["chunks_size"]

    def path(template: str, index: int, key: str | None = None) -> Path:
        return dest / template.format(
            episode_chunk=index // chunks, episode_index=index, video_key=key
        )

    dest.mkdir(parents=True)
    out_lines, out_stats, start = [], [], 0
    for repeat in range(times):
        for line in lines:
            old = line["episode_index"]
            new = repeat * len(lines) + old
            table = pq.read_table(
                source / info["data_path"].format(episode_chunk=old // chunks, episode_index=old)
            )
            n = table.num_rows
            table = _set(table, "episode_index", np.full(n, new))
            table = _set(table, "index", np.arange(start, start + n))
            target = path(info["data_path"], new)
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, target)
            for key in video_keys:
                src = source / info["video_path"].format(
                    episode_chunk=old // chunks, episode_index=old, video_key=key
                )
                target = path(info["video_path"], new, key)
                target.parent.mkdir(parents=True, exist_ok=True)
                (os.link if link else shutil.copyfile)(src, target)
            out_lines.append({**line, "episode_index": new})
            if old in stats:
                out_stats.append({"episode_index": new, "stats": _shift(stats[old], new, start)})
            start += n
    total = len(out_lines)
    info.update(
        total_episodes=total,
        total_frames=start,
        total_videos=total * len(video_keys),
        total_chunks=(total - 1) // chunks + 1,
        splits={"train": f"0:{total}"},
    )
    (dest / "meta").mkdir()
    (dest / V21_INFO_PATH).write_text(json.dumps(info, indent=4))
    shutil.copyfile(source / V21_TASKS_PATH, dest / V21_TASKS_PATH)
    _write_jsonl(dest / V21_EPISODES_PATH, out_lines)
    if out_stats:
        _write_jsonl(dest / V21_EPISODES_STATS_PATH, out_stats)
    return dest


def _set(table: pa.Table, name: str, values: np.ndarray) -> pa.Table:
    if name not in table.schema.names:
        return table
    field = table.schema.field(name)
    return table.set_column(table.schema.get_field_index(name), field, pa.array(values, field.type))


def _shift(stats: dict, episode: int, start: int) -> dict:
    """An episode's stats with ``episode_index`` set to ``episode`` and ``index`` starting at
    ``start``."""
    stats = json.loads(json.dumps(stats))
    if "episode_index" in stats:
        ep = stats["episode_index"]
        ep.update(min=[episode], max=[episode], mean=[float(episode)], std=[0.0])
    if "index" in stats:
        index = stats["index"]
        offset = start - index["min"][0]
        for key in ("min", "max"):
            index[key] = [index[key][0] + offset]
        index["mean"] = [index["mean"][0] + offset]
    return stats


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def main(argv: list[str] | None = None) -> None:
    """The command: :func:`make_repeated` with the command line's arguments."""
    parser = argparse.ArgumentParser(
        prog="robopipe-repeat",
        description="A bigger (or smaller) LeRobot v2.1 dataset from a real one, its episodes "
        "repeated.",
    )
    parser.add_argument("source", type=Path, help="a LeRobot v2.1 dataset folder")
    parser.add_argument("dest", type=Path, help="the new dataset's folder (must not exist)")
    parser.add_argument("--times", type=int, default=1, help="repetitions (default 1)")
    parser.add_argument("--episodes", type=int, help="take only the first N episodes")
    parser.add_argument("--link", action="store_true", help="hard-link the mp4s, not copy")
    args = parser.parse_args(argv)
    make_repeated(args.source, args.dest, times=args.times, episodes=args.episodes, link=args.link)


if __name__ == "__main__":
    main()
