"""Snakemake job: link the batches into results/{dataset}/robomimic_v21 and write its meta."""

from robopipe.jobs import logged
from robopipe.robomimic.to_v21 import assemble, load_plan

with logged(snakemake) as log:
    assemble(load_plan(snakemake.input.plan), snakemake.input.batches, snakemake.output[0])
    log.info("assembled %s", snakemake.output[0])
