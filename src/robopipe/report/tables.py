"""Load the result files the report consumes into pandas tables.

Inputs: scenario JSONs ``results/bench/{dataset}/{scenario}.json`` (schema and reader in
:mod:`robopipe.scenario_result`), the decode ceiling ``results/bench/{dataset}/ceiling.json``,
Snakemake ``benchmark:`` TSVs ``results/jobs/{dataset}/{rule}/{name}.tsv`` and the optional
``results/bench/{dataset}/lerobot_convert.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from robopipe.bench.registry import LOADERS as REGISTRY
from robopipe.bench.registry import get_loader
from robopipe.errors import DatasetError
from robopipe.scenario_result import read_scenario_result, scenario_fields

SCENARIO_FIELDS = scenario_fields()
LOADERS = tuple(REGISTRY)  # the report's order of loaders (robopipe.bench.registry)
SEQUENCE_LOADERS = tuple(name for name, spec in REGISTRY.items() if spec.sequence)

# Optional network fields of a scenario result (None/NaN in results written before them):
# the injected round trip in ms (null for a local source), the steady window's traffic, and
# the share of the loader processes' wall time spent waiting on the network.
NETWORK_FIELDS = (
    "network_latency_ms",
    "bytes_fetched",
    "requests",
    "bytes_per_sample",
    "requests_per_sample",
    "network_wait_share",
)

# Optional fault fields of a remote scenario (NaN in results written before them): the share of
# requests the proxy faulted, the kinds drawn from (comma-separated), the faults it injected
# (all kinds) and the retries robopipe's loaders made (robopipe.retry).
FAULT_FIELDS = ("fault_rate", "fault_kinds", "faults_injected", "retries")

# optional memory fields of a scenario result (results written before them lack them): the
# process tree's peak PSS (robopipe.bench.rss), the map-style loader's batch-buffer budget, and
# the budget for batches in flight with a batch's size and the prefetch_factor chosen from them
MEMORY_FIELDS = (
    "peak_pss_mb",
    "peak_pss_total_mb",
    "batch_buffer_mb",
    "batches_in_flight_mb",
    "batch_mb",
    "prefetch_factor",
)

# optional start fields of a scenario result (NaN in results written before them): seconds
# from the SLURM job's start to the first batch asked for (NaN outside SLURM), from the
# scenario's process start to it, and how far apart the ranks started measuring (n>1)
TIMING_FIELDS = ("dispatch_s", "startup_to_measure_s", "start_skew_s")

# whose loader a scenario measured: the registry's peer flag, the peer's package and version,
# and whether its items equalled robopipe's (robopipe.bench.peers.check_items)
PEER_COLUMNS = ("peer", "peer_version", "peer_items_equal")

CEILING_FIELDS = (
    "dataset",
    "camera_count",
    "sequential_frames_per_s_per_core",
    "random_frames_per_s_per_core",
)

COPY_FIELDS = ("encoding", "frames", "frame_bytes", "compression_factor", "encode_s", "fidelity")

LEROBOT_FIELDS = (
    "dataset",
    "episodes",
    "lerobot_wall_s",
    "lerobot_peak_rss_mb",
    "robopipe_wall_s",
    "robopipe_max_job_rss_mb",
)

# Columns of Snakemake's ``benchmark:`` TSV that the report uses (s: wall-clock seconds,
# max_rss: peak resident set size in MB of 2**20 bytes, as psutil reports it).
BENCHMARK_COLUMNS = ("s", "max_rss", "cpu_time")


def _read_json(dataset: str, path: str | Path, fields: Iterable[str]) -> dict:
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(dataset, f"unreadable result file: {exc}", file=path) from exc
    if not isinstance(record, dict):
        raise DatasetError(dataset, "result file is not a JSON object", file=path)
    missing = [f for f in fields if f not in record]
    if missing:
        raise DatasetError(dataset, f"result file lacks fields {missing}", file=path)
    return record


def load_scenarios(dataset: str, paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per benchmark scenario, sorted by loader then scenario name.

    Nested fields are flattened: ``latency_ms`` -> ``latency_p50_ms``/``_p95_ms``/``_p99_ms``,
    ``decoder_cache`` -> ``decoder_cache_hits``/``_misses``/``_evictions`` (NaN when null),
    ``ranks`` -> ``ranks`` (the list, kept for the per-scenario figure) and ``rank_count``.
    Rates are in samples/s and frames/s, latencies in ms (per sample) and s (first batch),
    memory in MB. ``workers`` and ``nodes`` are ints. The optional :data:`NETWORK_FIELDS`,
    :data:`FAULT_FIELDS` (``faults`` summed into ``faults_injected``, ``fault_kinds`` joined by
    commas), :data:`MEMORY_FIELDS` and :data:`TIMING_FIELDS` are NaN where a result lacks
    them (results written before they existed; ``dispatch_s`` outside SLURM, ``start_skew_s``
    of one rank); ``peer`` is
    the registry's word on the loader (someone else's, measured for comparison),
    ``peer_version`` its package and version, ``peer_items_equal`` whether its items equalled
    robopipe's (``peer_check.equal``; empty where not checked).

    Raises:
        DatasetError: a file is unreadable, lacks a contract field, or belongs to another
            dataset.
    """
    rows = []
    for path in paths:
        try:
            record = read_scenario_result(path)
            peer = get_loader(record["loader"]).peer
        except ValueError as exc:
            raise DatasetError(dataset, str(exc), file=path) from None
        if record["dataset"] != dataset:
            raise DatasetError(
                dataset, f"result file is for dataset {record['dataset']!r}", file=path
            )
        row = {k: v for k, v in record.items() if k not in ("latency_ms", "decoder_cache")}
        latency = record["latency_ms"] or {}
        for q in ("p50", "p95", "p99"):
            row[f"latency_{q}_ms"] = latency.get(q)
        faults = row.pop("faults", None)
        row["faults_injected"] = None if faults is None else sum(faults.values())
        kinds = record.get("fault_kinds")
        row["fault_kinds"] = ",".join(kinds) if kinds else None
        cache = record["decoder_cache"] or {}
        for k in ("hits", "misses", "evictions"):
            row[f"decoder_cache_{k}"] = cache.get(k)
        row["rank_count"] = len(record["ranks"] or [])
        row.setdefault("encoding", None)  # results of scenarios on the converted dataset
        row.setdefault("peak_rss_total_mb", record["peak_rss_mb"])
        for field in (*NETWORK_FIELDS, *FAULT_FIELDS, *MEMORY_FIELDS, *TIMING_FIELDS):
            row.setdefault(field, None)
        row["peer"] = peer
        row["peer_version"] = record.get("peer_version")
        check = row.pop("peer_check", None)
        row["peer_items_equal"] = None if check is None else check["equal"]
        rows.append(row)
    columns = [f for f in SCENARIO_FIELDS if f not in ("latency_ms", "decoder_cache")]
    columns += ["latency_p50_ms", "latency_p95_ms", "latency_p99_ms"]
    columns += ["decoder_cache_hits", "decoder_cache_misses", "decoder_cache_evictions"]
    columns += ["rank_count", "encoding", "peak_rss_total_mb", *NETWORK_FIELDS, *FAULT_FIELDS]
    columns += [*MEMORY_FIELDS, *TIMING_FIELDS, *PEER_COLUMNS]
    table = pd.DataFrame(rows, columns=columns)
    numeric = [c for c in columns if c not in _TEXT_COLUMNS]
    table[numeric] = table[numeric].apply(pd.to_numeric, errors="coerce")
    table["loader_order"] = table["loader"].map(_loader_rank)
    table = table.sort_values(["loader_order", "scenario"]).drop(columns="loader_order")
    return table.reset_index(drop=True)


_TEXT_COLUMNS = {
    "dataset",
    "scenario",
    "loader",
    "source",
    "mode",
    "encoding",
    "fault_kinds",
    "decode",
    "image_dtype",
    "cpu_fallback",
    "device",
    "ranks",
    *PEER_COLUMNS,
}


def _loader_rank(loader: str) -> int:
    return LOADERS.index(loader) if loader in LOADERS else len(LOADERS)


def load_ceilings(dataset: str, paths: Iterable[str | Path]) -> dict:
    """The decode ceilings of ``dataset`` (frames/s per core) by encoding: None for the
    converted dataset, the encoding's name for a training copy.

    Raises:
        DatasetError: a file lacks a contract field, or two ceilings name the same encoding.
    """
    ceilings = {}
    for path in paths:
        record = _read_json(dataset, path, CEILING_FIELDS)
        if record["dataset"] != dataset:
            continue
        encoding = record.get("encoding")
        if encoding in ceilings:
            raise DatasetError(dataset, f"two decode ceiling files for encoding {encoding}")
        ceilings[encoding] = record
    return ceilings


def load_copies(dataset: str, paths: Iterable[str | Path]) -> list[dict]:
    """The training copies' measurements (``copy.json``), in the order given.

    Raises:
        DatasetError: a file is unreadable or lacks a field of ``COPY_FIELDS``.
    """
    return [_read_json(dataset, p, COPY_FIELDS) for p in paths]


def load_lerobot(dataset: str, paths: Iterable[str | Path]) -> dict | None:
    """The lerobot-converter comparison of ``dataset`` (s, MB), or None when not measured."""
    found = [_read_json(dataset, p, LEROBOT_FIELDS) for p in paths]
    found = [r for r in found if r["dataset"] == dataset]
    return found[-1] if found else None


def load_benchmarks(dataset: str, paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per Snakemake job from its ``benchmark:`` TSV: rule, name, s, max_rss, cpu_time.

    The rule and job name come from the path ``.../{rule}/{name}.tsv``. A TSV written with
    ``repeat()`` has several rows: wall time ``s`` is their mean, ``max_rss`` their max.
    Snakemake writes ``NA`` (or ``-``) where it could not measure; those become NaN.

    Raises:
        DatasetError: a TSV is unreadable or lacks the ``s`` / ``max_rss`` columns.
    """
    rows = []
    for path in paths:
        path = Path(path)
        try:
            runs = pd.read_csv(path, sep="\t", na_values=["NA", "-"])
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise DatasetError(dataset, f"unreadable benchmark TSV: {exc}", file=path) from exc
        missing = [c for c in ("s", "max_rss") if c not in runs.columns]
        if missing or runs.empty:
            raise DatasetError(dataset, f"benchmark TSV lacks columns {missing} or rows", file=path)
        runs = runs.apply(pd.to_numeric, errors="coerce")
        rows.append(
            {
                "rule": path.parent.name,
                "name": path.stem,
                "s": runs["s"].mean(),
                "max_rss": runs["max_rss"].max(),
                "cpu_time": runs["cpu_time"].mean() if "cpu_time" in runs else float("nan"),
            }
        )
    table = pd.DataFrame(rows, columns=["rule", "name", *BENCHMARK_COLUMNS])
    return table.sort_values(["rule", "name"]).reset_index(drop=True)


def load_job_rss(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per job from the ``<log>.rss.json`` it wrote itself (``robopipe.jobs``): rule,
    job (the log's name), own_mb, children_mb (its largest child process), peak_mb (MiB),
    startup_s (seconds from the process's start to its first work: interpreter and imports;
    NaN in files of jobs that did not record it), job_start_s (seconds from its SLURM job's
    start to its first work; NaN outside SLURM). Unreadable files are skipped (a job killed
    before writing it)."""
    rows = []
    for path in paths:
        try:
            record = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        job = Path(path).name.removesuffix(".rss.json").removesuffix(".log")
        values = {k: record.get(k) for k in JOB_RSS}
        values = {k: float("nan") if v is None else v for k, v in values.items()}
        rows.append({"rule": record["rule"], "job": job, **values})
    table = pd.DataFrame(rows, columns=["rule", "job", *JOB_RSS])
    return table.sort_values(["rule", "job"]).reset_index(drop=True)


JOB_RSS = ("own_mb", "children_mb", "peak_mb", "startup_s", "job_start_s")


def conversion_by_rule(jobs: pd.DataFrame, job_rss: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rule: jobs, total_s (sum of wall s), max_s (slowest job), max_rss_mb (largest job,
    Snakemake's sampler), job_peak_rss_mb (largest job as the jobs measure themselves: own or
    largest child process; NaN without ``job_rss``), startup_s (mean start-up of the rule's
    jobs, from ``job_rss``: process start to first work; NaN without it), job_start_s (the
    same from the SLURM job's start, Snakemake's starts inside the job included; NaN outside
    SLURM).

    Rules appear in pipeline order when known (check, plan, shard, aggregate, meta, validate,
    publish).
    """
    grouped = jobs.groupby("rule", sort=False).agg(
        jobs=("s", "size"),
        total_s=("s", "sum"),
        max_s=("s", "max"),
        max_rss_mb=("max_rss", "max"),
    )
    by_rule = job_rss.groupby("rule") if job_rss is not None else None
    peaks = by_rule["peak_mb"].max() if by_rule is not None else pd.Series()
    grouped["job_peak_rss_mb"] = [peaks.get(rule, float("nan")) for rule in grouped.index]
    for column in ("startup_s", "job_start_s"):
        means = by_rule[column].mean() if by_rule is not None else pd.Series()
        grouped[column] = [means.get(rule, float("nan")) for rule in grouped.index]
    order = sorted(grouped.index, key=_rule_rank)
    return grouped.loc[order].reset_index()


_RULE_ORDER = (
    "demo",
    "fetch",
    "check",
    "plan",
    "shard",
    "aggregate_data",
    "aggregate_video",
    "meta",
    "validate",
    "publish",
)


def _rule_rank(rule: str) -> tuple[int, str]:
    return (_RULE_ORDER.index(rule) if rule in _RULE_ORDER else len(_RULE_ORDER), rule)
