"""Snakemake job: a v3.0 dataset's quality batches, each data file's episodes from
meta/episodes (robopipe.workflow.quality.v30_batches)."""

from robopipe.jobs import logged
from robopipe.retry import RetryBudget
from robopipe.workflow.quality import v30_batches, write_batches

with logged(snakemake) as log:
    params = snakemake.params
    batches = v30_batches(
        params.root,
        storage_options=params.storage_options or None,
        selected=params.selected,
        name=snakemake.wildcards.dataset,
        retry_budget=RetryBudget.from_config(params.retry),
    )
    write_batches(batches, snakemake.output[0])
    log.info("%d batches of %d episodes", len(batches), sum(map(len, batches.values())))
