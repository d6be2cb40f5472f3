"""Opt-in repairs of non-standard v2.1 exports, each a ``conversion:`` option.

:data:`REPAIRS` names and describes them; :mod:`robopipe.checks.v21` names the option
that fixes a problem, and the shard job applies them to each episode's table
(:func:`repair_table`) and computes missing stats
(:func:`robopipe.stats.episode_stats_from_files`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from robopipe.layout import DEFAULT_FEATURE_SPECS

if TYPE_CHECKING:  # imported where used: the plan and publish jobs import REPAIRS only
    import pyarrow as pa

    from robopipe.options import ConversionOptions

REPAIRS = {
    "compute_missing_stats": (
        "compute episodes missing from meta/episodes_stats.jsonl (or the whole file) as "
        "lerobot's compute_episode_stats: numeric features from the parquet, camera features "
        "from about 100 sampled frames, decoded"
    ),
    "derive_missing_columns": (
        "derive a missing `index` column (each row's position in the dataset) and "
        "`task_index` (the episode's single task in episodes.jsonl)"
    ),
    "template_placeholders": (
        "accept other placeholder names in info.json's data_path and video_path: "
        "chunk/chunk_index/episode_chunk_index for episode_chunk, episode/episode_id for "
        "episode_index, camera/image_key/video_name for video_key"
    ),
    "cast_float64": (
        "cast float64 columns (scalars or vectors) to the float32 that info.json declares; "
        "an episode whose values do not survive the cast exactly stops the shard job"
    ),
}
DERIVABLE_COLUMNS = ("index", "task_index")


def repairs_of(options: ConversionOptions) -> dict[str, bool]:
    """Each repair of :data:`REPAIRS` and whether ``options`` turns it on."""
    return {name: getattr(options, name) for name in REPAIRS}


def with_default_features(
    features: Mapping[str, dict], schema: pa.Schema | None = None
) -> dict[str, dict]:
    """``info.json``'s features with each of lerobot's default features (``timestamp``,
    ``frame_index``, ``episode_index``, ``index``, ``task_index``) it does not declare
    appended, in lerobot's order.

    Not an option: real exports often list only their own features, yet every data file
    holds these columns, and lerobot 0.6.1's loader reads the data files with exactly the
    declared features (``Dataset.from_parquet(features=...)``) and each item's ``timestamp``,
    ``index`` and ``task_index``. Declaring them changes no value.

    Args:
        features: ``info.json``'s features, returned unchanged when complete.
        schema: an episode's parquet schema as the conversion writes it; an appended
            feature takes its column's dtype (scalar numeric or bool) so that the
            declaration matches the column, else lerobot's (a derived column is int64).

    Returns:
        A new dict; the declared features keep their order and specs.
    """
    out = dict(features)
    for name, spec in DEFAULT_FEATURE_SPECS.items():
        if name in out:
            continue
        dtype = None
        if schema is not None and schema.get_field_index(name) >= 0:
            dtype = _scalar_dtype(schema.field(name).type)
        out[name] = {**spec, "dtype": dtype or spec["dtype"]}
    return out


def _scalar_dtype(arrow_type: pa.DataType) -> str | None:
    """The info.json dtype (numpy's name) of a scalar numeric or bool column, else None."""
    import pyarrow as pa

    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return np.dtype(arrow_type.to_pandas_dtype()).name
    if pa.types.is_boolean(arrow_type):
        return "bool"
    return None


def repair_table(
    table: pa.Table,
    features: Mapping[str, dict],
    repairs: Mapping[str, bool],
    *,
    index_start: int,
    task_index: int | None,
) -> pa.Table:
    """One episode's table with the repairs that are on applied.

    Args:
        table: the episode's rows as read from its v2.1 parquet.
        features: ``info.json``'s features (dtype and shape per column).
        repairs: :func:`repairs_of` the options.
        index_start: the episode's first global ``index`` (``derive_missing_columns``).
        task_index: the episode's task (``derive_missing_columns``), None when it has not
            exactly one.

    Returns:
        With ``derive_missing_columns``, ``index`` (int64, ``index_start + row``) and
        ``task_index`` (int64) appended when absent; with ``cast_float64``, float64 columns
        declared float32 cast to float32 (vectors as ``fixed_size_list<float>[D]``), and the
        ``huggingface`` schema metadata, which describes the old types, dropped.

    Raises:
        ValueError: a value does not survive the cast to float32 exactly (the message names
            the column and row), or ``task_index`` is needed and None.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if repairs.get("derive_missing_columns"):
        if "index" not in table.schema.names:
            table = table.append_column("index", pa.array(np.arange(n) + index_start, pa.int64()))
        if "task_index" not in table.schema.names:
            if task_index is None:
                raise ValueError(
                    "cannot derive task_index: episodes.jsonl does not list exactly one task"
                )
            table = table.append_column("task_index", pa.array(np.full(n, task_index), pa.int64()))
    if repairs.get("cast_float64"):
        cast = False
        for name in table.schema.names:
            if features.get(name, {}).get("dtype") != "float32":
                continue
            column = table.column(name)
            target = _float32_type(column.type, features[name])
            if target is None:
                continue
            values = column.combine_chunks()
            narrowed = pc.cast(values, target)
            before = _flat(values).to_numpy(zero_copy_only=False)
            after = _flat(narrowed).to_numpy(zero_copy_only=False).astype(np.float64)
            if not np.array_equal(before, after, equal_nan=True):
                position = int(np.flatnonzero(~((before == after) | np.isnan(before)))[0])
                row = position // max(1, len(before) // max(n, 1))
                raise ValueError(
                    f"column {name!r} row {row}: {float(before[position])!r} does not "
                    "survive the cast to float32 exactly; fix info.json's dtype (float64) "
                    "instead of `cast_float64`"
                )
            table = table.set_column(
                table.schema.get_field_index(name), pa.field(name, target), narrowed
            )
            cast = True
        if cast:
            metadata = {
                k: v for k, v in (table.schema.metadata or {}).items() if k != b"huggingface"
            }
            table = table.replace_schema_metadata(metadata or None)
    return table


def _float32_type(arrow_type: pa.DataType, feature: dict) -> pa.DataType | None:
    """The float32 type of a float64 column (None when it is not float64)."""
    import pyarrow as pa

    if pa.types.is_float64(arrow_type):
        return pa.float32()
    if (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    ) and pa.types.is_float64(arrow_type.value_type):
        return pa.list_(pa.float32(), int(feature["shape"][0]))
    return None


def _flat(values: pa.Array) -> pa.Array:
    import pyarrow as pa

    return values.flatten() if pa.types.is_nested(values.type) else values


def episode_task_index(episode: Mapping, tasks: list[str]) -> int | None:
    """The ``task_index`` of an ``episodes.jsonl`` line with exactly one task, else None."""
    listed = episode.get("tasks") or []
    if len(listed) != 1 or listed[0] not in tasks:
        return None
    return tasks.index(listed[0])
