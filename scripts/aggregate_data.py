"""Snakemake job: write one v3.0 data file from its shards, then check it row by row against
the source."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.aggregate import aggregate_data
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.conversion.validate import validate_data_file
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    plan = load_plan(snakemake.input.plan)
    aggregate_data(list(snakemake.input.shards), snakemake.output.data)
    log.info("wrote %s from %d shards", snakemake.output.data, len(snakemake.input.shards))
    report = validate_data_file(
        load_planned_source(plan.source, plan.dataset, plan),
        plan,
        Path(snakemake.output.data).parents[2],  # staging/data/chunk-XXX/file-YYY.parquet
        int(snakemake.wildcards.chunk),
        int(snakemake.wildcards.file),
        tolerance_s=plan.options.tolerance_s,
    )
    write_json(snakemake.output.report, report)
    log.info("valid: %s", report)
