"""Snakemake job: download a v2.1 dataset from the Hugging Face Hub."""

from robopipe.hub import fetch_dataset
from robopipe.jobs import logged

with logged(snakemake) as log:
    fetch_dataset(snakemake.params.repo_id, snakemake.params.revision, snakemake.output[0])
    log.info("fetched %s@%s", snakemake.params.repo_id, snakemake.params.revision)
