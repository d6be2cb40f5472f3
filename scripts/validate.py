"""Snakemake job: validate the staged v3.0 dataset as a whole (after every file's own check)."""

import json
from pathlib import Path

from robopipe.atomic import write_json
from robopipe.conversion.plan import load_plan
from robopipe.conversion.validate import validate
from robopipe.formats.v21_reader import V21Source
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    plan = load_plan(snakemake.input.plan)
    reports = [json.loads(Path(p).read_text("utf-8")) for p in snakemake.input.reports]
    # the whole-dataset checks read the v3.0 files only: the source just names the dataset in
    # errors, without its episodes.jsonl (0.8 KB per episode)
    source = V21Source(plan.dataset, Path(plan.source), info={}, episodes=[], tasks=[])
    summary = validate(
        source,
        plan,
        Path(snakemake.input.meta).parent,
        reports,
        peer_python=snakemake.params.peer_python,
    )
    write_json(snakemake.output[0], summary)
    log.info("valid: %s", summary)
