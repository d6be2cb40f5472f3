"""Edits (robopipe.edits) on a small generated dataset converted to v3.0: delete, split and
merge by stream copy, compared with the source, with the conversion's skip_episodes, and
merge(split(x)) with x."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.conversion.validate import same_bits
from robopipe.edits import reencode
from robopipe.edits.files import write_video_file
from robopipe.edits.plan import make_edit_plan
from robopipe.edits.serial import edit_dataset
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import read_episodes_table, read_meta
from robopipe.harness import faults
from robopipe.mp4 import read_track

EPISODES = 12
DELETED = [1, 6, 10]  # spread over the files
# small thresholds: data and each camera roll over into several files and chunk folders
LAYOUT = dict(data_file_size_in_mb=0.004, video_file_size_in_mb=0.02, chunks_size=3)


@pytest.fixture(scope="module")
def v21(make_v21):
    return make_v21(episodes=EPISODES, cameras=2, tasks=("pick", "place"))


@pytest.fixture(scope="module")
def converted(v21, tmp_path_factory):
    out = tmp_path_factory.mktemp("x") / "v3.0"
    convert_dataset(v21, out, name="x", **LAYOUT)
    return out


@pytest.fixture(scope="module")
def edits(converted, tmp_path_factory):
    root = tmp_path_factory.mktemp("edits")
    before = _tree(converted)
    out = {}
    out["deleted"] = root / "deleted"
    edit_dataset(
        {"type": "delete_episodes", "episode_indices": DELETED}, [converted], out["deleted"]
    )
    splits = {"type": "split", "splits": {"train": 0.8, "val": 0.2}}
    for split in ("train", "val"):
        out[split] = root / split
        edit_dataset(splits, [converted], out[split], split=split, name=f"x_{split}")
    out["merged"] = root / "merged"
    edit_dataset({"type": "merge"}, [out["train"], out["val"]], out["merged"], name="merged")
    assert _tree(converted) == before, "the source changed"
    return out


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}  # fmt: skip


def _rows(root) -> pa.Table:
    files = sorted((root / "data").rglob("*.parquet"))
    return pa.concat_tables(pq.read_table(f) for f in files)


EPISODE_COLUMNS = ["episode_index", "length", "tasks", "dataset_from_index", "dataset_to_index"]


def _episodes(root, columns=EPISODE_COLUMNS) -> pa.Table:
    return read_episodes_table(read_meta(str(root)), columns)


def _episode_packets(root):
    """Per camera, per episode: the payloads and relative pts of its packets."""
    meta = read_meta(str(root))
    result = {}
    for key in meta.video_keys:
        result[key] = []
        for episode in range(meta.num_episodes):
            track = read_track(root / meta.video_file(key, episode))
            data = (root / meta.video_file(key, episode)).read_bytes()
            lo = round(meta.episodes[f"videos/{key}/from_timestamp"][episode] * track.timescale)
            hi = round(meta.episodes[f"videos/{key}/to_timestamp"][episode] * track.timescale)
            inside = np.flatnonzero((track.pts >= lo) & (track.pts < hi))
            result[key].append(
                [
                    (bytes(data[track.offsets[i] : track.offsets[i] + track.sizes[i]]),
                     int(track.pts[i] - lo), bool(track.keyframes[i]))
                    for i in inside
                ]
            )  # fmt: skip
    return result


def _stats(root):
    return json.loads((root / "meta/stats.json").read_text())


def _assert_stats_close(a, b):
    assert a.keys() == b.keys()
    for feature in a:
        for stat in a[feature]:
            np.testing.assert_allclose(
                np.asarray(a[feature][stat], float), np.asarray(b[feature][stat], float),
                rtol=1e-5, atol=1e-8, err_msg=f"{feature}/{stat}",
            )  # fmt: skip


def _info_totals(root):
    info = json.loads((root / "meta/info.json").read_text())
    keys = ("total_episodes", "total_frames", "total_tasks", "splits", "fps", "features")
    return {k: info[k] for k in keys}


def test_source_has_several_files(converted):
    meta = read_meta(str(converted))
    assert len(set(meta.episodes["data/file_index"] + 10 * meta.episodes["data/chunk_index"])) >= 4
    # the deleted episodes lie in different data files
    assert len({meta.data_file(i) for i in DELETED}) == len(DELETED)


def _assert_same_dataset(got: Path, expected: Path) -> None:
    """Data rows (every column), meta/episodes, tasks, info.json's totals and every episode's
    packets equal; stats within 1e-5 relative."""
    assert _rows(got).equals(_rows(expected))
    assert _episodes(got).equals(_episodes(expected))
    assert pq.read_table(got / "meta/tasks.parquet").equals(
        pq.read_table(expected / "meta/tasks.parquet")
    )
    assert _info_totals(got) == _info_totals(expected)
    _assert_stats_close(_stats(got), _stats(expected))
    assert _episode_packets(got) == _episode_packets(expected)


def test_merge_of_the_splits_equals_the_source(converted, edits):
    _assert_same_dataset(edits["merged"], converted)


def test_split_takes_lerobots_fractions(converted, edits):
    train, val = (read_meta(str(edits[s])) for s in ("train", "val"))
    assert (train.num_episodes, val.num_episodes) == (int(EPISODES * 0.8), EPISODES - 9)
    source = _rows(converted)
    assert _rows(edits["val"]).num_rows == source.num_rows - _rows(edits["train"]).num_rows
    assert _rows(edits["val"])["index"].to_pylist()[0] == 0


def test_delete_equals_the_conversion_with_skip_episodes(v21, edits, tmp_path):
    skipped = tmp_path / "skipped"
    convert_dataset(v21, skipped, name="x", skip_episodes=DELETED, **LAYOUT)
    _assert_same_dataset(edits["deleted"], skipped)


def test_delete_keeps_every_other_episodes_frames(converted, edits):
    source, deleted = _episode_packets(converted), _episode_packets(edits["deleted"])
    kept = [i for i in range(EPISODES) if i not in DELETED]
    for key in source:
        assert deleted[key] == [source[key][i] for i in kept]


def test_whole_files_are_linked(converted, edits):
    """A video file of the split that keeps all its input file's episodes is that file."""
    inodes = {p.stat().st_ino for p in (converted / "videos").rglob("*.mp4")}
    linked = [p for p in (edits["train"] / "videos").rglob("*.mp4") if p.stat().st_ino in inodes]
    assert linked


def test_unknown_episode_index_is_refused(converted, tmp_path):
    with pytest.raises(DatasetError, match=r"episode 12: delete_episodes: no episode 12"):
        edit_dataset({"type": "delete_episodes", "episode_indices": [2, 12]}, [converted],
                     tmp_path / "out")  # fmt: skip
    assert not (tmp_path / "out").exists() and not list(tmp_path.iterdir())


def test_fractions_must_add_up_to_one(converted):
    with pytest.raises(DatasetError, match=r"add up to 0.9, not 1 \(train: 0.7, val: 0.2\)"):
        make_edit_plan("s", {"type": "split", "splits": {"train": 0.7, "val": 0.2}}, [converted],
                       split="train")  # fmt: skip


def test_merge_refuses_other_features(converted, edits, tmp_path):
    other = tmp_path / "other"
    import shutil

    shutil.copytree(edits["val"], other)
    info = json.loads((other / "meta/info.json").read_text())
    info["features"]["observation.state"]["shape"] = [99]
    (other / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"feature 'observation.state' has shape \[99\]"):
        make_edit_plan("m", {"type": "merge"}, [converted, other])
    info["fps"] = 15
    (other / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"merge: fps 15 differs"):
        make_edit_plan("m", {"type": "merge"}, [converted, other])
    info["fps"] = 30
    info["features"]["observation.state"]["shape"] = [6]
    info["features"]["observation.images.front"]["info"]["video.codec"] = "h264"
    (other / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"'observation.images.front' has video.codec h264"):
        make_edit_plan("m", {"type": "merge"}, [converted, other])


def test_flagged_episodes_reads_the_quality_findings(make_v21, tmp_path):
    """On quality.json as robopipe.quality writes it, of a v2.1 source with faults; a
    conversion plan with skip_episodes maps the source's indices to the output's."""
    import shutil

    from robopipe.conversion.plan import make_plan
    from robopipe.edits.plan import flagged_episodes
    from robopipe.formats.v21_reader import load_source
    from robopipe.harness import faults
    from robopipe.options import ConversionOptions
    from robopipe.quality import QualityOptions, check_batch, merge_batches

    root = Path(shutil.copytree(make_v21(episodes=6, min_length=30, max_length=40, fps=10,
                                         cameras=1), tmp_path / "src"))  # fmt: skip
    faults.inject_nan(root, 1)
    faults.inject_nan(root, 4, value=float("inf"))
    faults.inject_frozen_signal(root, 3)  # a warning
    options = QualityOptions(decode="sample")
    check_batch(str(root), list(range(6)), options, tmp_path / "part.json")
    merge_batches([tmp_path / "part.json"], tmp_path / "q", dataset="x", source=str(root),
                  options=options)  # fmt: skip
    path = tmp_path / "q/quality.json"
    assert flagged_episodes(path, ["nan_inf"]) == [1, 4]
    assert flagged_episodes(path, ["frozen_signal"]) == []
    assert flagged_episodes(path, ["frozen_signal", "nan_inf"], ("warning",)) == [3]
    with pytest.raises(ValueError, match="no check 'nan_info'"):
        flagged_episodes(path, ["nan_info"])
    make_plan(load_source(root, "x"), ConversionOptions(skip_episodes=[0, 4])).save(
        tmp_path / "plan.json"
    )
    # source 1 and 3 are the output's 0 and 2; source 4 is not in the output
    plan = tmp_path / "plan.json"
    assert flagged_episodes(path, ["nan_inf"], conversion_plan=plan) == [0]
    both = ["nan_inf", "frozen_signal"]
    assert flagged_episodes(path, both, ("error", "warning"), conversion_plan=plan) == [0, 2]


def _one_gop(path):
    """Rewrite the mp4 at ``path`` in place with one keyframe flag, on its first packet (the
    same packets otherwise): to a stream copy, every episode after the file's first then
    starts inside that GOP, as in a file encoded in one pass across episodes."""
    import av

    tmp = path.with_name("one_gop.mp4")
    with av.open(str(path)) as source, av.open(str(tmp), "w", format="mp4") as out:
        video = source.streams.video[0]
        stream = out.add_stream_from_template(video, opaque=True)
        stream.time_base = video.time_base
        for n, packet in enumerate(p for p in source.demux(video) if p.size):
            packet.is_keyframe = n == 0
            packet.stream = stream
            out.mux_one(packet)
    assert read_track(tmp).keyframes.sum() == 1
    tmp.replace(path)


def test_a_cut_inside_a_gop_re_encodes_that_file_with_the_same_timestamps(converted, tmp_path):
    source = shutil.copytree(converted, tmp_path / "long_gop")
    meta = read_meta(str(source))
    key = meta.video_keys[0]
    _one_gop(source / meta.video_file(key, 0))
    e = meta.episodes
    in_file = np.flatnonzero(
        (e[f"videos/{key}/chunk_index"] == 0) & (e[f"videos/{key}/file_index"] == 0)
    )
    before = _tree(source)
    operation = {"type": "delete_episodes", "episode_indices": [int(in_file[0])]}
    plan = make_edit_plan("x", operation, [source])
    f = plan.video_files[key][0]
    report = write_video_file(plan, key, f.chunk, f.file, tmp_path / "v.mp4", tmp_path / "r.json")
    # the first kept episode starts inside the GOP that began in the deleted one
    assert report["reencoded"] == 1 and report["reencoded_for"] == [0]
    assert report["fidelity"]["frames_compared"] > 0 and report["fidelity"]["psnr_mean_db"] > 20
    # each episode at the pts a stream copy gives it, a keyframe first
    track = read_track(tmp_path / "v.mp4")
    starts = [round(e["from_timestamp"] * track.timescale) for e in report["episodes"]]
    assert track.keyframes[np.isin(track.pts, starts)].all()
    assert len(track.pts) == sum(meta.episodes["length"][in_file[1:]])
    # the whole edit: validated and published; the other camera's files stream-copied
    edit_dataset(operation, [source], tmp_path / "out")
    assert read_meta(str(tmp_path / "out")).num_episodes == meta.num_episodes - 1
    assert _tree(source) == before


def test_a_cut_inside_a_gop_of_another_codec_is_refused(converted, tmp_path, monkeypatch):
    source = shutil.copytree(converted, tmp_path / "long_gop")
    meta = read_meta(str(source))
    key = meta.video_keys[0]
    _one_gop(source / meta.video_file(key, 0))
    monkeypatch.setattr(reencode, "REENCODERS", {"h264": "libx264"})  # no AV1 encoder
    second = int(np.flatnonzero(meta.episodes[f"videos/{key}/file_index"] == 0)[1])
    with pytest.raises(DatasetError, match=r"needs the file re-encoded.*not av1"):
        edit_dataset({"type": "delete_episodes", "episode_indices": [0]}, [source],
                     tmp_path / "out")  # fmt: skip
    assert second >= 1 and not (tmp_path / "out").exists()


LEROBOT_PYTHON = Path(__file__).resolve().parents[2] / ".venv-lerobot/bin/python"
# lerobot 0.6.1 loads an edit's output and the source: the items at the first and last frame
# of every kept episode are equal (every tensor but the output's own indices)
LEROBOT_DRIVER = """
import json, sys
import torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset
args = json.loads(sys.argv[1])
src = LeRobotDataset("local/src", root=args["source"], video_backend="pyav")
out = LeRobotDataset("local/out", root=args["output"], video_backend="pyav")
differ = []
for new, old in enumerate(args["kept"]):
    a, b = out.meta.episodes[new], src.meta.episodes[old]
    for i, j in ((a["dataset_from_index"], b["dataset_from_index"]),
                 (a["dataset_to_index"] - 1, b["dataset_to_index"] - 1)):
        x, y = out[i], src[j]
        for key, value in x.items():
            if isinstance(value, torch.Tensor) and key not in ("index", "episode_index"):
                if not torch.equal(value, y[key]):
                    differ.append([new, key])
print(json.dumps({"episodes": out.meta.total_episodes, "differ": differ}))
"""


@pytest.mark.skipif(not LEROBOT_PYTHON.exists(), reason="lerobot 0.6.1 env missing")
def test_lerobot_loads_the_edit_with_the_sources_items(converted, edits, tmp_path):
    kept = [i for i in range(EPISODES) if i not in DELETED]
    args = {"source": str(converted), "output": str(edits["deleted"]), "kept": kept}
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(LEROBOT_PYTHON), "-c", LEROBOT_DRIVER, json.dumps(args)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"episodes": len(kept), "differ": []}


def test_remove_feature_drops_a_camera_and_a_column(converted, tmp_path):
    meta = read_meta(str(converted))
    camera, kept_camera = meta.video_keys
    out = tmp_path / "removed"
    operation = {"type": "remove_feature", "feature_names": [camera, "action"]}
    edit_dataset(operation, [converted], out)
    info = json.loads((out / "meta/info.json").read_text())
    assert camera not in info["features"] and "action" not in info["features"]
    assert not (out / "videos" / camera).exists()
    assert "action" not in _stats(out) and camera not in _stats(out)
    source = _rows(converted)
    assert _rows(out).equals(source.drop_columns(["action"]))
    columns = read_episodes_table(read_meta(str(out))).column_names
    assert not [c for c in columns if camera in c or c.startswith("stats/action/")]
    assert _episode_packets(out)[kept_camera] == _episode_packets(converted)[kept_camera]
    with pytest.raises(DatasetError, match=r"remove_feature: 'index' is a default feature"):
        make_edit_plan("r", {"type": "remove_feature", "feature_names": ["index"]}, [converted])
    with pytest.raises(DatasetError, match=r"remove_feature: no feature 'actoin'"):
        make_edit_plan("r", {"type": "remove_feature", "feature_names": ["actoin"]}, [converted])


def test_modify_tasks_follows_lerobots_precedence(converted, tmp_path):
    """episode_tasks, then task_replacements of an episode's task, then new_task (lerobot
    0.6.1 dataset_tools.modify_tasks); the tasks sorted; only task columns change."""
    before = _tree(converted)
    source_tasks = _episodes(converted).column("tasks").to_pylist()
    assert {t[0] for t in source_tasks} == {"pick", "place"}
    operation = {
        "type": "modify_tasks",
        "new_task": "tidy up",
        "episode_tasks": {"2": "wave", "7": "lift the cube"},
        "task_replacements": {"pick": "lift the cube"},
    }
    out = tmp_path / "retasked"
    edit_dataset(operation, [converted], out)
    assert _tree(converted) == before, "the source changed"
    expected = []
    for i, (task,) in enumerate(source_tasks):
        if i in (2, 7):
            expected.append("wave" if i == 2 else "lift the cube")
        else:
            expected.append("lift the cube" if task == "pick" else "tidy up")
    tasks = sorted(set(expected))
    assert _task_table(out) == tasks
    info = json.loads((out / "meta/info.json").read_text())
    assert info["total_tasks"] == len(tasks) and info["total_episodes"] == EPISODES
    episodes = _episodes(out)
    assert episodes.column("tasks").to_pylist() == [[t] for t in expected]
    assert episodes.drop_columns(["tasks"]).equals(_episodes(converted).drop_columns(["tasks"]))
    rows, source = _rows(out), _rows(converted)
    assert rows.drop_columns(["task_index"]).equals(source.drop_columns(["task_index"]))
    by_episode = [tasks.index(t) for t in expected]
    assert rows["task_index"].to_pylist() == [
        by_episode[e] for e in rows["episode_index"].to_pylist()
    ]
    assert _episode_packets(out) == _episode_packets(converted)  # videos linked
    stats = _stats(out)["task_index"]
    assert stats["min"] == [min(by_episode)] and stats["max"] == [max(by_episode)]
    assert stats["mean"][0] == pytest.approx(
        np.mean([by_episode[e] for e in rows["episode_index"].to_pylist()])
    )
    others = {k: v for k, v in _stats(out).items() if k != "task_index"}
    assert others == {k: v for k, v in _stats(converted).items() if k != "task_index"}


def _task_table(root) -> list[str]:
    """meta/tasks.parquet's tasks by task_index."""
    table = pq.read_table(root / "meta/tasks.parquet")
    column = "task" if "task" in table.column_names else "__index_level_0__"
    order = np.argsort(table.column("task_index").to_numpy())
    return [table.column(column).to_pylist()[i] for i in order]


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({}, "modify_tasks: give new_task, episode_tasks or task_replacements"),
        ({"episode_tasks": {"12": "x"}}, "modify_tasks: episode_tasks: no episode 12"),
        ({"task_replacements": {"pik": "x"}}, "task_replacements: no task 'pik' in the input"),
    ],
)
def test_modify_tasks_refuses_bad_input(converted, operation, message):
    with pytest.raises(DatasetError, match=message):
        make_edit_plan("t", {"type": "modify_tasks", **operation}, [converted])


def test_an_edit_keeps_nan_and_inf_bit_for_bit(make_v21, tmp_path):
    """Rows holding NaN and inf are rewritten and proven as they are (Arrow's equals takes a
    NaN for unequal to itself, so the proof refused such rows)."""
    source = Path(shutil.copytree(make_v21(episodes=6, cameras=1), tmp_path / "src"))
    faults.inject_nan(source, 2)
    faults.inject_nan(source, 4, value=float("-inf"), dimension=1)
    converted = tmp_path / "v3.0"
    convert_dataset(source, converted, name="nan", **LAYOUT)
    out = tmp_path / "deleted"
    edit_dataset({"type": "delete_episodes", "episode_indices": [0]}, [converted], out)
    kept, original = _rows(out), _rows(converted)
    state = "observation.state"
    assert same_bits(kept[state], original.filter(pc.field("episode_index") != 0)[state])
    values = np.asarray(kept[state].to_pylist(), np.float32)
    assert np.isnan(values).sum() == 1 and np.isneginf(values).sum() == 1
