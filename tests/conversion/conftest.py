"""Non-standard v2.1 exports and lerobot 0.6.1's loader, for the conversion tests (the small
datasets to damage, ``small_source``, are in ``tests/conftest.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from robopipe.harness.lerobot_compat import check_loader, sample_indices
from robopipe.layout import DEFAULT_FEATURES

LEROBOT_PYTHON = Path(__file__).resolve().parents[2] / ".venv-lerobot" / "bin" / "python"

VECTORS = ("observation.state", "action")


def make_non_standard_export(
    root: Path, *, wall_clock: bool = False, own_features_only: bool = False,
    extra_column: str | None = None,
) -> None:  # fmt: skip
    """Make the v2.1 dataset at ``root`` what real exports are: other placeholder names in
    the path templates, no ``episodes_stats.jsonl``, no ``index``/``task_index`` columns,
    float64 vectors; with ``wall_clock``, timestamps drifting off ``frame_index / fps``; with
    ``own_features_only``, an info.json without lerobot's default features; with
    ``extra_column``, a float64 column that no feature declares."""
    info = json.loads((root / "meta/info.json").read_text())
    for path in sorted(root.glob("data/*/*.parquet")):
        table = pq.read_table(path).drop_columns(["index", "task_index"])
        for name in VECTORS:
            column = table.column(name).combine_chunks()
            wide = pa.FixedSizeListArray.from_arrays(
                pc.cast(column.flatten(), pa.float64()), column.type.list_size
            )
            table = table.set_column(table.schema.get_field_index(name), name, wide)
        if wall_clock:
            stamps = table.column("timestamp").to_numpy() * 1.01 + 0.25
            at = table.schema.get_field_index("timestamp")
            table = table.set_column(at, "timestamp", pa.array(stamps, pa.float32()))
        if extra_column:
            table = table.append_column(extra_column, pa.array(np.zeros(table.num_rows)))
        pq.write_table(table.replace_schema_metadata(None), path)
    info["data_path"] = info["data_path"].replace("{episode_chunk", "{chunk_index")
    info["video_path"] = (
        info["video_path"].replace("{episode_chunk", "{chunk_index").replace("video_key", "camera")
    )
    if own_features_only:
        info["features"] = {k: v for k, v in info["features"].items() if k not in DEFAULT_FEATURES}
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))
    (root / "meta/episodes_stats.jsonl").unlink()


@pytest.fixture(scope="session")
def non_standard_export():
    """``non_standard_export(root, **how)``: see :func:`make_non_standard_export`."""
    return make_non_standard_export


@pytest.fixture(scope="session")
def lerobot_loads():
    """``lerobot_loads(converted, source, work)``: lerobot 0.6.1's LeRobotDataset serves 10
    sampled items of ``converted`` equal to the v2.1 ``source``'s
    (:func:`robopipe.harness.lerobot_compat.check_loader`), or the test is skipped where
    lerobot's environment is missing."""

    def check(converted: Path, source: Path, work: Path) -> None:
        if not LEROBOT_PYTHON.exists():
            pytest.skip("lerobot 0.6.1 env missing (run tools/lerobot_env.sh)")
        indices = sample_indices(converted, 10, seed=0)
        assert check_loader(LEROBOT_PYTHON, converted, source, indices, work / "hf", work) == []

    return check
