"""Snakemake job: write meta/ (info, tasks, episodes, stats) of an edit's staged output."""

from robopipe.atomic import atomic_path
from robopipe.edits.meta import write_edit_meta
from robopipe.edits.plan import load_edit_plan
from robopipe.jobs import logged

with logged(snakemake) as log:
    with atomic_path(snakemake.output[0]) as tmp:
        write_edit_meta(
            load_edit_plan(snakemake.input.plan),
            snakemake.input.video_reports,
            tmp,
            snakemake.input.data_reports,
        )
    log.info("wrote %s", snakemake.output[0])
