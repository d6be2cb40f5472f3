"""Snakemake job: write one v3.0 data file from its shards, then check it row by row against
the source."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.aggregate import aggregate_data
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.conversion.validate import validate_data_file
from robopipe.jobs import logged
from robopipe.source_cache import fetch_data_file_sources

with logged(snakemake, pandas=False) as log:
    plan = load_plan(snakemake.input.plan)
    aggregate_data(list(snakemake.input.shards), snakemake.output.data)
    log.info("wrote %s from %d shards", snakemake.output.data, len(snakemake.input.shards))
    source = load_planned_source(plan.source, plan.dataset, plan)
    chunk, file = int(snakemake.wildcards.chunk), int(snakemake.wildcards.file)
    fetch_data_file_sources(source, plan, chunk, file)  # a remote source's
    report = validate_data_file(
        source,
        plan,
        Path(snakemake.output.data).parents[2],  # staging/data/chunk-XXX/file-YYY.parquet
        chunk,
        file,
        tolerance_s=plan.options.tolerance_s,
    )
    write_json(snakemake.output.report, report)
    log.info("valid: %s", report)
