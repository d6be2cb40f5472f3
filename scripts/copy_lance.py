"""Snakemake script of rule ``copy_lance``: the Lance layout of a dataset, made by
lerobot-lance-convert in the peer environment, checked and measured."""

import sys
from pathlib import Path

from robopipe.copies.lance import make_lance_copy
from robopipe.errors import DatasetError
from robopipe.jobs import logged

with logged(snakemake) as log:
    try:
        measured = make_lance_copy(
            Path(snakemake.input.dataset).parents[1],  # <dataset>/meta/info.json
            Path(snakemake.output.dataset).parents[1],
            snakemake.output.measurements,
            snakemake.params.python,
        )
    except DatasetError as err:
        log.error("%s", err)
        sys.exit(1)
    log.info("lance: %s", measured)
