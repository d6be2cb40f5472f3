"""Snakemake script of rule ``bench_ceiling``: the dataset's decode ceiling per core."""

from pathlib import Path

from robopipe.atomic import write_json
from robopipe.bench.ceiling import measure_ceiling
from robopipe.jobs import logged

with logged(snakemake) as log:
    # a remote v3.0 dataset's URL, else the local folder of <dataset>/meta/info.json
    root = snakemake.params.url or Path(snakemake.input.dataset).parents[1]
    suffix = snakemake.wildcards.suffix
    result = measure_ceiling(
        str(root),
        snakemake.wildcards.dataset,
        **snakemake.params.options,
        encoding=suffix[2:] if suffix else None,
        storage_options=snakemake.params.storage_options or None,
    )
    write_json(snakemake.output.json, result)
    log.info("%s", result)
