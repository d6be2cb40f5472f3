"""Snakemake job: validate one staged v3.0 data file row by row against the source."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.conversion.validate import validate_data_file
from robopipe.jobs import logged

with logged(snakemake) as log:
    plan = load_plan(snakemake.input.plan)
    report = validate_data_file(
        load_planned_source(plan.source, plan.dataset, plan),
        plan,
        Path(snakemake.input.data).parents[2],  # staging/data/chunk-XXX/file-YYY.parquet
        int(snakemake.wildcards.chunk),
        int(snakemake.wildcards.file),
        tolerance_s=plan.options.tolerance_s,
    )
    write_json(snakemake.output[0], report)
    log.info("valid: %s", report)
