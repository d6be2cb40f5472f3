"""Snakemake job: generate the built-in demo v2.1 dataset."""

from robopipe.atomic import atomic_path
from robopipe.demo import generate_demo
from robopipe.jobs import logged

with logged(snakemake) as log:
    with atomic_path(snakemake.output[0]) as tmp:
        generate_demo(tmp, **snakemake.params.demo)
    log.info("generated %s", snakemake.output[0])
