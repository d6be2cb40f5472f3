"""The v3.0 check: the real cr5 v3.0 dataset (written by lerobot 0.6.1's converter) checks
clean, and each fault, put into a copy of it, is reported with its kind, episode and file,
without blaming the episodes it does not touch and without changing the copy."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robopipe.checks.v30 import check_v30

CR5 = "cr5_20ep_v30_lerobot"
EP = 5  # the damaged episode
LAST = 19
N = 20
CAM = "observation.images.top"
DATA = "data/chunk-000/file-000.parquet"
VIDEO = f"videos/{CAM}/chunk-000/file-000.mp4"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
ALL = set(range(N))


@pytest.fixture(scope="module")
def pristine(shared_datasets, tmp_path_factory) -> Path:
    """A writable copy of cr5 v3.0, made once; each test links its big files from here."""
    source = shared_datasets / CR5
    if not source.is_dir():
        pytest.skip(f"{source} is missing")
    root = tmp_path_factory.mktemp("pristine") / CR5
    shutil.copytree(source, root, copy_function=shutil.copyfile)
    stamp = {p: os.stat(p).st_mtime_ns for p in root.rglob("*") if p.is_file()}
    yield root
    # no test changed a linked file in place
    assert stamp == {p: os.stat(p).st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def cr5(pristine, tmp_path) -> Path:
    """A copy of cr5 v3.0: meta/ copied, data and video files hard-linked (replace them with
    :func:`_own` before changing them)."""
    root = tmp_path / CR5
    root.mkdir()
    for path in sorted(pristine.rglob("*")):
        target = root / path.relative_to(pristine)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.parts[len(pristine.parts)] == "meta":
            shutil.copyfile(path, target)
        else:
            os.link(path, target)
    return root


def _own(root: Path, rel: str) -> Path:
    """``root / rel`` as a file of its own (no longer a link to the pristine copy)."""
    path = root / rel
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)
    return path


def _edit_json(root: Path, rel: str, change) -> None:
    value = json.loads((root / rel).read_text())
    change(value)
    (root / rel).write_text(json.dumps(value, indent=4))


def _edit_parquet(root: Path, rel: str, change) -> None:
    path = _own(root, rel)
    pq.write_table(change(pq.read_table(path)), path)


def _set_cells(column: str, value, where):
    """A table change: ``column`` set to ``value`` on the rows where ``where(table)`` holds."""

    def change(table: pa.Table) -> pa.Table:
        old = table.column(column)
        new = pc.if_else(where(table), pa.scalar(value, old.type), old)
        return table.set_column(table.schema.get_field_index(column), column, new)

    return change


def _episode_row(ep: int):
    return lambda t: pc.equal(t.column("episode_index"), ep)


def _truncate(root: Path, rel: str, fraction: float) -> None:
    path = _own(root, rel)
    with open(path, "r+b") as f:
        f.truncate(int(path.stat().st_size * fraction))


@pytest.fixture
def check(file_tree):
    """``check(root)``: the check of ``root``, asserting that it changed no file."""

    def run(root: Path, **kwargs):
        before = file_tree(root)
        report = check_v30(root, "cr5", **kwargs)
        assert file_tree(root) == before
        return report

    return run


def _blamed(report, kind: str) -> dict[int | None, set[str]]:
    found: dict[int | None, set[str]] = {}
    for p in report.problems:
        if p.kind == kind:
            found.setdefault(p.episode, set()).add(p.file)
    return found


def _assert_fault(report, kind: str, episodes: set, file: str, *, only: set | None = None):
    """``kind`` is reported for exactly ``episodes`` (None: the file itself), naming ``file``;
    no problem at all blames an episode outside ``only`` (default: ``episodes``)."""
    assert not report.ok
    blamed = _blamed(report, kind)
    assert set(blamed) == episodes, report.summary()
    assert all(files == {file} for files in blamed.values()), blamed
    others = {p.episode for p in report.problems} - {None}
    assert others <= (episodes if only is None else only) - {None}, report.summary()
    for p in report.problems:
        assert p.line("cr5").startswith("robopipe: dataset 'cr5': ")


# -- clean -------------------------------------------------------------------------------------


def test_cr5_v30_checks_clean(shared_datasets):
    report = check_v30(shared_datasets / CR5, "cr5", threads=2)
    assert report.ok, report.summary()
    assert report.episodes == N
    assert {DATA, VIDEO, EPISODES, "meta/info.json", "meta/stats.json"} <= set(report.files)
    assert "checked, OK" in report.summary()
    assert report.to_json()["ok"] is True


def test_threads_give_the_same_report(cr5):
    _edit_json(cr5, "meta/info.json", lambda i: i.update(total_frames=1))
    one, four = check_v30(cr5, "cr5"), check_v30(cr5, "cr5", threads=4)
    assert sorted(map(repr, one.problems)) == sorted(map(repr, four.problems))


# -- the fault suite: one kind of fault each ---------------------------------------------------


def test_missing_video_file(cr5, check):
    (cr5 / VIDEO).unlink()
    _assert_fault(check(cr5), "missing_file", ALL, VIDEO)


def test_truncated_mp4(cr5, check):
    _truncate(cr5, VIDEO, 0.9)
    report = check(cr5)
    blamed = set(_blamed(report, "truncated_file"))
    assert LAST in blamed and 0 not in blamed
    assert blamed == set(range(min(blamed), N))  # the episodes at the end of the file
    _assert_fault(report, "truncated_file", blamed, VIDEO)


def test_empty_data_parquet(cr5, check):
    _own(cr5, DATA).write_bytes(b"")
    _assert_fault(check(cr5), "empty_file", ALL, DATA)


def test_truncated_data_parquet(cr5, check):
    _truncate(cr5, DATA, 0.5)  # its footer gone
    report = check(cr5)
    _assert_fault(report, "unreadable_file", ALL, DATA)
    assert all("unreadable parquet" in p.message for p in report.problems)


def test_truncated_episodes_metadata(cr5, check):
    _truncate(cr5, EPISODES, 0.5)
    report = check(cr5)
    _assert_fault(report, "unreadable_file", {None}, EPISODES)


def test_missing_tasks_parquet(cr5, check):
    (cr5 / "meta/tasks.parquet").unlink()
    _assert_fault(check(cr5), "missing_file", {None}, "meta/tasks.parquet")


def test_task_index_without_a_task(cr5, check):
    _edit_parquet(cr5, DATA, _set_cells("task_index", 3, _episode_row(EP)))
    report = check(cr5)
    _assert_fault(report, "task_index", {EP}, DATA)
    assert "task_index [3] has no task" in report.problems[0].message


def test_episode_row_points_at_a_missing_data_file(cr5, check):
    _edit_parquet(cr5, EPISODES, _set_cells("data/file_index", 1, _episode_row(EP)))
    report = check(cr5)
    _assert_fault(report, "missing_file", {EP}, "data/chunk-000/file-001.parquet")
    # and its rows, still in file-000, are named as out of place
    assert _blamed(report, "episode_index") == {EP: {DATA}}


def test_dataset_to_index_beyond_the_file(cr5, check):
    def change(table):
        last = _episode_row(LAST)
        table = _set_cells("dataset_to_index", 4499 + 10, last)(table)
        return _set_cells("length", 212 + 10, last)(table)

    _edit_parquet(cr5, EPISODES, change)
    report = check(cr5)
    _assert_fault(report, "episode_range", {LAST}, DATA)
    assert "rows 0..4499" in next(p for p in report.problems if p.kind == "episode_range").message


def test_to_timestamp_beyond_the_video(cr5, check):
    _edit_parquet(
        cr5, EPISODES, _set_cells(f"videos/{CAM}/to_timestamp", 460.0, _episode_row(LAST))
    )
    report = check(cr5)
    _assert_fault(report, "video_timestamps", {LAST}, VIDEO)
    assert "449.9" in report.problems[0].message or any(
        "449.9" in p.message for p in report.problems
    )


def test_episode_timestamps_inconsistent_with_length(cr5, check):
    _edit_parquet(cr5, EPISODES, _set_cells("length", 150, _episode_row(EP)))
    report = check(cr5)
    _assert_fault(report, "frame_count", {EP}, VIDEO)


def test_wrong_width_in_info(cr5, check):
    _edit_json(
        cr5, "meta/info.json", lambda i: i["features"][CAM]["info"].update({"video.width": 320})
    )
    report = check(cr5)
    _assert_fault(report, "video_size", ALL, VIDEO)
    assert "width is 640 but info.json says 320" in report.problems[0].message


def test_wrong_codec_in_info(cr5, check):
    _edit_json(
        cr5, "meta/info.json", lambda i: i["features"][CAM]["info"].update({"video.codec": "h264"})
    )
    _assert_fault(check(cr5), "video_codec", ALL, VIDEO)


def test_total_frames_mismatch(cr5, check):
    _edit_json(cr5, "meta/info.json", lambda i: i.update(total_frames=4500))
    report = check(cr5)
    _assert_fault(report, "totals", {None}, "meta/info.json")
    assert {p.kind for p in report.problems} == {"totals"}


def test_duplicate_episode_index(cr5, check):
    _edit_parquet(cr5, EPISODES, _set_cells("episode_index", EP, _episode_row(EP + 1)))
    report = check(cr5)
    by_episode = _blamed(report, "episode_index")
    assert by_episode[EP] == {EPISODES}  # the duplicate row
    # the episode whose row was overwritten is missing, and its data rows are unowned
    assert by_episode[EP + 1] == {EPISODES, DATA}
    assert {p.episode for p in report.problems} - {None} == {EP, EP + 1}
    assert any("has 2 rows" in p.message for p in report.problems)


def test_path_template_escaping_the_root(cr5, check):
    _edit_json(
        cr5,
        "meta/info.json",
        lambda i: i.update(data_path="../elsewhere/chunk-{chunk_index:03d}/file-{file_index:03d}"),
    )
    report = check(cr5)
    _assert_fault(report, "template", {None}, "meta/info.json")
    assert "outside the dataset folder" in report.problems[0].message


def test_unknown_template_placeholder(cr5, check):
    _edit_json(
        cr5,
        "meta/info.json",
        lambda i: i.update(
            video_path="videos/{camera}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
        ),
    )
    report = check(cr5)
    _assert_fault(report, "template", {None}, "meta/info.json")
    assert "unknown: camera" in report.problems[0].message


def test_symlink_resolving_outside_the_root(cr5, pristine, check):
    (cr5 / VIDEO).unlink()
    (cr5 / VIDEO).symlink_to(pristine / VIDEO)
    _assert_fault(check(cr5), "outside_root", ALL, VIDEO)


def test_stats_shape_mismatch(cr5, check):
    _edit_json(cr5, "meta/stats.json", lambda s: s["observation.state"].update(mean=[0.0] * 5))
    report = check(cr5)
    _assert_fault(report, "stats", {None}, "meta/stats.json")
    assert "observation.state/mean has shape (5,)" in report.problems[0].message


def test_not_v30(cr5, check):
    _edit_json(cr5, "meta/info.json", lambda i: i.update(codebase_version="v2.1"))
    _assert_fault(check(cr5), "version", {None}, "meta/info.json")


def test_stray_data_file(cr5, check):
    os.link(cr5 / DATA, cr5 / "data/chunk-000/file-001.parquet")
    report = check(cr5)
    _assert_fault(report, "stray_data_file", {None}, "data/chunk-000/file-001.parquet", only=set())


def test_episode_rows_out_of_order(cr5, check):
    _edit_parquet(cr5, EPISODES, lambda t: t.take([1, 0, *range(2, N)]))
    report = check(cr5)
    _assert_fault(report, "episode_order", {0, 1}, EPISODES)


def test_timestamps_off_frame_index(cr5, check):
    _edit_parquet(
        cr5,
        DATA,
        _set_cells(
            "timestamp",
            99.0,
            lambda t: pc.and_(
                pc.equal(t.column("episode_index"), EP), pc.equal(t.column("frame_index"), 3)
            ),
        ),
    )
    _assert_fault(check(cr5), "timestamps", {EP}, DATA)


def test_problems_of_skipped_episodes_are_notes(cr5):
    _edit_parquet(cr5, DATA, _set_cells("task_index", 3, _episode_row(EP)))
    report = check_v30(cr5, "cr5", skip_episodes=[EP])
    assert report.ok
    assert {(p.kind, p.episode) for p in report.notes} >= {("task_index", EP)}


def test_five_faults_in_one_pass(cr5, check):
    (cr5 / "meta/tasks.parquet").unlink()
    _edit_json(cr5, "meta/info.json", lambda i: i.update(total_frames=1))
    _edit_json(cr5, "meta/stats.json", lambda s: s.pop("action"))
    _edit_parquet(
        cr5, EPISODES, _set_cells(f"videos/{CAM}/to_timestamp", 460.0, _episode_row(LAST))
    )
    _own(cr5, DATA).write_bytes(b"")
    kinds = {p.kind for p in check(cr5).problems}
    assert {"missing_file", "totals", "stats", "video_timestamps", "empty_file"} <= kinds


# -- without ../shared: a demo converted by robopipe ---------------------------------------------


@pytest.fixture
def converted_demo(make_v21, tmp_path) -> Path:
    from robopipe.conversion.serial import convert_dataset

    source = make_v21(episodes=6, cameras=2, min_length=10, max_length=20)
    out = tmp_path / "demo_v30"
    # small files: several data files and video files per camera
    convert_dataset(
        source, out, name="demo", data_file_size_in_mb=0.001, video_file_size_in_mb=0.001
    )
    return out


def test_converted_demo_checks_clean_then_a_missing_video_is_found(converted_demo):
    report = check_v30(converted_demo, "demo", threads=2)
    assert report.ok, report.summary()
    assert report.episodes == 6
    videos = sorted(converted_demo.glob("videos/*/*/*.mp4"))
    data = sorted(converted_demo.glob("data/*/*.parquet"))
    assert len(videos) > 2 and len(data) > 1  # several files, so blame can be partial
    victim = videos[1]
    rel = victim.relative_to(converted_demo).as_posix()
    episodes = pq.read_table(
        converted_demo / EPISODES,
        columns=["episode_index", *(f"videos/{c}/file_index" for c in _cameras(converted_demo))],
    ).to_pylist()
    camera, file_index = victim.parent.parent.name, int(victim.stem.split("-")[1])
    expected = {
        e["episode_index"] for e in episodes if e[f"videos/{camera}/file_index"] == file_index
    }
    victim.unlink()
    report = check_v30(converted_demo, "demo")
    blamed = _blamed(report, "missing_file")
    assert set(blamed) == expected and 0 < len(expected) < 6
    assert all(files == {rel} for files in blamed.values())
    assert {p.episode for p in report.problems} == expected


def _cameras(root: Path) -> list[str]:
    info = json.loads((root / "meta/info.json").read_text())
    return [k for k, f in info["features"].items() if f["dtype"] == "video"]


# -- a remote dataset: the same check over fsspec ------------------------------------------


@pytest.fixture
def served(monkeypatch):
    """``served(folder) -> (url, storage_options, hub)``: ``folder`` as the Hub stand-in's
    repo ``local/demo`` at revision ``v3.0``, read through huggingface_hub's HfFileSystem."""
    from huggingface_hub import constants

    from robopipe.harness.hub_standin import serve_hub

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    with contextlib.ExitStack() as stack:

        def serve(folder: Path):
            hub = stack.enter_context(serve_hub({"local/demo": {"v3.0": folder}}))
            return hub.url("local/demo", "v3.0"), {"endpoint": hub.endpoint}, hub

        yield serve


def test_a_remote_dataset_is_checked_by_range_reads(converted_demo, served):
    url, options, hub = served(converted_demo)
    report = check_v30(url, "demo", storage_options=options, threads=2)
    assert report.ok, report.summary()
    assert report.episodes == 6
    local = check_v30(converted_demo, "demo")
    assert {rel: f[0] for rel, f in report.files.items()} == {
        rel: f[0] for rel, f in local.files.items()
    }
    media = [
        r for r in hub.requests if r.path.endswith((".mp4", "data/chunk-000/file-000.parquet"))
    ]
    assert media and all(r.status == 206 for r in media if r.method == "GET")  # never whole


def test_a_fault_in_a_remote_dataset_is_found_as_locally(converted_demo, served, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(converted_demo, broken)
    victim = sorted(broken.glob("videos/*/*/*.mp4"))[1]
    with open(victim, "r+b") as f:
        f.truncate(victim.stat().st_size // 2)
    url, options, _hub = served(broken)
    remote = check_v30(url, "demo", storage_options=options)
    local = check_v30(broken, "demo")
    assert not remote.ok
    assert sorted(map(repr, remote.problems)) == sorted(map(repr, local.problems))
    rel = victim.relative_to(broken).as_posix()
    assert {p.file for p in remote.problems} == {rel}


def test_a_missing_remote_revision_is_one_problem(converted_demo, served):
    url, options, _hub = served(converted_demo)
    report = check_v30(url.replace("@v3.0", "@v9.9"), "demo", storage_options=options)
    assert [p.kind for p in report.problems] == ["source"]


def test_a_dataset_in_an_s3_bucket_is_checked_as_locally(converted_demo, s3_server):
    s3_server.fs.put(str(converted_demo), f"{s3_server.bucket}/demo", recursive=True)
    url = s3_server.url("demo")
    report = check_v30(url, "demo", storage_options=s3_server.storage_options)
    assert report.ok, report.summary()
    assert report.episodes == 6
    local = check_v30(converted_demo, "demo")
    assert set(report.files) == set(local.files)
    s3_server.fs.rm(f"{s3_server.bucket}/demo/{EPISODES}")
    s3_server.fs.invalidate_cache()
    broken = check_v30(url, "demo", storage_options=s3_server.storage_options)
    assert {p.kind for p in broken.problems} >= {"missing_file"}
    assert {p.file for p in broken.problems if p.kind == "missing_file"} == {EPISODES}
