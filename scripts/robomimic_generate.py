"""Snakemake job: generate a small robomimic HDF5 file with image observations."""

from robopipe.jobs import logged
from robopipe.robomimic.generate import generate_robomimic

with logged(snakemake) as log:
    generate_robomimic(snakemake.output[0], **snakemake.params.options)
    log.info("generated %s", snakemake.output[0])
