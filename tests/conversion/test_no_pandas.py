"""The conversion jobs need no pandas: every step but meta (which writes tasks.parquet through
pandas, as lerobot does) runs in a process where ``import pandas`` fails
(:func:`robopipe.jobs.hide_pandas`, as the jobs run) and writes the same files as the
in-process conversion."""

from __future__ import annotations

import json
import subprocess
import sys

from robopipe.conversion.meta import write_meta
from robopipe.conversion.plan import load_plan
from robopipe.conversion.serial import convert_dataset
from robopipe.formats.v21_reader import load_source
from robopipe.layout import VIDEO_EPISODES, chunk_file

STEPS = """
import json, sys
from pathlib import Path
from robopipe.jobs import hide_pandas
hide_pandas()
from robopipe.conversion.aggregate import aggregate_data, aggregate_video
from robopipe.checks.v21 import check_source
from robopipe.options import ConversionOptions
from robopipe.conversion.plan import load_plan, make_plan
from robopipe.conversion.shard import build_shard
from robopipe.conversion.validate import validate, validate_data_file, validate_video_file
from robopipe.formats.v21_reader import load_source
from robopipe.layout import VIDEO_EPISODES, chunk_file, data_path, video_path

step, source_dir, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
source = load_source(source_dir, "demo")
staging = work / "staging"
if step == "files":
    assert check_source(source_dir, "demo", ConversionOptions()).ok
    plan = make_plan(source, ConversionOptions())
    plan.save(work / "plan.json")
    for shard in plan.shards:
        build_shard(source, plan, shard.id, work / "shards" / shard.id)
    reports = []
    for f in plan.data_files:
        shards = [work / "shards" / s for s in f.shards]
        aggregate_data(shards, staging / data_path(f.chunk, f.file))
        reports.append(validate_data_file(source, plan, staging, f.chunk, f.file))
    for key, files in plan.video_files.items():
        for f in files:
            landed = work / VIDEO_EPISODES.format(video_key=key, **chunk_file(f.chunk, f.file))
            aggregate_video(
                source, plan, key, f.chunk, f.file, staging / video_path(key, f.chunk, f.file),
                landed,
            )
            reports.append(validate_video_file(source, plan, staging, key, f.chunk, f.file, landed))
    (work / "reports.json").write_text(json.dumps(reports))
else:
    reports = json.loads((work / "reports.json").read_text())
    summary = validate(source, load_plan(work / "plan.json"), staging, reports)
    (work / "validation.json").write_text(json.dumps(summary))
assert "pandas" not in sys.modules, "a conversion step imported pandas"
"""


def _run(step: str, source_dir, work) -> None:
    subprocess.run([sys.executable, "-c", STEPS, step, str(source_dir), str(work)], check=True)


def test_conversion_steps_run_and_write_the_same_files_without_pandas(make_v21, tmp_path):
    source_dir = make_v21(episodes=4, min_length=10, max_length=14)
    expected = tmp_path / "serial"
    convert_dataset(source_dir, expected, name="demo")
    work = tmp_path / "work"
    _run("files", source_dir, work)
    plan = load_plan(work / "plan.json")
    landed = [
        work / VIDEO_EPISODES.format(video_key=key, **chunk_file(f.chunk, f.file))
        for key, files in plan.video_files.items()
        for f in files
    ]
    write_meta(load_source(source_dir, "demo"), plan, landed, work / "staging" / "meta")
    _run("validate", source_dir, work)
    assert json.loads((work / "validation.json").read_text())["episodes"] == 4
    written = sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
    assert written == sorted(
        p.relative_to(work / "staging") for p in (work / "staging").rglob("*") if p.is_file()
    )
    for rel in written:
        assert (work / "staging" / rel).read_bytes() == (expected / rel).read_bytes(), rel
