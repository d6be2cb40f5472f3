"""The source check as Snakemake runs it: every problem in one run, one robopipe line each and
no traceback; a changed source file reruns exactly the jobs that read it; unknown config keys
stop the run with the nearest valid key."""

import json
import re
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

PARQUET = "data/chunk-000/episode_000002.parquet"


def _config(source, **conversion):
    return {"datasets": {"ds": {"path": str(source), "conversion": conversion}}}


def _jobs(stdout: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", stdout, re.M) if k != "total"}


def test_a_changed_source_file_reruns_only_its_jobs(make_v21, tmp_path, run_snakemake):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    config = _config(root, episodes_per_shard=2)
    run_snakemake(tmp_path / "run", config, "--cores", "2", "convert")
    published = tmp_path / "run/results/ds/v3.0/data/chunk-000/file-000.parquet"
    before = pq.read_table(published)

    table = pq.read_table(root / PARQUET)  # episode 2's actions doubled
    action = table.column("action").combine_chunks()
    doubled = pa.FixedSizeListArray.from_arrays(
        pc.multiply(action.flatten(), pa.scalar(2, action.type.value_type)), action.type.list_size
    )
    table = table.set_column(table.schema.get_field_index("action"), "action", doubled)
    pq.write_table(table, root / PARQUET)

    result = run_snakemake(tmp_path / "run", config, "--cores", "2", "convert")
    assert _jobs(result.stdout + result.stderr) == {
        "source_check": 1,
        "shard": 1,
        "aggregate_data": 1,
        "validate": 1,
        "publish": 1,
        "convert": 1,
    }
    after = pq.read_table(published)
    episode = pc.equal(after.column("episode_index"), 2)
    assert after.filter(episode).column("action").to_pylist() == doubled.to_pylist()
    others = pc.invert(episode)
    assert after.filter(others).equals(before.filter(others))
    check = json.loads((tmp_path / "run/results/ds/check.json").read_text())
    assert {"kind": "source_changed", "file": PARQUET} in [
        {"kind": n["kind"], "file": n["file"]} for n in check["notes"]
    ]

    # an episode's mp4 rewritten (same bytes, new mtime): only its camera's video file is redone
    mp4 = next(root.glob("videos/chunk-000/*/episode_000004.mp4"))
    mp4.write_bytes(mp4.read_bytes())
    result = run_snakemake(tmp_path / "run", config, "--cores", "2", "-n", "convert")
    assert _jobs(result.stdout + result.stderr) == {
        "source_check": 1,
        "aggregate_video": 1,
        "meta": 1,
        "validate": 1,
        "publish": 1,
        "convert": 1,
    }


def test_check_reports_every_problem_and_publishes_nothing(make_v21, tmp_path, run_snakemake):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    (root / "videos/chunk-000/observation.images.front/episode_000001.mp4").write_bytes(b"junk")
    (root / "videos/chunk-000/observation.images.wrist/episode_000004.mp4").write_bytes(b"")
    (root / ".DS_Store").write_bytes(b"\0")
    result = run_snakemake(tmp_path, _config(root), "--cores", "2", "check", check=False)
    assert result.returncode != 0
    for line in (
        "robopipe: dataset 'ds': episode 1: file videos/chunk-000/observation.images.front/"
        "episode_000001.mp4: cannot read video",
        "robopipe: dataset 'ds': episode 4: file videos/chunk-000/observation.images.wrist/"
        "episode_000004.mp4: video file is empty",
    ):
        assert line in result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads((tmp_path / "results/logs/ds/check.json").read_text())
    assert report["counts"] == {"unreadable_file": 1, "empty_file": 1}
    assert [n["file"] for n in report["notes"]] == [".DS_Store"]

    # convert: the plan needs only file sizes, so the run starts; the check job fails and
    # nothing is published
    result = run_snakemake(tmp_path, _config(root), "--cores", "2", "convert", check=False)
    assert result.returncode != 0
    assert "robopipe: dataset 'ds': episode 1: file videos/" in result.stderr
    assert not (tmp_path / "results/ds/v3.0").exists()


def test_planning_errors_are_robopipe_lines_without_tracebacks(make_v21, tmp_path, run_snakemake):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    (root / PARQUET).unlink()
    lines = (root / "meta/episodes.jsonl").read_text().splitlines()
    (root / "meta/episodes.jsonl").write_text("\n".join([*lines, lines[3]]) + "\n")
    result = run_snakemake(tmp_path, _config(root), "--cores", "2", "convert", "-n", check=False)
    assert result.returncode == 1
    assert f"robopipe: dataset 'ds': episode 2: file {PARQUET}: data file is missing" in (
        result.stderr
    )
    assert (
        "robopipe: dataset 'ds': episode 3: file meta/episodes.jsonl: episode 3 is listed 2 times"
        in result.stderr
    )
    for noise in ("Traceback", "InputFunctionException", "Exception"):
        assert noise not in result.stdout + result.stderr


def test_a_refusal_while_the_dag_is_built_names_every_problem_in_its_report(
    make_v21, tmp_path, run_snakemake
):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=10), root)
    missing = sorted(
        f"videos/chunk-000/observation.images.{camera}/episode_{episode:06d}.mp4"
        for camera, episode in (
            ("front", 0),
            ("front", 3),
            ("wrist", 6),
            ("front", 9),
            ("wrist", 2),
            ("front", 5),
            ("wrist", 8),
        )  # fmt: skip
    )
    for rel in missing:
        (root / rel).unlink()
    result = run_snakemake(tmp_path, _config(root), "--cores", "2", "convert", "-n", check=False)
    assert result.returncode == 1
    assert "7 problem(s) in the source" in result.stderr
    assert "(all of them in results/logs/ds/check.json)" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    report = json.loads((tmp_path / "results/logs/ds/check.json").read_text())
    assert report["counts"] == {"missing_file": 7}
    assert sorted(p["file"] for p in report["problems"]) == missing
    assert not (tmp_path / "results/ds/check.json").exists()


def test_unknown_config_keys_name_the_nearest_valid_key(make_v21, tmp_path, run_snakemake):
    source = make_v21(episodes=6)
    config = {"datasetz": {"ds": {"path": str(source)}}}
    result = run_snakemake(tmp_path, config, "-n", check=False)
    assert result.returncode == 1
    assert "robopipe: config: top level: unknown key 'datasetz'; did you mean 'datasets'?" in (
        result.stderr
    )
    config = {"datasets": {"ds": {"path": str(source), "conversoin": {}}}}
    result = run_snakemake(tmp_path, config, "-n", check=False)
    assert (
        "robopipe: config: datasets.ds: unknown key 'conversoin'; did you mean 'conversion'?"
        in (result.stderr)
    )
    config = _config(source, restamp_timestamp=True)
    result = run_snakemake(tmp_path, config, "-n", check=False)
    assert (
        "robopipe: config: datasets.ds.conversion: unknown key 'restamp_timestamp'; "
        "did you mean 'restamp_timestamps'?" in result.stderr
    )
    assert not (tmp_path / "results").exists()


def test_a_check_in_parts_gives_the_one_report(make_v21, tmp_path, run_snakemake):
    root = tmp_path / "src"
    shutil.copytree(make_v21(episodes=6), root)
    (root / "videos/chunk-000/observation.images.front/episode_000001.mp4").write_bytes(b"junk")
    (root / ".DS_Store").write_bytes(b"\0")
    one = run_snakemake(tmp_path / "one", _config(root), "--cores", "2", "check", check=False)
    config = _config(root, check_episodes_per_job=2)  # 3 part jobs, then the merge
    parts = run_snakemake(tmp_path / "parts", config, "--cores", "2", "check", check=False)
    jobs = {"source_check_part": 3, "source_check": 1, "check": 1}
    assert _jobs(parts.stdout + parts.stderr) == jobs
    assert one.returncode != 0 and parts.returncode != 0
    line = (
        "robopipe: dataset 'ds': episode 1: file videos/chunk-000/observation.images.front/"
        "episode_000001.mp4: cannot read video"
    )
    assert line in one.stderr and line in parts.stderr
    assert "Traceback" not in parts.stderr
    for name in ("logs/ds/check.json", "ds/check_files.json"):
        assert (tmp_path / "parts/results" / name).read_bytes() == (
            tmp_path / "one/results" / name
        ).read_bytes()

    # a rewritten mp4 reruns its part and the merge; an added file only the merge
    junk = "videos/chunk-000/observation.images.front/episode_000001.mp4"
    shutil.copyfile(make_v21(episodes=6) / junk, root / junk)  # repaired
    run_snakemake(tmp_path / "parts", config, "--cores", "2", "check")
    mp4 = root / "videos/chunk-000/observation.images.wrist/episode_000005.mp4"
    mp4.write_bytes(mp4.read_bytes())
    result = run_snakemake(tmp_path / "parts", config, "--cores", "2", "-n", "check")
    assert _jobs(result.stdout) == {"source_check_part": 1, "source_check": 1, "check": 1}
    (root / "notes.txt").write_text("x")
    result = run_snakemake(tmp_path / "parts", config, "--cores", "2", "check")
    assert _jobs(result.stdout + result.stderr) == {
        "source_check_part": 1,
        "source_check": 1,
        "check": 1,
    }
    notes = json.loads((tmp_path / "parts/results/ds/check.json").read_text())["notes"]
    assert {(n["kind"], n["file"]) for n in notes} >= {
        ("source_changed", str(mp4.relative_to(root))),
        ("stray_file", "notes.txt"),
    }
