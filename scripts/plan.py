"""Snakemake job: plan the conversion of one dataset (results/{dataset}/plan.json); a remote
source is listed first into its manifest (the job's `source`), from which later jobs read it.
A local source's plan is the main Snakemake's parse-time plan where no source file changed
since (robopipe.conversion.plan.reuse_plan), else made again from every parquet footer."""

from robopipe.conversion.plan import make_plan, plan_remote, reuse_plan
from robopipe.formats.v21_reader import load_source
from robopipe.jobs import logged
from robopipe.layout import PARSE_TIME_PLAN_FILE
from robopipe.options import ConversionOptions

with logged(snakemake, pandas=False) as log:
    options = ConversionOptions.from_config(snakemake.params.options)
    dataset, remote = snakemake.wildcards.dataset, snakemake.params.remote
    if remote:
        plan = plan_remote(snakemake.params.source, dataset, options, **remote)
    else:
        source = load_source(
            snakemake.params.source, dataset, template_placeholders=options.template_placeholders
        )
        plan = reuse_plan(PARSE_TIME_PLAN_FILE.format(dataset=dataset), source, options)
        if plan is None:
            plan = make_plan(source, options)
        else:
            log.info("the parse-time plan: no source file changed since it was made")
    plan.save(snakemake.output.plan)
    log.info("%d episodes in %d shards", len(plan.episodes), len(plan.shards))
