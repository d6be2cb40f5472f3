"""Snakemake job: write one camera's v3.0 video file from its episodes' mp4s (stream copy),
then check it packet by packet against what was read from the source."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.aggregate import aggregate_video
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.conversion.validate import validate_video_file
from robopipe.jobs import logged
from robopipe.source_cache import fetch_video_file_sources

with logged(snakemake, pandas=False) as log:
    wildcards = snakemake.wildcards
    plan = load_plan(snakemake.input.plan)
    source = load_planned_source(plan.source, plan.dataset, plan)
    chunk, file = int(wildcards.chunk), int(wildcards.file)
    fetch_video_file_sources(source, plan, wildcards.video_key, chunk, file)  # a remote source's
    output = snakemake.output
    aggregate_video(source, plan, wildcards.video_key, chunk, file, output.video, output.episodes)
    log.info("wrote %s", output.video)
    report = validate_video_file(
        source,
        plan,
        Path(output.video).parents[3],  # staging/videos/<key>/chunk-XXX/file-YYY.mp4
        wildcards.video_key,
        chunk,
        file,
        output.episodes,
        frames=plan.options.validate_frames,
        tolerance_s=plan.options.tolerance_s,
    )
    write_json(output.report, report)
    log.info("valid: %s", report)
