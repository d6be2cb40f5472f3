"""Snakemake job: validate the staged v3.0 dataset as a whole (after every file's own check)."""

import json
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.plan import load_plan, load_planned_source
from robopipe.conversion.validate import validate
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    plan = load_plan(snakemake.input.plan)
    reports = [json.loads(Path(p).read_text("utf-8")) for p in snakemake.input.reports]
    summary = validate(
        load_planned_source(plan.source, plan.dataset, plan),
        plan,
        Path(snakemake.input.meta).parent,
        reports,
        peer_python=snakemake.params.peer_python,
    )
    write_json(snakemake.output[0], summary)
    log.info("valid: %s", summary)
