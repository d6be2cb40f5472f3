"""Snakemake job: the content checks of one batch of episodes (robopipe.quality.check_batch)."""

from robopipe.jobs import logged
from robopipe.quality import QualityOptions, check_batch
from robopipe.workflow.quality import batch_episodes

with logged(snakemake) as log:
    params = snakemake.params
    episodes = batch_episodes(
        snakemake.wildcards.quality_batch,
        plan=snakemake.input.get("plan"),
        batches=snakemake.input.get("batches"),
    )
    log.info("%s: %d episodes of %s", snakemake.wildcards.quality_batch, len(episodes), params.root)
    check_batch(
        params.root,
        episodes,
        QualityOptions.from_config(params.options),
        snakemake.output[0],
        storage_options=params.storage_options or None,
    )
    log.info("wrote %s", snakemake.output[0])
