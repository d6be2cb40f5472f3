"""Snakemake job: plan the conversion of a robomimic file (robomimic/plan.json)."""

from robopipe.atomic import write_json
from robopipe.jobs import logged
from robopipe.robomimic.to_v21 import RobomimicOptions, make_plan

with logged(snakemake) as log:
    options = RobomimicOptions(**snakemake.params.options)
    plan = make_plan(snakemake.input.hdf5, snakemake.wildcards.dataset, options)
    write_json(snakemake.output.plan, plan, indent=None)
    log.info("%d demos, %d frames in %d batches", len(plan["demos"]), plan["total_frames"],
             len(plan["batches"]))  # fmt: skip
