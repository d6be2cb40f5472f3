"""Snakemake job: write one camera's v3.0 video file from its episodes' mp4s (stream copy)."""

from robopipe.conversion.aggregate import aggregate_video
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.jobs import logged

with logged(snakemake) as log:
    wildcards = snakemake.wildcards
    plan = load_plan(snakemake.input.plan)
    aggregate_video(
        load_planned_source(plan.source, plan.dataset, plan),
        plan,
        wildcards.video_key,
        int(wildcards.chunk),
        int(wildcards.file),
        snakemake.output.video,
        snakemake.output.episodes,
    )
    log.info("wrote %s", snakemake.output.video)
