"""Snakemake job: validate the staged v3.0 dataset against its plan and source."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.jobs import logged
from robopipe.conversion.plan import load_plan
from robopipe.formats.v21_reader import load_source
from robopipe.conversion.validate import validate

with logged(snakemake) as log:
    opts = snakemake.params.options
    summary = validate(
        load_source(snakemake.params.source, snakemake.wildcards.dataset),
        load_plan(snakemake.input.plan),
        Path(snakemake.input.meta).parent,
        frames=opts["validate_frames"],
        tolerance_s=opts["tolerance_s"],
        threads=snakemake.threads,
    )
    write_json(snakemake.output[0], summary)
    log.info("valid: %s", summary)
