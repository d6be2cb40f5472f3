"""Snakemake job: write one v3.0 data file from its shards."""

from robopipe.conversion.aggregate import aggregate_data
from robopipe.jobs import logged

with logged(snakemake) as log:
    aggregate_data(list(snakemake.input), snakemake.output[0])
    log.info("wrote %s from %d shards", snakemake.output[0], len(snakemake.input))
