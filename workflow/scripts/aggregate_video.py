"""Snakemake job: write one camera's v3.0 video file from its episodes' mp4s (stream copy)."""

from robopipe.conversion.aggregate import aggregate_video
from robopipe.conversion.plan import load_plan
from robopipe.formats.v21_reader import load_source
from robopipe.jobs import logged

with logged(snakemake) as log:
    wildcards = snakemake.wildcards
    plan = load_plan(snakemake.input.plan)
    aggregate_video(
        load_source(plan.source, plan.dataset),
        plan,
        wildcards.video_key,
        int(wildcards.chunk),
        int(wildcards.file),
        snakemake.output.video,
        snakemake.output.episodes,
    )
    log.info("wrote %s", snakemake.output.video)
