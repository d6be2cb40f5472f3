"""Snakemake job: write one output data file of an edit, then prove it against its input."""

from robopipe.edits.files import write_data_file
from robopipe.edits.plan import load_edit_plan
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    report = write_data_file(
        load_edit_plan(snakemake.input.plan),
        int(snakemake.wildcards.chunk),
        int(snakemake.wildcards.file),
        snakemake.output.data,
        snakemake.output.report,
    )
    log.info("valid: %s", report)
