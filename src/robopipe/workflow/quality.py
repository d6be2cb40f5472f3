"""What the quality rules decide (workflow/rules/quality.smk): each dataset's batches of
episodes, which episodes a batch job reads, and the dataset's quality options.

A batch is what one ``quality_batch`` job checks (:func:`robopipe.quality.check_batch`): a
v2.x source's conversion shard (its id, ``shard-000000``: the plan the conversion uses, made
while the DAG is built for a local folder, else by the ``plan`` checkpoint), or a v3.0
source's data file (``chunk-000_file-000``: the ``quality_batches`` checkpoint reads
``meta/episodes`` once, after the check, and writes each data file's episodes). So the DAG is
built without reading an episode, or anything of a remote dataset. A shard or data file of
more than ``QualityOptions.batch_episodes`` episodes is checked in parts of that many
(``shard-000000-part-001``), so that small episodes still make parallel jobs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from robopipe.atomic import write_json
from robopipe.conversion.plan import load_plan
from robopipe.formats.v30_reader import read_meta as read_v30_meta
from robopipe.layout import PLAN_FILE, QUALITY_BATCH_FILE, QUALITY_BATCHES_FILE
from robopipe.quality import QualityOptions
from robopipe.retry import DEFAULT_BUDGET, RetryBudget
from robopipe.workflow.sources import Datasets

__all__ = [
    "QUALITY_BATCH_PATTERN",
    "batch_episodes",
    "batch_files",
    "batch_ids",
    "batch_inputs",
    "batch_signatures",
    "job_options",
    "quality_config",
    "quality_options",
    "read_batches",
    "v30_batch",
    "v30_batches",
    "write_batches",
]

# the {quality_batch} wildcard: a shard id or a v3.0 data file's chunk and file (no braces: a
# constraint holding `{n,}` breaks Snakemake's parse of the output pattern)
QUALITY_BATCH_PATTERN = r"(?:shard|chunk-\d+_file)-\d+(?:-part-\d+)?"
_PART = re.compile(r"^(.*)-part-(\d+)$")
_V30_DATA_FILE = re.compile(r"chunk-(\d+)/file-(\d+)\.parquet$")
# options that decide nothing a job writes (only the verdict), left out of the jobs' params
VERDICT_ONLY = ("fail_on",)


def v30_batch(data_file: str) -> str:
    """The batch id of a v3.0 data file, e.g. ``data/chunk-000/file-003.parquet`` ->
    ``chunk-000_file-003``.

    Raises:
        ValueError: the path is not named as LeRobot v3.0 names data files.
    """
    match = _V30_DATA_FILE.search(data_file)
    if match is None:
        raise ValueError(f"not a LeRobot v3.0 data file name: {data_file!r}")
    return f"chunk-{int(match[1]):03d}_file-{int(match[2]):03d}"


def _parts(batch: str, episodes: int, batch_episodes: int) -> list[str]:
    """The batch ids of a shard or data file of ``episodes`` episodes: itself, or its parts of
    at most ``batch_episodes`` (``<id>-part-000``, ...)."""
    if episodes <= batch_episodes:
        return [batch]
    return [f"{batch}-part-{i:03d}" for i in range(-(-episodes // batch_episodes))]


def _split(batch: str) -> tuple[str, int | None]:
    """``(shard or data file id, part number or None)`` of a batch id."""
    match = _PART.match(batch)
    return (batch, None) if match is None else (match[1], int(match[2]))


def batch_ids(
    datasets: Datasets,
    name: str,
    batches_file: Callable[[str], str],
    batch_episodes: int = QualityOptions.batch_episodes,
) -> list[str]:
    """The batches of dataset ``name``, in order: its plan's shard ids (a converted source),
    else those of its ``quality_batches`` checkpoint's output (``batches_file(name)``: in the
    rules, ``checkpoints.quality_batches.get(dataset=name).output[0]``); one of more than
    ``batch_episodes`` episodes as its parts."""
    if datasets[name].converted:
        sizes = {s.id: s.stop - s.first for s in datasets.plan(name).shards}
    else:
        sizes = {b: len(e) for b, e in read_batches(batches_file(name)).items()}
    return [part for b, n in sizes.items() for part in _parts(b, n, batch_episodes)]


def batch_files(
    datasets: Datasets,
    name: str,
    batches_file: Callable[[str], str],
    batch_episodes: int = QualityOptions.batch_episodes,
) -> list[str]:
    """input of quality_merge: every batch job's partial result (:data:`QUALITY_BATCH_FILE`)."""
    return [
        QUALITY_BATCH_FILE.format(dataset=name, quality_batch=b)
        for b in batch_ids(datasets, name, batches_file, batch_episodes)
    ]


def batch_inputs(datasets: Datasets, name: str) -> dict[str, str]:
    """input of quality_batch: the plan (a converted source: the job reads its shard's
    episodes there), else the v3.0 source's batches (:data:`QUALITY_BATCHES_FILE`)."""
    if datasets[name].converted:
        return {"plan": PLAN_FILE.format(dataset=name)}
    return {"batches": QUALITY_BATCHES_FILE.format(dataset=name)}


def batch_signatures(datasets: Datasets, name: str, batch: str) -> str:
    """params of quality_batch: a digest of the size and mtime of each file the batch reads
    (its episodes' parquets and every camera's mp4s) for a local v2.x folder planned while the
    DAG is built, so that a changed file reruns exactly its batch; ``""`` otherwise (a job
    fetches or a rule makes those files; a v3.0 source's files are signed by its check,
    an input)."""
    if not datasets[name].converted:
        return ""
    return datasets.shard_file_signatures(name, _split(batch)[0])


def v30_batches(
    root: str,
    *,
    storage_options: dict | None = None,
    selected: list[int] | None = None,
    name: str | None = None,
    retry_budget: RetryBudget = DEFAULT_BUDGET,
) -> dict[str, list[int]]:
    """The batches of the v3.0 dataset at ``root`` (a folder or fsspec URL): each data file's
    batch id (:func:`v30_batch`) -> its episode indices, ascending, in data file order; only
    the episodes of ``selected`` (Source.read_episodes; None: every one), a data file without
    one left out. Reads ``meta/info.json``, ``tasks.parquet`` and ``meta/episodes`` (its index
    columns), each remote read retried within ``retry_budget``.

    Raises:
        DatasetError: the metadata cannot be read.
    """
    meta = read_v30_meta(
        root, name=name, storage_options=storage_options, retry_budget=retry_budget
    )
    index, chunk, file = (
        meta.episodes[c] for c in ("episode_index", "data/chunk_index", "data/file_index")
    )
    keep = np.ones(len(index), bool) if selected is None else np.isin(index, selected)
    batches: dict[tuple[int, int], list[int]] = {}
    for episode, c, f in zip(index[keep], chunk[keep], file[keep], strict=True):
        batches.setdefault((int(c), int(f)), []).append(int(episode))
    return {
        f"chunk-{c:03d}_file-{f:03d}": sorted(episodes)
        for (c, f), episodes in sorted(batches.items())
    }


def write_batches(batches: dict[str, list[int]], path: str | Path) -> None:
    """Write :func:`v30_batches`' result as JSON, atomically (``{"batches": {id: [...]}}``)."""
    write_json(path, {"batches": batches}, indent=None)


def read_batches(path: str | Path) -> dict[str, list[int]]:
    """The batches :func:`write_batches` wrote."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)["batches"]


def batch_episodes(
    batch: str,
    *,
    plan: str | None = None,
    batches: str | None = None,
    batch_episodes: int = QualityOptions.batch_episodes,
) -> list[int]:
    """The episode indices (of the dataset as its files number them) that batch ``batch``
    checks, ascending: a shard's source episode indices in the ``plan`` file (a converted
    source), else a data file's in the ``batches`` file (:func:`write_batches`); for a part
    (:func:`batch_ids`), its ``batch_episodes`` of them.

    Raises:
        KeyError: no such shard or batch.
        ValueError: neither file is given.
    """
    base, part = _split(batch)
    if plan is not None:
        episodes = sorted(e.source_episode_index for e in load_plan(plan).shard_episodes(base))
    elif batches is not None:
        episodes = read_batches(batches)[base]
    else:
        raise ValueError("batch_episodes needs a plan or a batches file")
    if part is None:
        return episodes
    return episodes[part * batch_episodes : (part + 1) * batch_episodes]


def _merged(defaults: Mapping | None, own: Mapping | None) -> dict:
    """``own`` over ``defaults``, nested mappings merged key by key."""
    merged = dict(defaults or {})
    for key, value in (own or {}).items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def quality_config(config: Mapping, entry: Mapping) -> dict:
    """A dataset's ``quality:`` section (of its ``entry``: its ``datasets:`` entry, or an
    edit output's, robopipe.workflow.edits.edited_entries) merged over the config's top-level
    ``quality:`` defaults (nested sections key by key: ``severity``), a severity ``false``
    (YAML's bare ``off``) as ``"off"``."""
    merged = _merged(config.get("quality"), entry.get("quality"))
    if merged.get("severity"):  # YAML 1.1 reads a bare `off` as false
        merged["severity"] = {k: "off" if v is False else v for k, v in merged["severity"].items()}
    return merged


def quality_options(config: Mapping, entry: Mapping) -> QualityOptions:
    """The :class:`~robopipe.quality.QualityOptions` of the dataset of ``entry``
    (:func:`quality_config`).

    Raises:
        ValueError: an unknown key (naming the nearest one) or a value out of range.
    """
    return QualityOptions.from_config(quality_config(config, entry))


def job_options(options: QualityOptions) -> dict:
    """params of the quality jobs: the options as config (``to_config``) without those that
    only decide the verdict (``fail_on``), so that changing those reruns only the verdict."""
    return {k: v for k, v in options.to_config().items() if k not in VERDICT_ONLY}
