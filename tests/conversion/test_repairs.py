"""The opt-in repairs: a non-standard export (path templates with other placeholder names, no
episodes_stats.jsonl, no index or task_index columns, float64 vectors) made from cr5 or the
demo is refused with the option that fixes each problem named, and converted with them; the
output loads in lerobot 0.6.1 (where its environment exists) with frames equal to the
source's."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robopipe.checks.v21 import check_source
from robopipe.conversion.serial import convert_dataset
from robopipe.errors import DatasetError
from robopipe.formats.v21_repairs import REPAIRS
from robopipe.options import ConversionOptions

VECTORS = ("observation.state", "action")  # the vectors the export makes float64
# every repair on: the bool ones, and undeclared columns declared
ALL_REPAIRS = {**dict.fromkeys(REPAIRS, True), "undeclared_columns": "declare"}


def _reason(report) -> str:
    return "\n".join(p.message for p in report.problems)


def test_each_problem_names_its_repair(small_source, non_standard_export):
    non_standard_export(small_source)
    first = check_source(small_source, "export", ConversionOptions(restamp_timestamps=True))
    assert {p.kind for p in first.problems} == {"template"}
    assert "`template_placeholders: true`" in _reason(first)
    second = check_source(
        small_source,
        "export",
        ConversionOptions(restamp_timestamps=True, template_placeholders=True),
    )
    assert {p.kind for p in second.problems} == {"stats", "columns", "float64"}
    for option in ("compute_missing_stats", "derive_missing_columns", "cast_float64"):
        assert f"`{option}: true`" in _reason(second)
    repaired = check_source(
        small_source,
        "export",
        ConversionOptions(restamp_timestamps=True, **ALL_REPAIRS),
    )
    assert repaired.ok, repaired.summary()
    assert repaired.to_json()["repairs"] == ALL_REPAIRS


def test_repairs_convert_a_non_standard_export(
    small_source, request, tmp_path, lerobot_loads, non_standard_export
):
    original = request.getfixturevalue(
        "cr5_small" if "cr5" in request.node.callspec.id else "demo_small"
    )
    non_standard_export(small_source)
    out = tmp_path / "v3.0"
    options = {"restamp_timestamps": True, **ALL_REPAIRS}
    plan = convert_dataset(small_source, out, name="export", **options)  # validated
    assert all(getattr(plan.options, name) == on for name, on in ALL_REPAIRS.items())

    data = pq.read_table(sorted(out.glob("data/*/*.parquet"))[0])
    reference = pa.concat_tables(
        pq.read_table(p) for p in sorted(original.glob("data/*/*.parquet"))
    )
    assert data.column("index").to_pylist() == list(range(reference.num_rows))
    assert data.column("task_index").to_pylist() == reference.column("task_index").to_pylist()
    for name in VECTORS:
        assert data.schema.field(name).type.value_type == pa.float32()
        assert data.column(name).to_pylist() == reference.column(name).to_pylist()
    stats = json.loads((out / "meta/stats.json").read_text())
    cameras = [k for k, f in plan_features(original).items() if f["dtype"] == "video"]
    for key in [*cameras, *VECTORS, "index"]:
        assert np.all(np.asarray(stats[key]["min"]) <= np.asarray(stats[key]["max"]))
    assert stats["index"]["count"] == [reference.num_rows]
    for key in cameras:  # per channel, in [0, 1], from sampled decoded frames
        assert np.asarray(stats[key]["mean"]).shape == (3, 1, 1)
        assert 0 < np.asarray(stats[key]["mean"]).min() < 1

    lerobot_loads(out, original, tmp_path)


def plan_features(root) -> dict:
    return json.loads((root / "meta/info.json").read_text())["features"]


def test_a_value_float32_cannot_hold_stops_the_shard(small_source, tmp_path):
    path = sorted(small_source.glob("data/*/*.parquet"))[1]
    table = pq.read_table(path)
    column = table.column("action").combine_chunks()
    values = pc.cast(column.flatten(), pa.float64()).to_numpy().copy()
    values[0] = 0.1  # not a float32
    wide = pa.FixedSizeListArray.from_arrays(pa.array(values), column.type.list_size)
    pq.write_table(table.set_column(table.schema.get_field_index("action"), "action", wide), path)
    with pytest.raises(DatasetError, match="'action' row 0: 0.1 does not survive") as caught:
        convert_dataset(
            small_source, tmp_path / "v3.0", name="x", restamp_timestamps=True, cast_float64=True
        )
    assert caught.value.episode == 1 and caught.value.file.startswith("data/")
    assert not (tmp_path / "v3.0").exists()
