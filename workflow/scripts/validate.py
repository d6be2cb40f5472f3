"""Snakemake job: validate the staged v3.0 dataset against its plan and source."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.plan import load_plan
from robopipe.conversion.validate import validate
from robopipe.formats.v21_reader import load_source
from robopipe.jobs import logged

with logged(snakemake) as log:
    plan = load_plan(snakemake.input.plan)
    summary = validate(
        load_source(plan.source, plan.dataset),
        plan,
        Path(snakemake.input.meta).parent,
        frames=plan.options.validate_frames,
        tolerance_s=plan.options.tolerance_s,
        threads=snakemake.threads,
    )
    write_json(snakemake.output[0], summary)
    log.info("valid: %s", summary)
