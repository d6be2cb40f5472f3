"""Snakemake job: write meta/ (info, tasks, episodes, stats) of the staged v3.0 dataset."""

from pathlib import Path

from robopipe.atomic import atomic_path
from robopipe.jobs import logged
from robopipe.meta import write_meta
from robopipe.plan import load_plan
from robopipe.source import load_source

with logged(snakemake) as log:
    plan = load_plan(snakemake.input.plan)
    source = load_source(snakemake.params.source, snakemake.wildcards.dataset)
    shard_dirs = {Path(d).name: Path(d) for d in snakemake.input.shards}
    with atomic_path(snakemake.output[0]) as tmp:
        write_meta(
            source,
            plan,
            shard_dirs,
            tmp,
            restamp_timestamps=snakemake.params.options["restamp_timestamps"],
        )
    log.info("wrote %s", snakemake.output[0])
