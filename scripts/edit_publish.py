"""Snakemake job: publish an edit's validated output as results/{dataset}/v3.0/ in one rename."""

from pathlib import Path

from robopipe.conversion.publish import publish
from robopipe.edits.plan import load_edit_plan
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    final = Path(snakemake.output[0]).parents[1]  # the declared output is <v3.0>/meta/info.json
    publish(Path(snakemake.input.meta).parent, load_edit_plan(snakemake.input.plan), final)
    log.info("published %s", final)
