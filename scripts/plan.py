"""Snakemake job: plan the conversion of one dataset (results/{dataset}/plan.json), as its
source's family plans (robopipe.workflow.source_jobs.plan): a remote source is listed first
into its manifest, from which later jobs read it; a local one's plan is the main Snakemake's
parse-time plan where no source file changed since (robopipe.conversion.plan.reuse_plan), else
made again from every parquet footer."""

from robopipe.jobs import logged
from robopipe.workflow import source_jobs

with logged(snakemake, pandas=False) as log:
    plan = source_jobs.plan(snakemake.params.source)
    plan.save(snakemake.output.plan)
    log.info("%d episodes in %d shards", len(plan.episodes), len(plan.shards))
