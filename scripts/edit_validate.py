"""Snakemake job: validate an edit's staged output as a whole (after every file's own proof)."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.edits.plan import load_edit_plan
from robopipe.edits.validate import load_reports, validate_edit
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    reports = load_reports(snakemake.input.reports)
    summary = validate_edit(
        load_edit_plan(snakemake.input.plan), Path(snakemake.input.meta).parent, reports
    )
    write_json(snakemake.output[0], summary)
    log.info("valid: %s", summary)
