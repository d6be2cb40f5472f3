"""Snakemake job: publish the validated dataset as results/{dataset}/v3.0/ in one rename."""

from pathlib import Path

from robopipe.jobs import logged
from robopipe.conversion.plan import load_plan
from robopipe.conversion.publish import publish

with logged(snakemake) as log:
    publish(Path(snakemake.input.meta).parent, load_plan(snakemake.input.plan), snakemake.output[0])
    log.info("published %s", snakemake.output[0])
