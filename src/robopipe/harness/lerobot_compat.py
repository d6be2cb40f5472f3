"""``robopipe-lerobot-compat``: robopipe's v2.1 -> v3.0 conversion against lerobot 0.6.1's.

Converts a v2.1 folder twice, with lerobot's own converter (in the peer interpreter,
``tools/lerobot_env.sh`` makes ``.venv-lerobot``; :mod:`robopipe.harness.lerobot_convert`) and
with :func:`robopipe.conversion.serial.convert_dataset`, then compares the two outputs, and
has ``LeRobotDataset(repo_id="local/x", root=<robopipe output>, return_uint8=True)`` serve a
sample of frames (first and last frame of every episode plus random ones), compared with the
frame decoded by the same torchcodec straight from the source's v2.1 mp4
(:mod:`robopipe.harness.lerobot_frames`).

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

    robopipe-lerobot-compat --source ../shared/datasets/cr5_banana_plate_v21 --restamp
    robopipe-lerobot-compat --source DEMO --data-mb 0.2 --video-mb 1 --chunks-size 3

The comparison itself (not the conversions) follows lerobot 0.6.1
``scripts/convert_dataset_v21_to_v30.py`` (see ../shared/reference/lerobot_v21_to_v30_spec.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from robopipe.harness.lerobot_convert import REPO_ID, offline_env, run_lerobot_converter
from robopipe.peer_env import DEFAULT_PEER_PYTHON

FLOAT_TOL = 1e-6  # from/to timestamps (s) and stats (relative): issue 2's tolerances
FRAMES_SCRIPT = Path(__file__).with_name("lerobot_frames.py")


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
    """Every file below ``root``, as a POSIX path relative to it."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def check_files(ref: Path, out: Path) -> list[str]:
    """Files of lerobot's output ``ref`` missing from ``out``, and files only ``out`` has."""
    ref_files, out_files = relative_files(ref), relative_files(out)
    problems = [f"missing: {p}" for p in sorted(ref_files - out_files)]
    return problems + [f"extra: {p}" for p in sorted(out_files - ref_files)]


def check_info(ref: Path, out: Path) -> list[str]:
    """Where ``out``'s meta/info.json differs from ``ref``'s (:func:`dict_differences`)."""
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
    """meta/tasks.parquet: the same index name, columns and rows."""
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
    """The parquet files ``pattern`` matches below ``root``, in name order, as one arrow
    table (the first file's schema metadata)."""
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
    """meta/episodes/ rows, column by column (floats within ``FLOAT_TOL``); type differences
    and, with ``restamp``, the timestamp stats left out are added to ``notes``."""
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
    """meta/stats.json, feature by feature and stat by stat (within ``FLOAT_TOL`` relative);
    with ``restamp`` the timestamp stats go to ``notes`` instead."""
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
    """Each data parquet of ``ref`` against ``out``'s of the same path, column by column,
    exactly; with ``restamp``, ``out``'s timestamps must be ``float32(frame_index / fps)``."""
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
    """Each mp4 of ``ref`` against ``out``'s of the same path: time base and every packet
    (:func:`packets`); the first differing packet of a file is reported."""
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


def check_loader(
    python: str | Path, out: Path, source: Path, indices: list[int], hf_home: Path, work: Path
) -> list[str]:
    """Frames served by lerobot's LeRobotDataset (in the peer interpreter ``python``, offline,
    HF caches under ``hf_home``) vs frames decoded from the source mp4s: the problems, one
    line each (:mod:`robopipe.harness.lerobot_frames`; its result goes to ``work``)."""
    result_path = work / "served_frames.json"
    cmd = [str(python), str(FRAMES_SCRIPT), REPO_ID, str(out), str(source), str(result_path)]
    cmd.append(",".join(map(str, indices)))
    proc = subprocess.run(cmd, env=offline_env(hf_home), capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"LeRobotDataset failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"]
    result = json.loads(result_path.read_text())
    print(f"  lerobot served {result['items']} items x {result['cameras']} camera(s)")
    return result["problems"]


def main(argv: list[str] | None = None) -> int:
    """The command: convert ``--source`` both ways, run the checks, print PASS/FAIL per check;
    returns the exit status (1 when any check fails)."""
    parser = argparse.ArgumentParser(
        prog="robopipe-lerobot-compat", description=__doc__.split("\n\n")[0].split(": ", 1)[1]
    )
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
    parser.add_argument(
        "--lerobot-python",
        type=Path,
        default=Path(DEFAULT_PEER_PYTHON),
        help=f"the peer interpreter with lerobot 0.6.1 (default: {DEFAULT_PEER_PYTHON})",
    )
    args = parser.parse_args(argv)
    python = args.lerobot_python.absolute()
    if not python.exists():
        sys.exit(f"{python} missing: run tools/lerobot_env.sh first")
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
                python, source, ref, args.data_mb, args.video_mb, args.chunks_size, hf_home
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
                python,
                out,
                source,
                sample_indices(out, args.random_frames, args.seed),
                hf_home,
                work,
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
    sys.exit(main())
