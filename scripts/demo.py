"""Snakemake job: generate the built-in demo v2.1 dataset."""

from robopipe.demo import generate_demo
from robopipe.jobs import logged

with logged(snakemake) as log:
    generate_demo(snakemake.output[0], **snakemake.params.demo)
    log.info("generated %s", snakemake.output[0])
