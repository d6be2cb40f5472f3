"""NaN and inf in the data (issue 38, "NaN"): a v2.1 dataset with NaN, +inf and -inf in
``observation.state`` converts, its v3.0 rows are the source's bit for bit (NaN payloads and
signed zeros included), validation and the v3.0 check pass, and the stats propagate NaN and inf
as lerobot's plain numpy reductions do. Flagging such values is the quality stage's job, not
the conversion's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from robopipe.checks.rules import timestamp_error
from robopipe.checks.v30 import check_v30
from robopipe.conversion.serial import convert_dataset
from robopipe.conversion.validate import bits_digest, same_bits
from robopipe.stats import compute_episode_stats

STATE = "observation.state"
DAMAGED = 1  # the episode whose state holds the special values
# (frame, dimension) -> float32 bit pattern written there
SPECIAL = {
    (0, 0): 0x7FC00000,  # NaN (numpy's)
    (1, 1): 0x7F800000,  # +inf
    (2, 2): 0xFF800000,  # -inf
    (3, 3): 0x7FC00001,  # NaN with a payload
    (4, 4): 0x80000000,  # -0.0
    (5, 0): 0xFFC00000,  # -NaN
}


def _state_bits(table: pa.Table) -> np.ndarray:
    # (T, D) uint32: the bit pattern of each float32 of the state
    column = table.column(STATE).combine_chunks()
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return flat.view(np.uint32).reshape(len(column), -1)


def _episode_file(root: Path, episode: int) -> Path:
    return next(root.glob(f"data/*/episode_{episode:06d}.parquet"))


def _damage(root: Path) -> None:
    """Write :data:`SPECIAL` into episode :data:`DAMAGED`'s state and its stats into
    ``episodes_stats.jsonl``, as a lerobot v2.1 writer computes them from such data."""
    path = _episode_file(root, DAMAGED)
    table = pq.read_table(path)
    bits = _state_bits(table).copy()
    for (frame, dim), pattern in SPECIAL.items():
        bits[frame, dim] = pattern
    values = pa.array(bits.reshape(-1).view(np.float32))
    state = pa.FixedSizeListArray.from_arrays(values, bits.shape[1])
    at = table.schema.get_field_index(STATE)
    pq.write_table(table.set_column(at, table.schema.field(at), state), path)
    stats_path = root / "meta/episodes_stats.jsonl"
    lines = [json.loads(line) for line in stats_path.read_text().splitlines()]
    for line in lines:
        if line["episode_index"] == DAMAGED:
            state_values = bits.view(np.float32)
            line["stats"][STATE] = compute_episode_stats({STATE: state_values}, ())[STATE]
    # json.dumps writes NaN, Infinity and -Infinity, as lerobot's jsonlines does
    stats_path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def nan_source(make_v21, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nan") / "src"
    shutil.copytree(make_v21(episodes=4, cameras=1, min_length=10, max_length=16), root)
    _damage(root)
    return root


@pytest.fixture(scope="module")
def nan_converted(nan_source, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("nan") / "v3.0"
    convert_dataset(nan_source, out, name="nan")  # validated
    return out


def test_nan_and_inf_convert_bit_for_bit(nan_source, nan_converted):
    output = pa.concat_tables(pq.read_table(p) for p in sorted(nan_converted.glob("data/*/*")))
    for episode in range(4):
        source = pq.read_table(_episode_file(nan_source, episode))
        rows = output.filter(pa.compute.equal(output.column("episode_index"), episode))
        assert rows.schema.names == source.schema.names
        np.testing.assert_array_equal(_state_bits(rows), _state_bits(source))
        for name in source.schema.names:
            if name != STATE:
                assert rows.column(name).to_pylist() == source.column(name).to_pylist(), name
    got = _state_bits(output.filter(pa.compute.equal(output.column("episode_index"), DAMAGED)))
    assert {key: int(got[key]) for key in SPECIAL} == SPECIAL
    report = check_v30(nan_converted, "nan")
    assert report.ok, report.summary()


def test_stats_propagate_nan_and_inf_as_lerobot(nan_source, nan_converted):
    state = np.concatenate(
        [
            _state_bits(pq.read_table(_episode_file(nan_source, episode))).view(np.float32)
            for episode in range(4)
        ]
    )
    with np.errstate(invalid="ignore"):
        want = {k: f(state, axis=0) for k, f in [("min", np.min), ("max", np.max)]}
        want["mean"] = np.mean(state.astype(np.float64), axis=0)
    stats = json.loads((nan_converted / "meta/stats.json").read_text())[STATE]  # NaN, Infinity
    np.testing.assert_array_equal(stats["min"], want["min"])  # NaN where the data has one
    np.testing.assert_array_equal(stats["max"], want["max"])
    for kind in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(kind(np.asarray(stats["mean"])), kind(want["mean"]))
    assert np.isnan(stats["std"][:4]).all() and np.isfinite(stats["std"][4:]).all()
    # the episode's own stats, in meta/episodes, as episodes_stats.jsonl gave them
    source_line = next(
        json.loads(line)
        for line in (nan_source / "meta/episodes_stats.jsonl").read_text().splitlines()
        if json.loads(line)["episode_index"] == DAMAGED
    )
    episodes = pq.read_table(next(nan_converted.glob("meta/episodes/*/*.parquet")))
    row = episodes.filter(pa.compute.equal(episodes.column("episode_index"), DAMAGED))
    for stat in ("min", "max", "mean", "std"):
        stored = np.asarray(row.column(f"stats/{STATE}/{stat}")[0].as_py(), dtype=np.float64)
        np.testing.assert_array_equal(stored, source_line["stats"][STATE][stat])


def test_the_workflow_converts_nan_and_inf_to_the_same_bytes(
    nan_source, nan_converted, tmp_path, run_snakemake, file_tree
):
    config = {"datasets": {"nan": {"path": str(nan_source)}}}
    run_snakemake(tmp_path, config, "--cores", "2", "convert")
    assert file_tree(tmp_path / "results/nan/v3.0") == file_tree(nan_converted)


def test_same_bits_compares_floats_by_their_bits():
    def column(values, type_=None):
        return pa.chunked_array([pa.array(values, type_ or pa.float32())])

    nan = float("nan")
    assert same_bits(column([nan, 1.0]), column([nan, 1.0]))
    assert not column([nan]).equals(column([nan]))  # arrow's own equality: NaN != NaN
    assert not same_bits(column([0.0]), column([-0.0]))
    assert same_bits(column([float("inf"), None]), column([float("inf"), None]))
    assert not same_bits(column([1.0, None]), column([1.0, 2.0]))
    payload = pa.array(np.array([0x7FC00001], np.uint32).view(np.float32))
    assert not same_bits(column([nan]), pa.chunked_array([payload]))
    vectors = pa.list_(pa.float64(), 2)
    assert same_bits(column([[nan, 1.0]], vectors), column([[nan, 1.0]], vectors))
    assert not same_bits(column([[nan, 1.0]], vectors), column([[nan, 2.0]], vectors))
    assert not same_bits(column([1.0]), column([1.0], pa.float64()))  # the type counts
    assert same_bits(column(["a", None], pa.string()), column(["a", None], pa.string()))


def test_bits_digest_agrees_with_same_bits_however_the_rows_are_chunked():
    nan = float("nan")
    payload = float(np.array([0x7FC00001], np.uint32).view(np.float32)[0])
    vectors = pa.list_(pa.float32(), 2)

    def table(values, states, names=None):
        return pa.table({"v": pa.array(values, pa.float32()), "s": pa.array(states, vectors),
                         "n": pa.array(names or ["a"] * len(values), pa.string())})  # fmt: skip

    whole = table([nan, 1.0, None, 3.0], [[nan, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]])
    pieces = pa.concat_tables([whole.slice(0, 1), whole.slice(1, 3)])
    assert pieces.column(0).num_chunks == 2
    assert bits_digest(pieces) == bits_digest(whole)
    assert bits_digest(whole.slice(1, 2)) == bits_digest(pa.concat_tables([whole.slice(1, 2)]))
    for other in (
        table([payload, 1.0, None, 3.0], [[nan, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]),
        table([nan, -0.0, None, 3.0], [[nan, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]),
        table([nan, 1.0, 2.0, 3.0], [[nan, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]),
        table([nan, 1.0, None, 3.0], [[nan, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 8.0]]),
        table([nan, 1.0, None, 3.0], [[nan, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]],
              ["a", "a", "a", "b"]),
    ):  # fmt: skip
        assert not all(same_bits(a, b) for a, b in zip(other.columns, whole.columns, strict=True))
        assert bits_digest(other) != bits_digest(whole)
    renamed = whole.rename_columns(["w", "s", "n"])
    assert bits_digest(renamed) != bits_digest(whole)


def test_a_nan_timestamp_is_infinitely_off():
    worst, at = timestamp_error(np.array([0.0, np.nan, 0.2], np.float32), np.arange(3), 10)
    assert (worst, at) == (np.inf, 1)
    assert timestamp_error(np.array([0.0, -np.inf]), np.arange(2), 10) == (np.inf, 1)


def test_the_v30_check_refuses_a_nan_timestamp(nan_converted, tmp_path):
    root = Path(shutil.copytree(nan_converted, tmp_path / "copy"))
    path = sorted(root.glob("data/*/*.parquet"))[0]
    table = pq.read_table(path)
    stamps = table.column("timestamp").to_numpy().copy()
    stamps[3] = np.nan
    at = table.schema.get_field_index("timestamp")
    pq.write_table(table.set_column(at, table.schema.field(at), pa.array(stamps)), path)
    report = check_v30(root, "nan")
    assert [p.kind for p in report.problems] == ["timestamps"], report.summary()
    assert "by inf s at frame 3" in report.problems[0].message
