"""Snakemake job: pack one shard of episodes (results/{dataset}/shards/{shard}/)."""

from robopipe.jobs import logged
from robopipe.conversion.plan import load_plan
from robopipe.conversion.shard import build_shard
from robopipe.formats.v21_reader import load_source

with logged(snakemake) as log:
    opts = snakemake.params.options
    source = load_source(snakemake.params.source, snakemake.wildcards.dataset)
    build_shard(
        source,
        load_plan(snakemake.input.plan),
        snakemake.wildcards.shard,
        snakemake.output[0],
        restamp_timestamps=opts["restamp_timestamps"],
        tolerance_s=opts["tolerance_s"],
    )
    log.info("wrote %s", snakemake.output[0])
