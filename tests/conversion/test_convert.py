"""Whole conversions of generated datasets, checked against the plan and the source."""

import json
import shutil

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.conversion.aggregate import aggregate_video
from robopipe.conversion.meta import _SourceStats, _tables, write_episodes
from robopipe.conversion.plan import make_plan
from robopipe.conversion.serial import convert_dataset
from robopipe.conversion.shard import build_shard
from robopipe.conversion.validate import validate, validate_data_file, validate_video_file
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import load_source
from robopipe.layout import SHARD_STATS, V21_EPISODES_STATS_PATH, data_path, video_path
from robopipe.options import ConversionOptions


@pytest.fixture(scope="module")
def rollover(make_v21, tmp_path_factory):
    """A 12-episode, 2-camera dataset converted with thresholds small enough that data and
    each camera roll over into several files and chunk directories (3 files per chunk)."""
    source_dir = make_v21(episodes=12, cameras=2)
    out = tmp_path_factory.mktemp("out") / "v3.0"
    plan = convert_dataset(
        source_dir,
        out,
        name="demo",
        data_file_size_in_mb=0.004,
        video_file_size_in_mb=0.02,
        chunks_size=3,
        episodes_per_shard=2,
        validate_frames="all",
    )
    return load_source(source_dir, "demo"), plan, out


def _decode_all(path):
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return [(float(f.pts * stream.time_base), f.to_ndarray()) for f in container.decode(stream)]


def test_streams_roll_over_into_several_files_and_chunks(rollover):
    _, plan, out = rollover
    data_files = {tuple(e.data) for e in plan.episodes}
    assert len(data_files) >= 4 and max(c for c, _ in data_files) >= 1
    for key in plan.video_keys:
        assert len({tuple(e.videos[key]) for e in plan.episodes}) >= 2
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("data/*/*.parquet")) == sorted(
        data_path(f.chunk, f.file) for f in plan.data_files
    )


def test_data_rows_equal_the_source_rows(rollover):
    source, plan, out = rollover
    converted = pa.concat_tables(pq.read_table(p) for p in sorted(out.glob("data/*/*.parquet")))
    original = pa.concat_tables(
        pq.read_table(source.data_file(i)) for i in range(len(source.episodes))
    )
    assert converted.schema.names == original.schema.names
    assert converted.equals(original)
    for ep in plan.episodes:
        table = pq.read_table(out / data_path(*ep.data))
        assert ep.episode_index in table.column("episode_index").to_pylist()


def test_every_frame_is_bit_identical_to_the_source(rollover):
    source, plan, out = rollover
    meta = pa.concat_tables(
        pq.read_table(p) for p in sorted(out.glob("meta/episodes/*/*.parquet"))
    ).to_pylist()
    for key in plan.video_keys:
        decoded = {}
        for ep, row in zip(plan.episodes, meta, strict=True):
            path = out / video_path(key, *ep.videos[key])
            frames = decoded.setdefault(path, _decode_all(path))
            start = row[f"videos/{key}/from_timestamp"]
            ours = [
                f
                for ts, f in frames
                if start - 1e-6 <= ts < row[f"videos/{key}/to_timestamp"] - 1e-6
            ]
            theirs = [f for _, f in _decode_all(source.video_file(ep.source_episode_index, key))]
            assert len(ours) == len(theirs) == ep.length
            for k, (a, b) in enumerate(zip(ours, theirs, strict=True)):
                assert np.array_equal(a, b), f"episode {ep.episode_index} frame {k} {key}"


def test_episode_rows_follow_lerobot(rollover):
    source, plan, out = rollover
    files = sorted(out.glob("meta/episodes/*/*.parquet"))
    table = pa.concat_tables(pq.read_table(p) for p in files)
    rows = table.to_pylist()
    assert [r["episode_index"] for r in rows] == list(range(12))
    key = plan.video_keys[0]
    for r, ep, legacy in zip(rows, plan.episodes, source.episodes, strict=True):
        assert r["length"] == legacy["length"] and r["tasks"] == legacy["tasks"]
        assert (r["dataset_from_index"], r["dataset_to_index"]) == (
            ep.dataset_from_index,
            ep.dataset_to_index,
        )
        assert r[f"videos/{key}/to_timestamp"] - r[f"videos/{key}/from_timestamp"] == (
            pytest.approx(legacy["length"] / 30, abs=1e-9)
        )
        assert r["stats/action/count"] == [legacy["length"]]
    assert table.column_names[-2:] == ["meta/episodes/chunk_index", "meta/episodes/file_index"]


def test_info_tasks_and_stats(rollover):
    source, _, out = rollover
    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert "total_chunks" not in info and "total_videos" not in info
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["features"]["action"]["fps"] == 30
    assert "fps" not in info["features"]["observation.images.front"]
    assert list(info)[:3] == ["codebase_version", "fps", "features"]
    tasks = pq.read_table(out / "meta/tasks.parquet").to_pandas()
    assert list(tasks.index) == source.tasks
    assert list(tasks["task_index"]) == list(range(len(source.tasks)))
    stats = json.loads((out / "meta/stats.json").read_text())
    frames = sum(e["length"] for e in source.episodes)
    assert stats["action"]["count"] == [frames]
    assert np.asarray(stats["observation.images.front"]["mean"]).shape == (3, 1, 1)


def test_skipped_episodes_are_left_out_and_renumbered(make_v21, tmp_path):
    source_dir = make_v21(episodes=6)
    source = load_source(source_dir, "demo")
    convert_dataset(source_dir, tmp_path / "v3.0", name="demo", skip_episodes=(0, 3))
    table = pq.read_table(tmp_path / "v3.0" / data_path(0, 0))
    kept = [1, 2, 4, 5]
    lengths = [source.episodes[i]["length"] for i in kept]
    assert table.num_rows == sum(lengths)
    assert table.column("index").to_pylist() == list(range(sum(lengths)))
    assert table.column("episode_index").to_pylist() == [
        i for i, n in enumerate(lengths) for _ in range(n)
    ]
    info = json.loads((tmp_path / "v3.0/meta/info.json").read_text())
    assert info["total_episodes"] == 4 and info["splits"] == {"train": "0:4"}


def test_episodes_metadata_is_one_file_as_lerobot_writes_it(rollover):
    _, _, out = rollover
    assert [p.relative_to(out).as_posix() for p in out.glob("meta/episodes/*/*.parquet")] == [
        "meta/episodes/chunk-000/file-000.parquet"
    ]


def test_large_episodes_metadata_rolls_over_into_several_files(tmp_path):
    rows = [{"episode_index": i, "length": 10, "tasks": ["t" * 200]} for i in range(50)]
    write_episodes(rows, tmp_path, chunks_size=2, file_size_in_mb=0.002)
    files = sorted(tmp_path.glob("episodes/*/*.parquet"))
    assert len(files) >= 3 and files[2].parent.name == "chunk-001"
    tables = [pq.read_table(f) for f in files]
    assert sum(t.num_rows for t in tables) == 50
    whole = pa.concat_tables(tables)
    assert whole.column("episode_index").to_pylist() == list(range(50))
    for f, t in zip(files, tables, strict=True):
        chunk, file = int(f.parent.name[-3:]), int(f.stem[-3:])
        assert set(t.column("meta/episodes/chunk_index").to_pylist()) == {chunk}
        assert set(t.column("meta/episodes/file_index").to_pylist()) == {file}


def test_episodes_metadata_from_small_tables_is_the_same_file(tmp_path):
    rows = [
        {"episode_index": i, "tasks": [f"t{i % 3}"], "stats/x/min": [i, i + 1], "n": None}
        for i in range(40)
    ]
    rows[30]["n"] = 2.5  # a column whose type only later rows decide
    rows[31]["extra"] = 1  # a column the first row lacks: not written, as from_pylist does
    write_episodes(rows, tmp_path / "whole", chunks_size=10)
    write_episodes(_tables(iter(rows), 8), tmp_path / "tables", chunks_size=10)
    path = "episodes/chunk-000/file-000.parquet"
    assert (tmp_path / "whole" / path).read_bytes() == (tmp_path / "tables" / path).read_bytes()


def test_episodes_files_spilled_to_disk_are_those_of_the_tables_joined(tmp_path):
    # enough distinct floats that the writer's dictionaries fall back to plain pages, where
    # the bytes depend on how the rows are chunked: the spill must keep each table a chunk
    rng = np.random.default_rng(0)
    tables = [
        pa.Table.from_pydict(
            {
                "episode_index": list(range(s, s + 256)),
                "stats/x/mean": rng.random((256, 10)).tolist(),
            }
        )
        for s in range(0, 38_400, 256)
    ]
    write_episodes(iter(tables), tmp_path / "spilled", chunks_size=2, file_size_in_mb=1.2)
    whole = pa.concat_tables(tables)  # what write_episodes held before it spilled
    per_file = int(1.2 * 2**20 * whole.num_rows / whole.nbytes)
    files = sorted((tmp_path / "spilled").glob("episodes/*/*.parquet"))
    assert len(files) == 3 and not list((tmp_path / "spilled").glob(".episodes-*"))
    for number, (start, path) in enumerate(zip(range(0, 38_400, per_file), files, strict=True)):
        part = whole.slice(start, per_file)
        chunk, file = divmod(number, 2)
        part = part.append_column("meta/episodes/chunk_index", pa.array([chunk] * len(part)))
        part = part.append_column("meta/episodes/file_index", pa.array([file] * len(part)))
        pq.write_table(part, tmp_path / "expected.parquet")
        assert path.read_bytes() == (tmp_path / "expected.parquet").read_bytes()
        if number == 0:  # the bytes of other chunks differ: the test is sharp
            pq.write_table(part.combine_chunks(), tmp_path / "one_chunk.parquet")
            assert path.read_bytes() != (tmp_path / "one_chunk.parquet").read_bytes()


def test_source_stats_are_read_one_line_at_a_time(make_v21, tmp_path):
    source_dir = tmp_path / "v21"
    shutil.copytree(make_v21(episodes=3, min_length=5, max_length=5), source_dir)
    path = source_dir / V21_EPISODES_STATS_PATH
    lines = path.read_text().splitlines()
    entry = json.loads(lines[0])
    entry["stats"] = {"x": {"min": [7]}}
    # out of order, a blank line, and episode 0 listed twice: the last line counts
    path.write_text("\n".join([lines[2], "", lines[0], lines[1], json.dumps(entry)]) + "\n")
    source = load_source(source_dir, "demo")
    found = _SourceStats(source)
    try:
        assert found.get(0) == {"x": {"min": [7]}}
        assert found.get(2) == json.loads(lines[2])["stats"]
        assert found.get(1) == source.available_stats[1]
        assert found.get(5) is None
    finally:
        found.close()


def _staged_video(make_v21, tmp_path):
    """A 4-episode source, its plan and its one video file per camera made by aggregate_video
    into ``tmp_path / "out"``, with the remux record beside it."""
    source_dir = tmp_path / "v21"
    shutil.copytree(make_v21(episodes=4, min_length=12, max_length=12), source_dir)
    source = load_source(source_dir, "demo")
    plan = make_plan(source, ConversionOptions())
    key = source.video_keys[0]
    root = tmp_path / "out"
    record = tmp_path / "episodes.json"
    aggregate_video(source, plan, key, 0, 0, root / video_path(key, 0, 0), record)
    return source, plan, key, root, record


def test_video_validation_compares_packets_and_sampled_frames(make_v21, tmp_path):
    source, plan, key, root, record = _staged_video(make_v21, tmp_path)
    report = validate_video_file(source, plan, root, key, 0, 0, record)
    assert report["packets"] == 4 * 12 and report["frames_compared"] == 3
    everything = validate_video_file(source, plan, root, key, 0, 0, record, frames="all")
    assert everything["frames_compared"] == 4 * 12


def test_video_validation_catches_a_changed_packet(make_v21, tmp_path):
    source, plan, key, root, record = _staged_video(make_v21, tmp_path)
    path = root / video_path(key, 0, 0)
    data = bytearray(path.read_bytes())
    at = data.index(b"mdat") + 200  # inside the first packets' payload
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="payload_xxh3") as caught:
        validate_video_file(source, plan, root, key, 0, 0, record)
    assert caught.value.episode == 0


def test_video_validation_catches_a_frame_that_differs_from_the_source(make_v21, tmp_path):
    """The sampled frames are decoded from the output and from the source: give the source
    another episode's mp4 of the same length and the check names that episode."""
    source, plan, key, root, record = _staged_video(make_v21, tmp_path)
    shutil.copyfile(source.video_file(1, key), source.video_file(2, key))
    with pytest.raises(DatasetError, match="differs from the source") as caught:
        validate_video_file(source, plan, root, key, 0, 0, record)
    assert caught.value.episode == 2 and key in str(caught.value)


def test_remux_refuses_an_episode_of_another_size(make_v21, tmp_path):
    """An episode re-encoded at another size among the others would be published as a file
    lerobot cannot decode into its preallocated frames: the remux stops and names it."""
    source_dir = tmp_path / "v21"
    shutil.copytree(make_v21(episodes=3, min_length=12, max_length=12), source_dir)
    other = make_v21(episodes=3, min_length=12, max_length=12, height=64, width=80)
    source = load_source(source_dir, "demo")
    key = source.video_keys[0]
    shutil.copyfile(load_source(other, "other").video_file(1, key), source.video_file(1, key))
    plan = make_plan(source, ConversionOptions())
    with pytest.raises(DatasetError, match="80x64") as caught:
        aggregate_video(source, plan, key, 0, 0, tmp_path / "f.mp4", tmp_path / "e.json")
    assert caught.value.episode == 1
    assert not (tmp_path / "f.mp4").exists()


def test_data_validation_catches_a_changed_value(make_v21, tmp_path):
    source_dir = make_v21(episodes=3, min_length=12, max_length=12)
    out = tmp_path / "v3.0"
    plan = convert_dataset(source_dir, out, name="demo")
    source = load_source(source_dir, "demo")
    assert validate_data_file(source, plan, out, 0, 0)["rows"] == plan.total_frames
    table = pq.read_table(out / data_path(0, 0))
    action = table.column("action").to_pylist()
    action[13] = [v + 1.0 for v in action[13]]
    column = pa.array(action, type=table.schema.field("action").type)
    table = table.set_column(table.schema.get_field_index("action"), "action", column)
    pq.write_table(table, out / data_path(0, 0))
    with pytest.raises(DatasetError, match="column action differs") as caught:
        validate_data_file(source, plan, out, 0, 0)
    assert caught.value.episode == 1


def test_the_whole_dataset_check_looks_frames_up_as_a_loader_does(make_v21, tmp_path):
    source_dir = make_v21(episodes=3, min_length=12, max_length=12)
    out = tmp_path / "v3.0"
    plan = convert_dataset(source_dir, out, name="demo")
    source = load_source(source_dir, "demo")
    reports = [{"file": rel} for rel in plan.file_paths()]
    summary = validate(source, plan, out, reports)
    assert summary["frames_loaded"] == 2 * len(plan.video_keys)  # one file per camera
    with pytest.raises(DatasetError, match="no validation report"):
        validate(source, plan, out, reports[1:])
    episodes_file = out / "meta/episodes/chunk-000/file-000.parquet"
    good = pq.read_table(episodes_file)
    lengths = good.column("length").to_pylist()
    lengths[1] += 1  # a row that is not the plan's
    pq.write_table(
        good.set_column(good.schema.get_field_index("length"), "length", pa.array(lengths)),
        episodes_file,
    )
    with pytest.raises(DatasetError, match="meta/episodes row 1 is .*'length': 13") as caught:
        validate(source, plan, out, reports)
    assert caught.value.episode == 1
    pq.write_table(good, episodes_file)
    info = json.loads((out / "meta/info.json").read_text())
    key = plan.video_keys[0]
    info["features"][key]["info"]["video.height"] = 64
    (out / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="info.json declares") as caught:
        validate(source, plan, out, reports)
    assert caught.value.episode == 0


def test_shards_compute_only_the_stats_the_source_lacks(make_v21, tmp_path):
    source_dir = tmp_path / "src"
    shutil.copytree(make_v21(episodes=4, min_length=10, max_length=12), source_dir)
    stats_file = source_dir / V21_EPISODES_STATS_PATH
    lines = stats_file.read_text().splitlines(keepends=True)
    stats_file.write_text("".join(line for i, line in enumerate(lines) if i != 2))
    source = load_source(source_dir, "demo")
    plan = make_plan(source, ConversionOptions(compute_missing_stats=True, episodes_per_shard=2))
    computed = {}
    for shard in plan.shards:
        build_shard(source, plan, shard.id, tmp_path / shard.id)
        computed.update(json.loads((tmp_path / shard.id / SHARD_STATS).read_text()))
    assert list(computed) == ["2"]
    assert computed["2"]["action"]["count"] == [plan.episodes[2].length]
