"""Snakemake job: write meta/ (info, tasks, episodes, stats) of the staged v3.0 dataset."""

from robopipe.atomic import atomic_path
from robopipe.conversion.meta import write_meta
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.jobs import logged

with logged(snakemake) as log:
    plan = load_plan(snakemake.input.plan)
    with atomic_path(snakemake.output[0]) as tmp:
        write_meta(
            load_planned_source(plan.source, plan.dataset, plan),
            plan,
            snakemake.input.video_episodes,
            tmp,
            restamp_timestamps=plan.options.restamp_timestamps,
            shard_dirs=snakemake.input.shards,
        )
    log.info("wrote %s", snakemake.output[0])
