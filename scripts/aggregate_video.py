"""Snakemake job: write one camera's v3.0 video file from its shards (stream copy)."""

from robopipe.aggregate import aggregate_video
from robopipe.jobs import logged

with logged(snakemake) as log:
    aggregate_video(list(snakemake.input), snakemake.wildcards.video_key, snakemake.output[0])
    log.info("wrote %s from %d shards", snakemake.output[0], len(snakemake.input))
