"""Snakemake job: write one output video file of an edit by stream copy (or link it, or
re-encode it where a cut falls inside a GOP), then prove it against its input."""

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
    if report["reencoded"]:
        log.warning(
            "%s: re-encoded (%d packets): episodes %s start inside a GOP; PSNR %.1f dB",
            report["file"],
            report["packets"],
            report["reencoded_for"],
            report["fidelity"]["psnr_mean_db"] or float("inf"),
        )
    else:
        how = "linked" if report["linked"] else f"cut by stream copy, {report['packets']} packets"
        log.info("%s: %s; re-encoded: 0", report["file"], how)
