"""Compare robopipe's v2.1 -> v3.0 conversion with lerobot 0.6.1's own converter.

Needs the opt-in lerobot environment (``tools/lerobot_env.sh`` -> ``.venv-lerobot/``); this
script itself runs on the project's Python and starts the lerobot interpreter for two things:

1. lerobot's converter (``lerobot.scripts.convert_dataset_v21_to_v30``) on a writable COPY of
   the source (it converts in place), offline: ``HF_HUB_OFFLINE=1``, ``HF_HOME`` in a temp dir,
   ``push_to_hub=False``. The CLI takes whole MB only, so fractional thresholds or a non-default
   ``--chunks-size`` (lerobot's module constant ``DEFAULT_CHUNK_SIZE``, patched) go through
   ``convert_dataset()`` in a ``python -c`` instead.
2. ``LeRobotDataset(repo_id="local/x", root=<robopipe output>, return_uint8=True)`` serving a
   sample of frames (first and last frame of every episode plus random ones), compared with the
   frame decoded by the same torchcodec straight from the source's v2.1 mp4.

Checks (PASS/FAIL each; the exit status is 1 when any fails):
files (relative paths), info.json (equal dicts), tasks.parquet, episode rows (every column;
floats within 1e-6, from/to timestamps so within 1e-6 s), stats.json (within 1e-6 relative),
data parquet (column by column, after casting list types), video packets (pts, dts, key
flag, payload MD5: stream copy means lerobot's and robopipe's mp4s carry the same packets),
and frames served by lerobot's loader. With ``--restamp`` (needed for sources whose parquet
timestamps are off ``frame_index / fps``, e.g. ../shared/datasets/cr5_banana_plate_v21) the
``timestamp`` column is checked against ``frame_index / fps`` instead of lerobot's copy of the
source's values.

Usage::

    python tools/lerobot_compat.py --source ../shared/datasets/cr5_banana_plate_v21 --restamp
    python tools/lerobot_compat.py --source DEMO --data-mb 0.2 --video-mb 1 --chunks-size 3

The comparison itself (not the conversions) follows lerobot 0.6.1
``scripts/convert_dataset_v21_to_v30.py`` (see ../shared/reference/lerobot_v21_to_v30_spec.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
REPO_ID = "local/x"
FLOAT_TOL = 1e-6  # from/to timestamps (s) and stats (relative): issue 2's tolerances
SERVE_FRAMES = "--serve-frames"  # internal mode, run by the lerobot interpreter


def offline_env(hf_home: Path) -> dict[str, str]:
    """Environment for the lerobot interpreter: no Hub access, HF caches under ``hf_home``."""
    env = dict(os.environ)
    env.update(
        HF_HOME=str(hf_home),
        HF_LEROBOT_HOME=str(hf_home / "lerobot"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
    )
    return env


def writable_copy(source: Path, dest: Path) -> Path:
    """Copy ``source`` to ``dest``, owner-writable throughout (sources may be read-only)."""
    shutil.copytree(source, dest, copy_function=shutil.copyfile)
    for folder, dirs, files in os.walk(dest):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            path.chmod(path.stat().st_mode | 0o200)
    Path(dest).chmod(Path(dest).stat().st_mode | 0o200)
    return dest


def lerobot_convert_command(root: Path, data_mb: float, video_mb: float, chunks_size: int) -> list:
    """The lerobot interpreter's command converting ``root`` in place (CLI when it can)."""
    whole_mb = float(data_mb).is_integer() and float(video_mb).is_integer()
    if whole_mb and chunks_size == 1000:
        return [
            str(LEROBOT_PYTHON),
            "-m",
            "lerobot.scripts.convert_dataset_v21_to_v30",
            f"--repo-id={REPO_ID}",
            f"--root={root}",
            "--push-to-hub=false",
            f"--data-file-size-in-mb={int(data_mb)}",
            f"--video-file-size-in-mb={int(video_mb)}",
        ]
    code = (
        "import lerobot.scripts.convert_dataset_v21_to_v30 as c\n"
        f"c.DEFAULT_CHUNK_SIZE = {int(chunks_size)}\n"
        f"c.convert_dataset(repo_id={REPO_ID!r}, root={str(root)!r}, push_to_hub=False, "
        f"data_file_size_in_mb={data_mb!r}, video_file_size_in_mb={video_mb!r})\n"
    )
    return [str(LEROBOT_PYTHON), "-c", code]


def run_lerobot_converter(
    source: Path, out: Path, data_mb: float, video_mb: float, chunks_size: int, hf_home: Path
) -> Path:
    """Convert a copy of ``source`` at ``out`` with lerobot (in place; ``out_old`` removed)."""
    writable_copy(source, out)
    cmd = lerobot_convert_command(out, data_mb, video_mb, chunks_size)
    log = out.with_name(out.name + ".lerobot.log")
    with open(log, "w") as f:
        proc = subprocess.run(cmd, env=offline_env(hf_home), stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        sys.exit(f"lerobot's converter failed (exit {proc.returncode}), see {log}")
    shutil.rmtree(out.with_name(out.name + "_old"))
    return out


def run_robopipe(source: Path, out: Path, args: argparse.Namespace) -> Path:
    """Convert ``source`` to ``out`` with :func:`robopipe.conversion.serial.convert_dataset`."""
    from robopipe.conversion.serial import convert_dataset

    convert_dataset(
        source,
        out,
        name=args.name,
        data_file_size_in_mb=args.data_mb,
        video_file_size_in_mb=args.video_mb,
        chunks_size=args.chunks_size,
        episodes_per_shard=args.episodes_per_shard,
        restamp_timestamps=args.restamp,
    )
    return out


def relative_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def check_files(ref: Path, out: Path) -> list[str]:
    ref_files, out_files = relative_files(ref), relative_files(out)
    problems = [f"missing: {p}" for p in sorted(ref_files - out_files)]
    return problems + [f"extra: {p}" for p in sorted(out_files - ref_files)]


def check_info(ref: Path, out: Path) -> list[str]:
    a = json.loads((ref / "meta/info.json").read_text())
    b = json.loads((out / "meta/info.json").read_text())
    return dict_differences(a, b, "info")


def dict_differences(expected, actual, where: str) -> list[str]:
    """Every path where two JSON values differ, as 'where.key: actual != expected'."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        problems = [f"{where}.{k}: missing" for k in expected if k not in actual]
        problems += [f"{where}.{k}: unexpected" for k in actual if k not in expected]
        for k in expected.keys() & actual.keys():
            problems += dict_differences(expected[k], actual[k], f"{where}.{k}")
        return problems
    if expected != actual or type(expected) is not type(actual):
        return [f"{where}: {actual!r} != expected {expected!r}"]
    return []


def check_tasks(ref: Path, out: Path) -> list[str]:
    import pandas as pd

    a = pd.read_parquet(ref / "meta/tasks.parquet")
    b = pd.read_parquet(out / "meta/tasks.parquet")
    problems = []
    if a.index.name != b.index.name:
        problems.append(f"index name {b.index.name!r} != expected {a.index.name!r}")
    if list(a.columns) != list(b.columns):
        problems.append(f"columns {list(b.columns)} != expected {list(a.columns)}")
    elif not a.reset_index().equals(b.reset_index()):
        problems.append(f"rows differ:\n{b.reset_index()}\nexpected\n{a.reset_index()}")
    return problems


def read_dir_table(root: Path, pattern: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in sorted(root.glob(pattern))]
    table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables])
    return table.replace_schema_metadata(tables[0].schema.metadata)


def column_values(column):
    """A column as (flat values, list lengths or None): numpy arrays, any list type."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    lengths = []
    while (
        pa.types.is_list(column.type)
        or pa.types.is_fixed_size_list(column.type)
        or (pa.types.is_large_list(column.type))
    ):
        lengths.append(pc.list_value_length(column).to_numpy(zero_copy_only=False))
        column = pc.list_flatten(column)
    values = column.to_numpy(zero_copy_only=False)
    return values, (np.concatenate(lengths) if lengths else None)


def compare_columns(name: str, expected, actual, rtol: float, atol: float) -> list[str]:
    """Values of two arrow columns: exact for ints/strings, within tolerances for floats."""
    import numpy as np

    a, a_len = column_values(expected)
    b, b_len = column_values(actual)
    if (a_len is None) != (b_len is None) or (
        a_len is not None and not np.array_equal(a_len, b_len)
    ):
        return [f"{name}: list lengths differ"]
    if a.shape != b.shape:
        return [f"{name}: {b.shape[0]} values != expected {a.shape[0]}"]
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        close = np.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
        if not close.all():
            i = int(np.flatnonzero(~close)[0])
            return [
                f"{name}: {int((~close).sum())} values differ, first at flat position {i}: "
                f"{b64[i]!r} != expected {a64[i]!r} (max |diff| {np.nanmax(abs(b64 - a64)):.3g})"
            ]
        return []
    if not np.array_equal(a, b):
        i = int(np.flatnonzero(a != b)[0])
        return [f"{name}: values differ, first at flat position {i}: {b[i]!r} != {a[i]!r}"]
    return []


def type_notes(expected, actual, what: str) -> list[str]:
    """Arrow type and schema-metadata differences (reported, not failed: the loader casts to
    the features of info.json)."""
    keys = sorted((expected.schema.metadata or {}).keys())
    other_keys = sorted((actual.schema.metadata or {}).keys())
    notes = [f"{what}: schema metadata keys {other_keys} (lerobot: {keys})"] * (keys != other_keys)
    for field in expected.schema:
        if field.name in actual.schema.names:
            other = actual.schema.field(field.name).type
            if other != field.type:
                notes.append(f"{what} {field.name}: type {other} (lerobot: {field.type})")
    return notes


def check_episodes(ref: Path, out: Path, restamp: bool, notes: list[str]) -> list[str]:
    a = read_dir_table(ref, "meta/episodes/*/*.parquet")
    b = read_dir_table(out, "meta/episodes/*/*.parquet")
    if restamp:  # robopipe's timestamp stats describe the restamped column
        restamped = [n for n in a.column_names if n.startswith("stats/timestamp/")]
        notes.append(f"episode rows: {restamped} not compared (restamped timestamps)")
        a, b = a.drop_columns(restamped), b.drop_columns(restamped)
    problems = []
    if a.column_names != b.column_names:
        problems.append(f"columns {b.column_names} != expected {a.column_names}")
    if a.num_rows != b.num_rows:
        return problems + [f"{b.num_rows} rows != expected {a.num_rows}"]
    notes += type_notes(a, b, "episodes")
    for name in a.column_names:
        if name in b.column_names:
            problems += compare_columns(name, a[name], b[name], rtol=FLOAT_TOL, atol=FLOAT_TOL)
    return problems


def check_stats(ref: Path, out: Path, restamp: bool, notes: list[str]) -> list[str]:
    import numpy as np

    a = json.loads((ref / "meta/stats.json").read_text())
    b = json.loads((out / "meta/stats.json").read_text())
    if restamp:  # robopipe's timestamp stats describe the restamped column
        notes.append(f"stats.json timestamp: {b.pop('timestamp')} (lerobot: {a.pop('timestamp')})")
    problems = [f"feature {k}: missing" for k in a if k not in b]
    problems += [f"feature {k}: unexpected" for k in b if k not in a]
    for feature in a.keys() & b.keys():
        for stat in a[feature].keys() | b[feature].keys():
            if stat not in a[feature] or stat not in b[feature]:
                problems.append(f"{feature}/{stat}: present in only one of them")
                continue
            x, y = np.asarray(a[feature][stat], float), np.asarray(b[feature][stat], float)
            if x.shape != y.shape:
                problems.append(f"{feature}/{stat}: shape {y.shape} != expected {x.shape}")
            elif not np.allclose(y, x, rtol=FLOAT_TOL, atol=1e-12):
                problems.append(f"{feature}/{stat}: {y.tolist()} != expected {x.tolist()}")
    return problems


def check_data(ref: Path, out: Path, restamp: bool, fps: int, notes: list[str]) -> list[str]:
    import numpy as np
    import pyarrow.parquet as pq

    problems = []
    for path in sorted(ref.glob("data/*/*.parquet")):
        rel = path.relative_to(ref).as_posix()
        if not (out / rel).exists():
            continue  # reported by the files check
        a, b = pq.read_table(path), pq.read_table(out / rel)
        if a.column_names != b.column_names:
            problems.append(f"{rel}: columns {b.column_names} != expected {a.column_names}")
        if a.num_rows != b.num_rows:
            problems.append(f"{rel}: {b.num_rows} rows != expected {a.num_rows}")
            continue
        notes += type_notes(a, b, "data")
        for name in a.column_names:
            if name not in b.column_names:
                continue
            if name == "timestamp" and restamp:
                frame_index = b["frame_index"].to_numpy()
                expected = (frame_index / fps).astype(np.float32)
                got = b["timestamp"].to_numpy()
                if not np.array_equal(got, expected):
                    problems.append(f"{rel}: timestamp != float32(frame_index / fps)")
                moved = np.abs(a["timestamp"].to_numpy() - expected).max()
                notes.append(f"{rel}: restamped, max |source - frame_index/fps| = {moved:.4f} s")
                continue
            problems += [f"{rel}: {p}" for p in compare_columns(name, a[name], b[name], 0, 0)]
    return problems


def packets(path: Path) -> tuple:
    """(time_base, [(pts, dts, is_keyframe, size, md5)]) of the first video stream."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rows = [
            (p.pts, p.dts, p.is_keyframe, p.size, hashlib.md5(bytes(p)).hexdigest())
            for p in container.demux(stream)
            if p.dts is not None
        ]
        return stream.time_base, rows


def check_videos(ref: Path, out: Path) -> list[str]:
    problems = []
    for path in sorted(ref.glob("videos/*/*/*.mp4")):
        rel = path.relative_to(ref).as_posix()
        if not (out / rel).exists():
            continue  # reported by the files check
        (tb_a, a), (tb_b, b) = packets(path), packets(out / rel)
        if tb_a != tb_b:
            problems.append(f"{rel}: time_base {tb_b} != expected {tb_a}")
        if len(a) != len(b):
            problems.append(f"{rel}: {len(b)} packets != expected {len(a)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                problems.append(f"{rel}: packet {i} (pts, dts, key, size, md5) {y} != {x}")
                break
    return problems


def sample_indices(out: Path, random_count: int, seed: int) -> list[int]:
    """First and last frame of every episode plus ``random_count`` random frames (global index)."""
    import numpy as np

    episodes = read_dir_table(out, "meta/episodes/*/*.parquet")
    start = episodes["dataset_from_index"].to_numpy()
    stop = episodes["dataset_to_index"].to_numpy()
    total = int(stop.max())
    rng = np.random.default_rng(seed)
    picked = set(start.tolist()) | set((stop - 1).tolist())
    picked |= set(rng.integers(0, total, size=min(random_count, total)).tolist())
    return sorted(int(i) for i in picked)


def check_loader(out: Path, source: Path, indices: list[int], hf_home: Path, work: Path) -> list:
    """Frames served by lerobot's LeRobotDataset vs frames decoded from the source mp4s."""
    result_path = work / "served_frames.json"
    cmd = [str(LEROBOT_PYTHON), str(Path(__file__).resolve()), SERVE_FRAMES, str(out)]
    cmd += [str(source), str(result_path), ",".join(map(str, indices))]
    proc = subprocess.run(cmd, env=offline_env(hf_home), capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"LeRobotDataset failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"]
    result = json.loads(result_path.read_text())
    print(f"  lerobot served {result['items']} items x {result['cameras']} camera(s)")
    return result["problems"]


def serve_frames(root: str, source: str, result_path: str, indices: str) -> None:
    """Lerobot interpreter side of :func:`check_loader` (imports lerobot; not robopipe)."""
    import torch
    from lerobot.datasets import LeRobotDataset
    from torchcodec.decoders import VideoDecoder

    ds = LeRobotDataset(REPO_ID, root=root, return_uint8=True)
    info = json.loads(Path(source, "meta/info.json").read_text())
    problems = []
    items = [int(i) for i in indices.split(",")]
    for idx in items:
        item = ds[idx]
        ep, frame = int(item["episode_index"]), int(item["frame_index"])
        if int(item["index"]) != idx:
            problems.append(f"item {idx}: index {int(item['index'])}")
        for key in ds.meta.video_keys:
            rel = info["video_path"].format(
                episode_chunk=ep // info["chunks_size"], video_key=key, episode_index=ep
            )
            expected = VideoDecoder(str(Path(source, rel)), seek_mode="exact")[frame]
            served = item[key]
            if served.dtype != torch.uint8 or served.shape != expected.shape:
                problems.append(f"item {idx} {key}: {served.dtype} {tuple(served.shape)}")
            elif not torch.equal(served, expected):
                diff = (served.int() - expected.int()).abs().max().item()
                where = f"item {idx} (episode {ep}, frame {frame}) {key}"
                problems.append(f"{where}: max |diff| {diff}")
    Path(result_path).write_text(
        json.dumps({"items": len(items), "cameras": len(ds.meta.video_keys), "problems": problems})
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="v2.1 dataset folder")
    parser.add_argument("--name", default="compat", help="dataset name for robopipe's messages")
    parser.add_argument("--data-mb", type=float, default=100, help="data file size threshold")
    parser.add_argument("--video-mb", type=float, default=200, help="video file size threshold")
    parser.add_argument("--chunks-size", type=int, default=1000, help="files per chunk dir")
    parser.add_argument(
        "--episodes-per-shard", type=int, default=200, help="robopipe's episodes per shard"
    )
    parser.add_argument(
        "--restamp", action="store_true", help="robopipe restamps timestamps as frame_index/fps"
    )
    parser.add_argument(
        "--lerobot-ref", type=Path, help="existing lerobot output for these options (skip run)"
    )
    parser.add_argument("--random-frames", type=int, default=40, help="random items to load")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, help="keep outputs here (default: temp, removed)")
    args = parser.parse_args(argv)
    if not LEROBOT_PYTHON.exists():
        sys.exit(f"{LEROBOT_PYTHON} missing: run tools/lerobot_env.sh first")
    source = args.source.resolve()
    with tempfile.TemporaryDirectory(prefix="lerobot_compat_") as tmp:
        work = args.work.resolve() if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        hf_home = Path(tmp) / "hf"
        ref = args.lerobot_ref.resolve() if args.lerobot_ref else work / "lerobot"
        if not args.lerobot_ref:
            if ref.exists():
                shutil.rmtree(ref)
            run_lerobot_converter(
                source, ref, args.data_mb, args.video_mb, args.chunks_size, hf_home
            )
        out = work / "robopipe"
        if out.exists():
            shutil.rmtree(out)
        run_robopipe(source, out, args)
        fps = json.loads((out / "meta/info.json").read_text())["fps"]
        notes: list[str] = []
        checks = {
            "files": lambda: check_files(ref, out),
            "info.json": lambda: check_info(ref, out),
            "tasks.parquet": lambda: check_tasks(ref, out),
            "episode rows": lambda: check_episodes(ref, out, args.restamp, notes),
            "stats.json": lambda: check_stats(ref, out, args.restamp, notes),
            "data parquet": lambda: check_data(ref, out, args.restamp, fps, notes),
            "video packets": lambda: check_videos(ref, out),
            "lerobot loader frames": lambda: check_loader(
                out, source, sample_indices(out, args.random_frames, args.seed), hf_home, work
            ),
        }
        failed = []
        for name, check in checks.items():
            problems = check()
            print(f"{'PASS' if not problems else 'FAIL'} {name}")
            for problem in problems[:20]:
                print(f"  {problem}")
            if len(problems) > 20:
                print(f"  ... {len(problems) - 20} more")
            if problems:
                failed.append(name)
        for note in dict.fromkeys(notes):
            print(f"NOTE {note}")
        print(f"{'FAIL' if failed else 'PASS'}: {len(checks) - len(failed)}/{len(checks)} checks")
        return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == SERVE_FRAMES:
        serve_frames(*sys.argv[2:])
    else:
        sys.exit(main())
