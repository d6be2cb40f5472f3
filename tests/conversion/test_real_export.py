"""A real non-standard v2.1 export (issue 22, item 9): its info.json lists only its own
features (no ``timestamp``, ``frame_index``, ``episode_index``, ``index``, ``task_index``),
on top of what the repairs fix (other placeholder names, no episodes_stats.jsonl, no
``index``/``task_index`` columns, float64 vectors) and wall-clock timestamps. Converted with
all the repairs and ``restamp_timestamps``, it used to pass the check and every job, then
``validate`` stopped with a bare ``KeyError: 'timestamp'``. Now the output declares lerobot's
default features, has their stats, and loads in lerobot 0.6.1 (where its environment
exists); a data column that no feature declares stops the run at the check with one line per
episode (and ``validate`` enforces the same rule on the output)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.checks.report import SourceCheckError
from robopipe.checks.v21 import check_source
from robopipe.conversion.serial import convert_dataset
from robopipe.conversion.validate import DataFiles, _check_declared_columns
from robopipe.errors import DatasetError
from robopipe.formats.v21_reader import load_source
from robopipe.formats.v21_repairs import REPAIRS
from robopipe.formats.v30_reader import read_meta
from robopipe.layout import DEFAULT_FEATURE_SPECS, DEFAULT_FEATURES
from robopipe.options import ConversionOptions

DEFAULTS = list(DEFAULT_FEATURES)
# every repair on but undeclared_columns, which would repair the undeclared column below
ALL_REPAIRS = {
    "restamp_timestamps": True,
    **{name: True for name in REPAIRS if name != "undeclared_columns"},
}
REAL_EXPORT = {"wall_clock": True, "own_features_only": True}


@pytest.fixture
def export(demo_small, tmp_path, non_standard_export):
    root = shutil.copytree(demo_small, tmp_path / "src")
    non_standard_export(root, **REAL_EXPORT)
    return root


def test_the_real_export_passes_the_check_with_the_repairs(export):
    report = check_source(export, "export", ConversionOptions(**ALL_REPAIRS))
    assert report.ok, report.summary()


def test_the_real_export_converts_to_what_lerobot_loads(
    export, demo_small, tmp_path, lerobot_loads
):
    out = tmp_path / "v3.0"
    plan = convert_dataset(export, out, name="export", **ALL_REPAIRS)  # validated

    info = json.loads((out / "meta/info.json").read_text())
    features = info["features"]
    assert list(features)[-len(DEFAULTS) :] == DEFAULTS  # appended, in lerobot's order
    for name, spec in DEFAULT_FEATURE_SPECS.items():
        assert features[name] == {**spec, "fps": plan.fps}
    data = pq.read_table(sorted(out.glob("data/*/*.parquet"))[0])
    declared = [k for k, f in features.items() if f["dtype"] != "video"]
    assert sorted(data.schema.names) == sorted(declared)
    assert data.schema.field("timestamp").type == pa.float32()
    assert data.column("index").to_pylist() == list(range(plan.total_frames))
    lengths = [e.length for e in plan.episodes]
    restamped = np.concatenate([np.arange(n) / plan.fps for n in lengths]).astype(np.float32)
    assert np.array_equal(data.column("timestamp").to_numpy(), restamped)

    stats = json.loads((out / "meta/stats.json").read_text())
    assert set(stats) == set(features)
    assert stats["timestamp"]["max"] == [float(np.float32((max(lengths) - 1) / plan.fps))]
    assert stats["index"]["count"] == [plan.total_frames]
    assert stats["frame_index"]["max"] == [max(lengths) - 1]

    lerobot_loads(out, demo_small, tmp_path)


def test_an_undeclared_data_column_is_one_line_naming_the_fix(
    demo_small, tmp_path, non_standard_export
):
    root = shutil.copytree(demo_small, tmp_path / "src")
    non_standard_export(root, **REAL_EXPORT, extra_column="next.reward")
    # the check finds it in every episode's parquet, before any conversion work
    report = check_source(root, "export", ConversionOptions(**ALL_REPAIRS))
    assert [p.kind for p in report.problems] == ["undeclared_column"] * report.episodes
    first = report.problems[0]
    assert (first.episode, first.file) == (0, "data/chunk-000/episode_000000.parquet")
    with pytest.raises(SourceCheckError) as caught:
        convert_dataset(root, tmp_path / "v3.0", name="export", **ALL_REPAIRS)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"dataset 'export': episode 0: file {first.file}: ")
    assert "'next.reward'" in message and "`undeclared_columns: drop`" in message
    assert not (tmp_path / "v3.0").exists()


def test_validate_names_an_undeclared_output_column(demo_small, tmp_path):
    """validate enforces the same rule on the output (a column added after the check)."""
    out = tmp_path / "v3.0"
    plan = convert_dataset(demo_small, out, name="demo")
    source = load_source(demo_small, "demo")
    info = json.loads((out / "meta/info.json").read_text())
    path = sorted(out.glob("data/*/*.parquet"))[0]
    table = pq.read_table(path)
    pq.write_table(table.append_column("next.reward", pa.array([0.0] * table.num_rows)), path)
    with pytest.raises(DatasetError) as caught:
        _check_declared_columns(source, plan, info, DataFiles(read_meta(str(out))))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("dataset 'demo': file meta/info.json: ")
    assert "'next.reward'" in message and "declare it" in message


def test_the_workflow_converts_the_real_export(export, tmp_path, run_snakemake):
    config = {"datasets": {"export": {"path": str(export), "conversion": ALL_REPAIRS}}}
    result = run_snakemake(tmp_path / "run", config, "--cores", "2", "convert")
    assert "Traceback" not in result.stderr
    info = json.loads((tmp_path / "run/results/export/v3.0/meta/info.json").read_text())
    assert list(info["features"])[-len(DEFAULTS) :] == DEFAULTS
    summary = json.loads((tmp_path / "run/results/export/validation.json").read_text())
    assert summary["episodes"] == 4 and summary["frames_loaded"] > 0
