"""Snakemake job: validate one staged v3.0 video file packet by packet against the source."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.conversion.validate import validate_video_file
from robopipe.jobs import logged

with logged(snakemake) as log:
    plan = load_plan(snakemake.input.plan)
    wildcards = snakemake.wildcards
    report = validate_video_file(
        load_planned_source(plan.source, plan.dataset, plan),
        plan,
        Path(snakemake.input.video).parents[3],  # staging/videos/<key>/chunk-XXX/file-YYY.mp4
        wildcards.video_key,
        int(wildcards.chunk),
        int(wildcards.file),
        snakemake.input.episodes,
        frames=plan.options.validate_frames,
        tolerance_s=plan.options.tolerance_s,
    )
    write_json(snakemake.output[0], report)
    log.info("valid: %s", report)
