"""Snakemake job: publish the validated dataset as results/{dataset}/v3.0/ in one rename, then
remove a remote source's cache on this node (params.cache; "" to keep it)."""

from pathlib import Path

from robopipe.conversion.plan import load_plan
from robopipe.conversion.publish import publish
from robopipe.jobs import logged
from robopipe.source_cache import remove_cache

with logged(snakemake, pandas=False) as log:
    final = Path(snakemake.output[0]).parents[1]  # the declared output is <v3.0>/meta/info.json
    publish(Path(snakemake.input.meta).parent, load_plan(snakemake.input.plan), final)
    log.info("published %s", final)
    if snakemake.params.cache and remove_cache(snakemake.params.cache):
        log.info("removed the source cache %s", snakemake.params.cache)
