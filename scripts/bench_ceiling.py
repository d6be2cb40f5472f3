"""Snakemake script of rule ``bench_ceiling``: the dataset's decode ceiling per core."""

from robopipe.atomic import write_json
from robopipe.bench.ceiling import measure_ceiling
from robopipe.jobs import logged

with logged(snakemake) as log:
    suffix = snakemake.wildcards.suffix
    result = measure_ceiling(
        snakemake.params.root,
        snakemake.wildcards.dataset,
        **snakemake.params.options,
        encoding=suffix[2:] if suffix else None,
        storage_options=snakemake.params.storage_options or None,
    )
    write_json(snakemake.output.json, result)
    log.info("%s", result)
