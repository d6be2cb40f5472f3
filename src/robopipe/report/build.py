"""Write one dataset's report files, and merge the per-dataset tables into one summary."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from robopipe.atomic import atomic_path
from robopipe.layout import REPORT_FIGURES
from robopipe.report import conversion, copies, dataloading, paper, peers, scaling
from robopipe.report.tables import (
    conversion_by_rule,
    load_benchmarks,
    load_ceilings,
    load_copies,
    load_job_rss,
    load_lerobot,
    load_scenarios,
)

FIGURES = REPORT_FIGURES  # figure stems, each written as .svg and .png
SUMMARY = "summary.csv"
CONVERSION = "conversion.csv"
COPIES = "copies.csv"
JOBS_RSS = "jobs_rss.csv"
PEERS = "peers.csv"
SCENARIOS = "scenarios"


def build_dataset_report(
    dataset: str,
    out_dir: str | Path,
    *,
    bench: Iterable[str | Path] = (),
    ceilings: Iterable[str | Path] = (),
    conversion_tsvs: Iterable[str | Path] = (),
    lerobot: Iterable[str | Path] = (),
    copy_results: Iterable[str | Path] = (),
    converted: str | Path | None = None,
    job_rss: Iterable[str | Path] = (),
    skipped_peers: dict[str, str] | None = None,
) -> list[Path]:
    """Write every figure (SVG and PNG), ``summary.csv``, ``conversion.csv``, ``copies.csv``,
    ``peers.csv`` and one card per scenario under ``scenarios/`` into ``out_dir``; return the
    written paths.

    ``copy_results`` are the training copies' ``copy.json``; ``converted`` the converted
    dataset's folder (its frames' size, for the copies table); ``job_rss`` the jobs' own
    peak RSS files (``robopipe.jobs``), written to ``jobs_rss.csv`` and used per rule;
    ``skipped_peers`` the peer loaders that did not run, with why (``peers.csv`` lists them).

    Every figure in :data:`FIGURES` is always written: a figure without data says why instead
    (no scenario, a single node count, lerobot not measured, ...).

    Raises:
        DatasetError: a result file is unreadable or breaks the benchmark contract.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = load_scenarios(dataset, bench)
    ceiling_by_encoding = load_ceilings(dataset, ceilings)
    ceiling = ceiling_by_encoding.get(None)
    copy_table = copies.copies_table(
        table,
        load_copies(dataset, copy_results),
        ceiling_by_encoding,
        copies.converted_entry(converted) if converted else None,
    )
    jobs = load_benchmarks(dataset, conversion_tsvs)
    rss = load_job_rss(job_rss)
    comparison = load_lerobot(dataset, lerobot)

    written = [
        *dataloading.throughput(table, ceiling, out / "throughput", dataset),
        *dataloading.latency(table, out / "latency", dataset),
        *dataloading.first_batch(table, out / "first_batch", dataset),
        *dataloading.peak_rss(table, out / "peak_rss", dataset),
        *scaling.workers(table, out / "scaling_workers", dataset),
        *scaling.nodes(table, out / "scaling_nodes", dataset),
        *conversion.rules(jobs, out / "conversion_rules", dataset, rss),
        *conversion.shards(jobs, out / "conversion_shards", dataset),
        *conversion.lerobot(comparison, out / "lerobot_convert", dataset),
        *copies.figure(copy_table, out / "copies", dataset),
        *paper.cache_modes(table, out / "paper_cache_modes", dataset),
        *paper.batch_sizes(table, out / "paper_batch_size", dataset),
        *paper.seq_lengths(table, out / "paper_seq_length", dataset),
    ]
    with atomic_path(out / SCENARIOS) as cards:
        cards.mkdir()
        for _, row in table.iterrows():
            dataloading.scenario_card(row, ceiling, cards / row["scenario"])
    written += sorted((out / SCENARIOS).iterdir())

    written.append(_write_csv(summary_table(table, ceiling), out / SUMMARY))
    per_rule = conversion_by_rule(jobs, rss) if not jobs.empty else jobs
    written.append(_write_csv(per_rule, out / CONVERSION))
    written.append(_write_csv(rss, out / JOBS_RSS))
    written.append(_write_csv(copy_table, out / COPIES))
    written.append(_write_csv(peers.peers_table(table, skipped_peers), out / PEERS))
    return written


def summary_table(table: pd.DataFrame, ceiling: dict | None) -> pd.DataFrame:
    """The scenario table without per-rank detail, with the dataset's decode ceiling columns."""
    summary = table.drop(columns="ranks")
    for key in ("sequential_frames_per_s_per_core", "random_frames_per_s_per_core"):
        summary[f"ceiling_{key}"] = None if ceiling is None else ceiling[key]
    return summary


def merge_summaries(paths: Iterable[str | Path], out: str | Path) -> Path:
    """Concatenate per-dataset ``summary.csv`` files (same columns) into ``out``."""
    tables = [pd.read_csv(p) for p in paths]
    merged = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    return _write_csv(merged, out)


def _write_csv(table: pd.DataFrame, path: Path | str) -> Path:
    with atomic_path(path) as tmp:
        table.to_csv(tmp, index=False)
    return Path(path)
