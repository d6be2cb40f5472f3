"""Snakemake job: write one batch of demos as v2.1 episodes (robomimic/batches/{batch}/)."""

from robopipe.jobs import logged
from robopipe.robomimic.to_v21 import load_plan, write_batch

with logged(snakemake) as log:
    write_batch(load_plan(snakemake.input.plan), snakemake.wildcards.batch, snakemake.output[0])
    log.info("wrote %s", snakemake.output[0])
