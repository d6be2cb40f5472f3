"""Snakemake script of rule ``h264_copy``: an H.264 copy of a v3.0 dataset, for NVDEC."""

from pathlib import Path

from robopipe.bench.h264 import make_h264_copy
from robopipe.jobs import logged

with logged(snakemake) as log:
    root = Path(snakemake.input.dataset)
    make_h264_copy(root, snakemake.output.dataset, **snakemake.params.options)
    log.info("H.264 copy of %s in %s", root, snakemake.output.dataset)
