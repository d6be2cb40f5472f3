"""The ``undeclared_columns`` repair (issue 29, build item 3): a real SO-101 v2.1 export
carries a ``next.done`` column in every parquet that its info.json does not declare. The check
refuses it naming the option; ``drop`` converts it to the bytes of the same dataset without the
column, and ``declare`` to a dataset that declares it (a bool scalar: ``{"dtype": "bool",
"shape": [1], "names": null}``) with its stats, which robopipe's v3.0 check passes and its
loaders serve."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from robopipe.checks.v21 import check_source
from robopipe.checks.v30 import check_v30
from robopipe.conversion.serial import convert_dataset
from robopipe.formats.v21_repairs import REPAIRS, column_feature
from robopipe.loading import MapDataset, StreamingDataset
from robopipe.options import ConversionOptions
from robopipe.stats import compute_episode_stats

DONE = "next.done"
# every other repair on (the real export needs them), and restamped timestamps
OTHER_REPAIRS = {
    "restamp_timestamps": True,
    **{name: True for name in REPAIRS if name != "undeclared_columns"},
}
REAL_EXPORT = {"wall_clock": True, "own_features_only": True}


def add_column(root: Path, name: str = DONE, *, stats: bool = False) -> dict[int, np.ndarray]:
    """Append a bool column ``name`` (True at each episode's last frame) to every parquet of
    the v2.1 dataset at ``root``, and to its ``huggingface`` schema metadata where it has one,
    as HF datasets writes it; with ``stats``, its stats to each ``episodes_stats.jsonl`` line.
    info.json is left as it is. Returns each episode's values."""
    values = {}
    for path in sorted(root.glob("data/*/*.parquet")):
        table = pq.read_table(path)
        done = np.arange(table.num_rows) == table.num_rows - 1
        values[int(table.column("episode_index")[0].as_py())] = done
        table = table.append_column(name, pa.array(done))
        metadata = dict(table.schema.metadata or {})
        if b"huggingface" in metadata:
            hf = json.loads(metadata[b"huggingface"])
            hf["info"]["features"][name] = {"dtype": "bool", "_type": "Value"}
            metadata[b"huggingface"] = json.dumps(hf).encode()
        pq.write_table(table.replace_schema_metadata(metadata or None), path)
    if stats:
        path = root / "meta/episodes_stats.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for line in lines:
            done = values[line["episode_index"]]
            line["stats"][name] = compute_episode_stats({name: done}, ())[name]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return values


@pytest.fixture
def with_done(demo_small, tmp_path) -> tuple[Path, dict[int, np.ndarray]]:
    """A copy of the demo with a ``next.done`` column info.json does not declare."""
    root = Path(shutil.copytree(demo_small, tmp_path / "src"))
    return root, add_column(root)


def _uncompressed(root: Path) -> list[int]:
    """Each episode parquet's uncompressed bytes, as the plan measures them."""
    sizes = []
    for path in sorted(root.glob("data/*/*.parquet")):
        metadata = pq.ParquetFile(path).metadata
        sizes.append(
            sum(
                metadata.row_group(g).column(c).total_uncompressed_size
                for g in range(metadata.num_row_groups)
                for c in range(metadata.num_columns)
            )
        )
    return sizes


def test_the_check_names_the_option_and_the_option_passes_it(with_done):
    root, _ = with_done
    report = check_source(root, "x", ConversionOptions())
    assert [p.kind for p in report.problems] == ["undeclared_column"] * report.episodes
    first = report.problems[0]
    assert (first.episode, first.file) == (0, "data/chunk-000/episode_000000.parquet")
    assert f"'{DONE}'" in first.message
    assert "`undeclared_columns: drop`" in first.message
    assert "`undeclared_columns: declare`" in first.message
    for mode in ("drop", "declare"):
        repaired = check_source(root, "x", ConversionOptions(undeclared_columns=mode))
        assert repaired.ok, repaired.summary()
        assert repaired.to_json()["repairs"]["undeclared_columns"] == mode


def test_drop_converts_to_the_bytes_of_the_dataset_without_the_column(
    small_source, request, tmp_path, file_tree
):
    original = request.getfixturevalue(
        "cr5_small" if "cr5" in request.node.callspec.id else "demo_small"
    )
    add_column(small_source, stats=True)  # in the parquets' metadata and the stats too
    # a data file limit between the first two episodes' sizes without and with the column:
    # the output rolls over where the dataset without the column does only if the plan
    # measures the episodes without it
    without, with_ = _uncompressed(original), _uncompressed(small_source)
    limit = (sum(without[:2]) + sum(with_[:2])) / 2 / 2**20
    options = {"restamp_timestamps": True, "data_file_size_in_mb": limit}
    plan = convert_dataset(original, tmp_path / "without", name="x", **options)
    dropped = convert_dataset(
        small_source, tmp_path / "dropped", name="x", undeclared_columns="drop", **options
    )
    assert [e.data for e in plan.episodes][:3] == [(0, 0), (0, 0), (0, 1)]
    assert [e.data for e in dropped.episodes] == [e.data for e in plan.episodes]
    assert file_tree(tmp_path / "dropped") == file_tree(tmp_path / "without")


def test_declare_gives_a_dataset_robopipe_checks_and_loads(with_done, tmp_path):
    root, values = with_done
    out = tmp_path / "v3.0"
    plan = convert_dataset(root, out, name="x", undeclared_columns="declare")  # validated

    info = json.loads((out / "meta/info.json").read_text())
    feature = {"dtype": "bool", "shape": [1], "names": None, "fps": plan.fps}
    assert info["features"][DONE] == feature
    expected = np.concatenate([values[e.source_episode_index] for e in plan.episodes])
    data = pq.read_table(sorted(out.glob("data/*/*.parquet"))[0])
    assert data.schema.field(DONE).type == pa.bool_()
    assert np.array_equal(data.column(DONE).to_numpy(zero_copy_only=False), expected)

    # stats as lerobot computes them: per episode in meta/episodes, aggregated in stats.json
    episodes = pq.read_table(sorted(out.glob("meta/episodes/*/*.parquet"))[0])
    assert episodes.column(f"stats/{DONE}/count").to_pylist() == [[e.length] for e in plan.episodes]
    assert episodes.column(f"stats/{DONE}/max").to_pylist() == [[True]] * len(plan.episodes)
    stats = json.loads((out / "meta/stats.json").read_text())[DONE]
    assert stats["count"] == [plan.total_frames]
    assert (stats["min"], stats["max"]) == ([False], [True])
    assert stats["mean"] == pytest.approx([len(plan.episodes) / plan.total_frames])

    report = check_v30(out, "x")
    assert report.ok, report.summary()
    items = MapDataset(str(out))
    assert items[0][DONE].dtype == torch.bool
    assert [bool(items[i][DONE]) for i in range(len(items))] == expected.tolist()
    streamed = {int(it["index"]): bool(it[DONE]) for it in StreamingDataset(str(out))}
    assert [streamed[i] for i in range(plan.total_frames)] == expected.tolist()


def test_every_repair_converts_the_real_export_with_the_column(
    demo_small, tmp_path, non_standard_export, file_tree
):
    """The SO-101 case: a real export (only its own features in info.json, no stats, float64
    vectors, wall-clock timestamps) whose parquets also hold ``next.done``."""
    without = Path(shutil.copytree(demo_small, tmp_path / "without"))
    non_standard_export(without, **REAL_EXPORT)
    root = Path(shutil.copytree(without, tmp_path / "src"))
    add_column(root)
    refused = check_source(root, "x", ConversionOptions(**OTHER_REPAIRS))
    assert {p.kind for p in refused.problems} == {"undeclared_column"}

    out = tmp_path / "declared"
    plan = convert_dataset(root, out, name="x", undeclared_columns="declare", **OTHER_REPAIRS)
    stats = json.loads((out / "meta/stats.json").read_text())
    info = json.loads((out / "meta/info.json").read_text())
    assert set(stats) == set(info["features"]) and DONE in stats
    assert stats[DONE]["count"] == [plan.total_frames]
    assert check_v30(out, "x").ok

    dropped = tmp_path / "dropped"
    convert_dataset(root, dropped, name="x", undeclared_columns="drop", **OTHER_REPAIRS)
    convert_dataset(without, tmp_path / "plain", name="x", **OTHER_REPAIRS)
    assert file_tree(dropped) == file_tree(tmp_path / "plain")


def test_declare_refuses_a_column_whose_type_does_not_say_its_feature(demo_small, tmp_path):
    root = Path(shutil.copytree(demo_small, tmp_path / "src"))
    for path in sorted(root.glob("data/*/*.parquet")):
        table = pq.read_table(path)
        pq.write_table(table.append_column("note", pa.array(["x"] * table.num_rows)), path)
    report = check_source(root, "x", ConversionOptions(undeclared_columns="declare"))
    assert [p.kind for p in report.problems] == ["undeclared_column"] * report.episodes
    message = report.problems[0].message
    assert "'note'" in message and "string" in message
    assert "`undeclared_columns: drop`" in message
    assert check_source(root, "x", ConversionOptions(undeclared_columns="drop")).ok


@pytest.mark.parametrize(
    ("arrow_type", "feature"),
    [
        (pa.bool_(), {"dtype": "bool", "shape": [1], "names": None}),
        (pa.int64(), {"dtype": "int64", "shape": [1], "names": None}),
        (pa.float32(), {"dtype": "float32", "shape": [1], "names": None}),
        (pa.list_(pa.float64(), 3), {"dtype": "float64", "shape": [3], "names": None}),
        (pa.list_(pa.float32()), None),  # a variable length: no shape
        (pa.string(), None),
        (pa.struct([("a", pa.int8())]), None),
    ],
)
def test_a_column_is_declared_as_lerobot_declares_its_type(arrow_type, feature):
    assert column_feature(arrow_type) == feature


def test_an_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="undeclared_columns must be 'drop' or 'declare'"):
        ConversionOptions(undeclared_columns="keep")


def test_the_workflow_declares_the_column(with_done, tmp_path, run_snakemake):
    """Through the config (schema included) and the jobs: the shard jobs compute the
    column's stats, and the meta job reads them, with no other repair on."""
    root, _ = with_done
    config = {
        "datasets": {"x": {"path": str(root), "conversion": {"undeclared_columns": "declare"}}}
    }
    result = run_snakemake(tmp_path / "run", config, "--cores", "2", "convert")
    assert "Traceback" not in result.stderr
    out = tmp_path / "run/results/x/v3.0"
    assert json.loads((out / "meta/info.json").read_text())["features"][DONE]["dtype"] == "bool"
    stats = json.loads((out / "meta/stats.json").read_text())[DONE]
    info = json.loads((root / "meta/info.json").read_text())
    assert stats["count"] == [info["total_frames"]]
