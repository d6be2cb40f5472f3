"""Opt-in repairs of non-standard v2.1 exports, each a ``conversion:`` option.

:data:`REPAIRS` names and describes them; :mod:`robopipe.checks.v21` names the option
that fixes a problem, and the shard job applies them to each episode's table
(:func:`repair_table`) and computes missing stats
(:func:`robopipe.stats.episode_stats_from_files`); the meta job declares the features
(:func:`output_features`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from robopipe.layout import DEFAULT_FEATURE_SPECS, DEFAULT_FEATURES

if TYPE_CHECKING:  # imported where used: importing this module stays light
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
    "undeclared_columns": (
        "data columns that no info.json feature declares: `drop` leaves them out of the "
        "output; `declare` declares each from its parquet type (bool or numeric scalars and "
        "fixed-size lists) and computes its stats per episode as lerobot does"
    ),
}
DERIVABLE_COLUMNS = ("index", "task_index")


def repairs_of(options: ConversionOptions) -> dict[str, bool | str | None]:
    """Each repair of :data:`REPAIRS` and its setting in ``options``: a bool, or for
    ``undeclared_columns`` ``"drop"``, ``"declare"`` or None (off)."""
    return {name: getattr(options, name) for name in REPAIRS}


def shards_compute_stats(options: ConversionOptions) -> bool:
    """Whether the shard jobs compute episode stats (``stats.json`` beside their rows) that
    the meta job reads: with ``compute_missing_stats`` or ``undeclared_columns: declare``."""
    return options.compute_missing_stats or options.undeclared_columns == "declare"


def undeclared_columns(columns, features: Mapping[str, dict]) -> list[str]:
    """The data ``columns`` that no feature of ``features`` (info.json's) declares, in order.

    Video features have no data column; lerobot's default features (``timestamp``,
    ``frame_index``, ``episode_index``, ``index``, ``task_index``) count as declared, because
    the conversion declares them where the source does not. lerobot's loader reads only
    declared columns (``Dataset.from_parquet(features=<info.json's>)``)."""
    declared = {name for name, spec in features.items() if spec.get("dtype") != "video"}
    return [name for name in columns if name not in declared and name not in DEFAULT_FEATURES]


def column_feature(arrow_type: pa.DataType) -> dict | None:
    """The feature lerobot writes in info.json for a data column of ``arrow_type`` (the
    ``undeclared_columns: declare`` repair), or None when the type alone does not say.

    A bool or numeric scalar is ``{"dtype": <numpy name>, "shape": [1], "names": None}``
    (e.g. a bool ``next.done``: ``{"dtype": "bool", "shape": [1], "names": None}``, as
    lerobot/pusht declares it), a ``fixed_size_list`` of N of them shape ``[N]``: the
    features lerobot 0.6.1's ``get_hf_features_from_features`` reads back as
    ``Value(dtype)`` and ``Sequence(length=N)``. A variable-length list (no shape), a
    string (lerobot computes no stats for it, and robopipe's v3.0 check wants stats of every
    feature) or another type gives None.
    """
    import pyarrow as pa

    shape = [1]
    if pa.types.is_fixed_size_list(arrow_type):
        shape, arrow_type = [arrow_type.list_size], arrow_type.value_type
    dtype = _scalar_dtype(arrow_type)
    if dtype is None:
        return None
    return {"dtype": dtype, "shape": shape, "names": None}


def undeclared_columns_to(
    mode: str, columns, features: Mapping[str, dict], repairs: Mapping[str, bool | str | None]
) -> list[str]:
    """The :func:`undeclared_columns` of ``columns`` where the ``undeclared_columns`` repair
    is set to ``mode`` (``"drop"`` or ``"declare"``), else none."""
    if repairs.get("undeclared_columns") != mode:
        return []
    return undeclared_columns(columns, features)


def output_features(
    features: Mapping[str, dict], schema: pa.Schema, repairs: Mapping[str, bool | str | None]
) -> dict[str, dict]:
    """The features the output's info.json declares: ``info.json``'s, then with
    ``undeclared_columns: declare`` each column of ``schema`` that they do not declare
    (:func:`column_feature`, in column order), then lerobot's default features that are
    still missing (:func:`with_default_features`).

    Args:
        features: ``info.json``'s features.
        schema: an episode's parquet schema as the conversion writes it.
        repairs: :func:`repairs_of` the options.

    Raises:
        ValueError: with ``declare``, a column's type is one :func:`column_feature` cannot
            declare (the check refuses such a column first).
    """
    out = dict(features)
    for name in undeclared_columns_to("declare", schema.names, features, repairs):
        arrow_type = schema.field(name).type
        feature = column_feature(arrow_type)
        if feature is None:
            raise ValueError(f"column {name!r} ({arrow_type}) cannot be declared from its type")
        out[name] = feature
    return with_default_features(out, schema)


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
        ``huggingface`` schema metadata, which describes the old types, dropped; with
        ``undeclared_columns: drop``, the columns no feature declares dropped, and from the
        ``huggingface`` metadata too (:func:`_without_columns`).

    Raises:
        ValueError: a value does not survive the cast to float32 exactly (the message names
            the column and row), or ``task_index`` is needed and None.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    dropped = undeclared_columns_to("drop", table.schema.names, features, repairs)
    if dropped:
        table = _without_columns(table, dropped)
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


def _without_columns(table: pa.Table, names: list[str]) -> pa.Table:
    """``table`` less the columns ``names``, and less their entries in the ``huggingface``
    schema metadata's features (``{"info": {"features": {...}}}``, written by HF datasets
    with ``json.dumps``, so rewritten as it would have been written without them). Metadata
    that is not such JSON is kept as it is."""
    table = table.drop_columns(names)
    metadata = dict(table.schema.metadata or {})
    try:
        hf = json.loads(metadata[b"huggingface"])
        features = hf["info"]["features"]
    except (KeyError, TypeError, ValueError):
        return table
    if not isinstance(features, dict) or not set(names) & set(features):
        return table
    hf["info"]["features"] = {k: v for k, v in features.items() if k not in names}
    metadata[b"huggingface"] = json.dumps(hf).encode()
    return table.replace_schema_metadata(metadata)


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
