"""Snakemake job: pack one shard of episodes (results/{dataset}/shards/{shard}/)."""

from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.conversion.shard import build_shard
from robopipe.jobs import logged
from robopipe.source_cache import fetch_shard_files

with logged(snakemake, pandas=False) as log:
    plan = load_plan(snakemake.input.plan)
    source = load_planned_source(plan.source, plan.dataset, plan)
    fetch_shard_files(source, plan, snakemake.wildcards.shard)  # a remote source's
    build_shard(
        source,
        plan,
        snakemake.wildcards.shard,
        snakemake.output[0],
        restamp_timestamps=plan.options.restamp_timestamps,
        tolerance_s=plan.options.tolerance_s,
    )
    log.info("wrote %s", snakemake.output[0])
