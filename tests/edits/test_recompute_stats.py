"""recompute_stats: lerobot 0.6.1's episode stats with quantiles (robopipe.stats.quantile_stats)
and the edit that writes them into stats.json and the episodes' stats columns."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pyarrow.parquet as pq
import pytest

from robopipe.conversion.serial import convert_dataset
from robopipe.edits.plan import make_edit_plan
from robopipe.edits.serial import edit_dataset
from robopipe.errors import DatasetError
from robopipe.formats.v30_reader import read_episodes_table, read_meta
from robopipe.peer_env import peer_python
from robopipe.stats import QUANTILES, aggregate_stats, quantile_episode_stats, quantile_stats

RECOMPUTED = ["observation.state", "action"]  # make_v21's numeric features but the defaults


def test_quantiles_come_from_a_histogram_and_std_from_the_mean_of_squares():
    values = np.arange(1001, dtype=np.float32)  # 0..1000: q is 1000 * q, within a bin
    stats = quantile_stats(values)
    assert set(stats) == {"min", "max", "mean", "std", "count", *QUANTILES}
    assert stats["count"].tolist() == [1001] and stats["mean"].shape == (1,)
    for key, q in QUANTILES.items():
        assert stats[key][0] == pytest.approx(1000 * q, abs=1000 / 5000 + 1)
    # float32 all the way: sqrt(mean(x**2) - mean(x)**2), not np.std
    mean = np.mean(values)
    assert stats["std"][0] == np.sqrt(np.mean(values**2) - mean**2)
    vectors = quantile_stats(np.stack([values, -values], axis=1))
    assert vectors["q99"].shape == (2,) and vectors["q99"][1] == pytest.approx(-10, abs=1.3)
    one = quantile_stats(np.array([[2.0, 3.0]], np.float32))  # one frame: quantiles = mean
    assert one["q50"].tolist() == [2.0, 3.0] and one["std"].tolist() == [0.0, 0.0]


PEER_SCRIPT = """
import json, sys
import numpy as np
from lerobot.datasets.compute_stats import get_feature_stats
out = {}
for key, (values, dtype) in json.load(sys.stdin).items():
    array = np.asarray(values, dtype)
    stats = get_feature_stats(array, axis=0, keepdims=array.ndim == 1)
    out[key] = {k: np.asarray(v).tolist() for k, v in stats.items()}
print(json.dumps(out))
"""


def test_quantile_stats_equal_lerobots_where_its_env_is():
    python = peer_python({})
    if python is None:
        pytest.skip("no .venv-lerobot (tools/lerobot_env.sh): lerobot's get_feature_stats")
    rng = np.random.default_rng(0)
    cases = {
        "float32 vectors, small spread": rng.normal(5, 0.01, (300, 7)).astype(np.float32),
        "float32 scalar": rng.normal(size=200).astype(np.float32),
        "int64": rng.integers(0, 5, 50),
        "one frame": rng.normal(size=(1, 3)).astype(np.float32),
        "nan and inf": np.array([[1, 2], [np.nan, 3], [4, np.inf]], np.float32),
    }
    payload = json.dumps({k: (v.tolist(), str(v.dtype)) for k, v in cases.items()})
    result = subprocess.run(
        [python, "-c", PEER_SCRIPT], input=payload, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    theirs = json.loads(result.stdout)
    for key, values in cases.items():
        ours = {k: v.tolist() for k, v in quantile_stats(values).items()}
        assert json.dumps(ours, sort_keys=True) == json.dumps(theirs[key], sort_keys=True), key


@pytest.fixture(scope="module")
def wrong_stats(make_v21, tmp_path_factory):
    """A v3.0 dataset whose stats.json and first episode's action stats are wrong."""
    root = tmp_path_factory.mktemp("wrong") / "v3.0"
    convert_dataset(make_v21(episodes=6, cameras=1), root, name="w",
                    data_file_size_in_mb=0.004, video_file_size_in_mb=0.02)  # fmt: skip
    stats = json.loads((root / "meta/stats.json").read_text())
    stats["action"]["mean"] = [m * 10 + 1 for m in stats["action"]["mean"]]
    (root / "meta/stats.json").write_text(json.dumps(stats))
    episodes = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(episodes)
    column = table.column("stats/action/max").to_pylist()
    column[0] = [v + 100 for v in column[0]]
    position = table.schema.get_field_index("stats/action/max")
    table = table.set_column(position, table.schema.field(position), [column])
    pq.write_table(table, episodes)
    return root


def _tree(root, folder):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted((root / folder).rglob("*")) if p.is_file()}  # fmt: skip


def _episode_rows(root):
    """Each episode's rows of the recomputed features, as (T, D) arrays, in episode order."""
    tables = [pq.read_table(f) for f in sorted((root / "data").rglob("*.parquet"))]
    episodes = {}
    for table in tables:
        index = table.column("episode_index").to_numpy()
        for feature in RECOMPUTED:
            column = table.column(feature).combine_chunks()
            values = column.flatten().to_numpy().reshape(len(column), -1)
            for episode in np.unique(index):
                episodes.setdefault(int(episode), {})[feature] = values[index == episode]
    return [episodes[e] for e in sorted(episodes)]


def test_recompute_stats_writes_lerobots_stats_and_keeps_the_files(wrong_stats, tmp_path):
    before = {folder: _tree(wrong_stats, folder) for folder in ("data", "videos", "meta")}
    out = tmp_path / "restated"
    plan = edit_dataset({"type": "recompute_stats"}, [wrong_stats], out, name="restated")
    assert plan.recomputed == RECOMPUTED
    assert {f: _tree(wrong_stats, f) for f in before} == before, "the source changed"
    assert _tree(out, "data") == before["data"] and _tree(out, "videos") == before["videos"]

    per_episode = [quantile_episode_stats(rows) for rows in _episode_rows(out)]
    expected = aggregate_stats(per_episode)
    stats = json.loads((out / "meta/stats.json").read_text())
    source_stats = json.loads((wrong_stats / "meta/stats.json").read_text())
    for feature in RECOMPUTED:
        assert set(stats[feature]) == {"min", "max", "mean", "std", "count", *QUANTILES}
        for stat, value in expected[feature].items():
            np.testing.assert_allclose(stats[feature][stat], value, rtol=1e-6, err_msg=stat)
    assert stats["action"]["mean"] != source_stats["action"]["mean"]  # the wrong one is gone
    # cameras and lerobot's default features keep the input's stats, as lerobot keeps them
    assert {k: v for k, v in stats.items() if k not in RECOMPUTED} == {
        k: v for k, v in source_stats.items() if k not in RECOMPUTED
    }

    columns = [f"stats/action/{s}" for s in ("min", "max", "mean", "std", "count")]
    episodes = read_episodes_table(read_meta(str(out)), ["episode_index", *columns])
    source_episodes = read_episodes_table(read_meta(str(wrong_stats)), ["episode_index"])
    assert episodes.column("episode_index").equals(source_episodes.column("episode_index"))
    for row, recomputed in enumerate(per_episode):
        for stat in ("min", "max", "mean", "std", "count"):
            got = episodes.column(f"stats/action/{stat}")[row].as_py()
            np.testing.assert_allclose(got, recomputed["action"][stat], rtol=1e-6)


def test_recompute_stats_refuses_what_it_does_not_build(wrong_stats, tmp_path):
    operation = {"type": "recompute_stats", "relative_action": True}
    with pytest.raises(DatasetError, match="recompute_stats: relative_action is not supported"):
        make_edit_plan("r", operation, [wrong_stats])
    images_only = tmp_path / "images_only"
    shutil.copytree(wrong_stats, images_only)
    info = json.loads((images_only / "meta/info.json").read_text())
    for feature in RECOMPUTED:
        info["features"][feature]["dtype"] = "string"
    (images_only / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="no numeric feature but the defaults"):
        make_edit_plan("r", {"type": "recompute_stats"}, [images_only])
