"""Snakemake job: plan the conversion of one dataset (results/{dataset}/plan.json)."""

from robopipe.conversion.options import ConversionOptions
from robopipe.conversion.plan import make_plan
from robopipe.formats.v21_reader import load_source
from robopipe.jobs import logged

with logged(snakemake, pandas=False) as log:
    options = ConversionOptions.from_config(snakemake.params.options)
    source = load_source(
        snakemake.params.source,
        snakemake.wildcards.dataset,
        template_placeholders=options.template_placeholders,
    )
    plan = make_plan(source, options)
    plan.save(snakemake.output.plan)
    log.info("%d episodes in %d shards", len(plan.episodes), len(plan.shards))
