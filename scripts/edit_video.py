"""Snakemake job: write one output video file of an edit by stream copy (or link it), then
prove its packets against its input's."""

from robopipe.edits.files import write_video_file
from robopipe.edits.plan import load_edit_plan
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    report = write_video_file(
        load_edit_plan(snakemake.input.plan),
        snakemake.wildcards.video_key,
        int(snakemake.wildcards.chunk),
        int(snakemake.wildcards.file),
        snakemake.output.video,
        snakemake.output.report,
    )
    how = "linked" if report["linked"] else f"cut by stream copy, {report['packets']} packets"
    log.info("%s: %s; re-encoded: %d", report["file"], how, report["reencoded"])
