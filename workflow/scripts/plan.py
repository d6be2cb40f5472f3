"""Snakemake job: plan the conversion of one dataset (results/{dataset}/plan.json)."""

from robopipe.atomic import write_json
from robopipe.jobs import logged
from robopipe.conversion.plan import PlanOptions, make_plan
from robopipe.formats.v21_reader import load_source

with logged(snakemake) as log:
    opts = snakemake.params.options
    source = load_source(snakemake.params.source, snakemake.wildcards.dataset)
    plan = make_plan(
        source,
        PlanOptions(
            data_file_size_in_mb=opts["data_file_size_in_mb"],
            video_file_size_in_mb=opts["video_file_size_in_mb"],
            chunks_size=opts["chunks_size"],
            episodes_per_batch=opts["episodes_per_batch"],
            skip_episodes=tuple(opts["skip_episodes"]),
        ),
    )
    write_json(snakemake.output.plan, plan, indent=None)
    log.info("%d episodes in %d shards", len(plan["episodes"]), len(plan["shards"]))
